// Package redact turns raw LLM traffic into records that keep the length,
// structure, topic and prefix sharing of what was sent, and nothing that
// identifies a person or a secret.
//
// A Policy (DefaultPolicy, or LoadPolicy from a YAML or JSON file) says which
// JSON fields, headers and query values stay verbatim; New binds it to a
// dataset key. Redactor.RedactExchange redacts a formats.Exchange in place
// before anything touches disk:
//
//   - JSON bodies keep keys, nesting, array lengths, numbers, booleans and
//     nulls. Allow-listed strings (model, role, stop, tool names and schemas,
//     …) stay verbatim after PII detection. Every other string becomes
//     synthetic text with the same rune count and script mix: Latin words
//     become dictionary words of the same length, CJK stays CJK, digits stay
//     digits, whitespace and punctuation stay in place.
//   - The synthetic text is drawn block by block (about 16 tokens of text)
//     from a keyed HMAC-SHA256 chain over the prompt text in document order,
//     so two prompts that share their first k blocks share their first k
//     synthetic blocks and their first k PrefixHashes, and nothing after.
//   - PII detectors (email, phone, card, IBAN, IP, SSN, CN resident ID, JWT,
//     API keys, bearer tokens) replace what they find in verbatim fields,
//     paths, queries and header values by deterministic, typed,
//     format-preserving tokens.
//   - Credential headers are replaced by "<redacted len=N>".
//   - Anything that cannot be redacted is emptied, its size kept, and the
//     reason stored in RedactErr (fail closed).
//
// A Redactor is safe for concurrent use. The library never reads the
// environment: callers supply the key (see ParseKey and NewRandomKey).
package redact
