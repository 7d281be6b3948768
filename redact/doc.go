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
//   - Synthetic text is drawn word by word from a keyed state over all the
//     text before it (scheme redact/2, see Scheme). The chain's input is
//     every string in prompt scope (Policy.Prompt: messages, system, tools,
//     …) in document order, kept or not, each framed by the key it sits
//     under: 0x1E key 0x1F value. So roles, tool names and field order are
//     in the state, as they are in what the engine's chat template renders;
//     fields outside prompt scope (model, temperature, user, their order)
//     are not. A word is a Latin letter run, a digit run, one Han, kana or
//     Hangul character, or a Cyrillic, Greek or other letter run; it is
//     replaced from the SipHash-1-3 digest of the chain's input up to and
//     including it (the key is derived from the dataset key per domain:
//     request, response, field). Two requests that agree on their first N
//     words (a system prompt, a tool preamble, the earlier turns a chat
//     client re-sends) agree on their first N synthetic words and differ
//     from the first differing word on; the same word after different text
//     becomes different words (no per-word mapping to count). Strings
//     outside prompt scope are keyed by their own value (the same value
//     gives the same text).
//   - PrefixHashes are the chain's digest at the first word or field start
//     after every Policy.BlockBytes (64, about 16 o200k tokens of English)
//     of chain input, plus one at the end: two requests share a leading
//     run of hashes exactly as far as they share whole blocks of prompt.
//     The Fingerprint, stored in every file's reel.redaction metadata,
//     names the scheme and the block size ("redact/2 prefix_block=64B …").
//     Bytes of a scheme never change (testdata/golden); datasets written
//     under redact/1 (64-byte HMAC blocks) still replay, with a note.
//   - PII detectors (email, phone, card, IBAN, IP, SSN, CN resident ID, JWT,
//     cloud and SaaS API keys, bearer tokens, private keys, passwords in URLs
//     and DSNs, and base64 holding any of them; detect.go lists them) replace
//     what they find in verbatim fields, keys, paths, queries, header names
//     and values and every column copied from the request by deterministic,
//     typed, format-preserving tokens. Values glued to '_' or to letters
//     their format cannot hold are found too.
//   - Bodies are classified by what they hold: JSON declared as a form is
//     redacted as JSON.
//   - Credential headers are replaced by "<redacted len=N>".
//   - Anything that cannot be redacted is emptied, its size kept, and the
//     reason stored in RedactErr (fail closed).
//
// CleanURL removes user:password@ from configured URLs before they are
// logged or stored; it needs no key.
//
// A Redactor is safe for concurrent use. The library never reads the
// environment: callers supply the key (see ParseKey and NewRandomKey).
package redact
