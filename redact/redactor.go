package redact

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"slices"
	"strings"
	"sync"
)

// MinKeyBytes is the shortest dataset key New accepts.
const MinKeyBytes = 16

// ErrNoKey is returned by New when no key is given. Callers without a
// configured key use NewRandomKey and print RandomKeyWarning.
var ErrNoKey = errors.New("no redaction key")

// RandomKeyWarning is what a command prints when it falls back to
// NewRandomKey because no key was configured.
const RandomKeyWarning = "warning: no redaction key (REEL_REDACT_KEY or --redact-key-file): " +
	"using a random per-process key; PII tokens and prefix_hashes will not match across recorders or runs"

// NewRandomKey returns a fresh random 32-byte key.
func NewRandomKey() ([]byte, error) {
	k := make([]byte, 32)
	if _, err := rand.Read(k); err != nil {
		return nil, fmt.Errorf("random key: %w", err)
	}
	return k, nil
}

// ParseKey turns the text of REEL_REDACT_KEY or a key file into key bytes:
// surrounding whitespace is trimmed; 64 hex digits or standard base64 of at
// least MinKeyBytes decode; anything else of at least MinKeyBytes is used as
// is.
func ParseKey(text []byte) ([]byte, error) {
	s := strings.TrimSpace(string(text))
	if s == "" {
		return nil, ErrNoKey
	}
	if len(s) == 64 {
		if k, err := hex.DecodeString(s); err == nil {
			return k, nil
		}
	}
	if k, err := base64.StdEncoding.DecodeString(s); err == nil && len(k) >= MinKeyBytes {
		return k, nil
	}
	if len(s) < MinKeyBytes {
		return nil, fmt.Errorf("redaction key is %d bytes, want at least %d", len(s), MinKeyBytes)
	}
	return []byte(s), nil
}

// Redactor applies a Policy with a dataset key. It is safe for concurrent
// use; all state is immutable after New except pools.
type Redactor struct {
	policy      Policy
	key         []byte
	keyID       string
	fingerprint string

	keep, prompt ruleSet
	keepHeaders  map[string]bool
	credHeaders  map[string]bool
	queryKeep    map[string]bool
	topics       *topicIndex // nil without topic rules
	blockBytes   int
	// Chain keys, one per domain, derived from key (see chainKey).
	promptKey, responseKey, fieldKey sipKey

	macs sync.Pool // hash.Hash: HMAC-SHA256 keyed with key
	jobs sync.Pool // *job
	bufs sync.Pool // *[]byte scratch for seed

	clients      detectMemo // client addresses (redactClient)
	headerValues detectMemo // values of kept headers (RedactHeaders)
	servers      detectMemo // host and upstream columns (detectServer)

	// walkEveryEvent turns reframe off: the tests' reference output.
	walkEveryEvent bool
}

// New binds a policy to a dataset key (at least MinKeyBytes). A nil policy
// means DefaultPolicy.
func New(p *Policy, key []byte) (*Redactor, error) {
	if len(key) == 0 {
		return nil, ErrNoKey
	}
	if len(key) < MinKeyBytes {
		return nil, fmt.Errorf("redaction key is %d bytes, want at least %d", len(key), MinKeyBytes)
	}
	if p == nil {
		p = DefaultPolicy()
	}
	if err := p.validate(); err != nil {
		return nil, fmt.Errorf("policy: %w", err)
	}
	r := &Redactor{
		policy:      clonePolicy(p),
		key:         slices.Clone(key),
		keep:        compileRules(p.Keep),
		prompt:      compileRules(p.Prompt),
		keepHeaders: set(p.KeepHeaders, true),
		credHeaders: set(p.CredentialHeaders, true),
		queryKeep:   set(p.QueryKeep, false),
		topics:      compileTopics(p.Topics),
		blockBytes:  p.BlockBytes,
	}
	if r.blockBytes <= 0 {
		r.blockBytes = DefaultBlockBytes
	}
	r.macs.New = func() any { return hmac.New(sha256.New, r.key) }
	r.jobs.New = func() any { return new(job) }
	r.bufs.New = func() any { b := make([]byte, 0, 256); return &b }
	mac := r.mac()
	mac.Write([]byte{domainKeyID})
	r.keyID = hex.EncodeToString(mac.Sum(nil)[:6])
	r.putMAC(mac)
	r.promptKey = r.deriveSipKey(domainPrompt)
	r.responseKey = r.deriveSipKey(domainResponse)
	r.fieldKey = r.deriveSipKey(domainField)
	r.fingerprint = fmt.Sprintf("%s prefix_block=%dB policy=%s key=%s", Scheme, r.blockBytes, r.policy.fingerprint(), r.keyID)
	return r, nil
}

// Fingerprint identifies the scheme, the prefix block size, the policy and
// the key (by a keyed digest, never the key itself), as in
// "redact/2 prefix_block=64B policy=7ffd9dffbfaa key=42653c60af43";
// writers store it in every file's metadata (reel.redaction). Two datasets
// with the same fingerprint have matching synthetic text, tokens and prefix
// hashes. SchemeOf reads the scheme back.
func (r *Redactor) Fingerprint() string { return r.fingerprint }

// KeyID is a short keyed digest naming the key without revealing it.
func (r *Redactor) KeyID() string { return r.keyID }

// Policy returns a copy of the policy in force.
func (r *Redactor) Policy() *Policy {
	p := clonePolicy(&r.policy)
	return &p
}

func (r *Redactor) mac() hash.Hash {
	m := r.macs.Get().(hash.Hash)
	m.Reset()
	return m
}

func (r *Redactor) putMAC(m hash.Hash) { r.macs.Put(m) }

// deriveSipKey derives the chain key of a domain: the first 16 bytes of
// HMAC-SHA256(key, "chain/2" || domain). The dataset key itself never
// meets SipHash.
func (r *Redactor) deriveSipKey(domain byte) sipKey {
	m := r.mac()
	m.Write([]byte("chain/2"))
	m.Write([]byte{domain})
	sum := m.Sum(nil)
	r.putMAC(m)
	return sipKey{k0: binary.LittleEndian.Uint64(sum[:8]), k1: binary.LittleEndian.Uint64(sum[8:16])}
}

// chainKey is the chain key of a document domain.
func (r *Redactor) chainKey(domain byte) sipKey {
	if domain == domainResponse {
		return r.responseKey
	}
	return r.promptKey
}

// synthesizeField appends synthetic text for a string keyed by its own
// value (a field outside prompt scope): a chain of its own, so the same
// value always gives the same text, unrelated to any other value's.
// jsonEscape escapes it as JSON string content (see chain.synthesize).
func (r *Redactor) synthesizeField(c *chain, dst, val []byte, jsonEscape bool) []byte {
	c.reset(r.fieldKey, r.blockBytes, false)
	return c.synthesize(dst, val, jsonEscape, nil, nil)
}

// SchemeOf returns the synthesis scheme a Fingerprint names ("redact/1",
// "redact/2"), "raw" for an unredacted dataset, or "" when fp names none.
func SchemeOf(fp string) string {
	if fp == "raw" {
		return fp
	}
	name, _, _ := strings.Cut(fp, " ")
	if strings.HasPrefix(name, "redact/") {
		return name
	}
	return ""
}

// seed returns a generator keyed by (domain, parts...): deterministic per
// value, unrelated across keys.
func (r *Redactor) seed(domain byte, parts ...string) rng {
	m := r.mac()
	buf := r.bufs.Get().(*[]byte)
	b := append((*buf)[:0], domain)
	for _, p := range parts {
		b = append(b, p...)
		b = append(b, 0)
	}
	m.Write(b)
	b = m.Sum(b[:0])
	g := newRNG(b)
	*buf = b
	r.bufs.Put(buf)
	r.putMAC(m)
	return g
}

// SynthesizeString returns synthetic text for s keyed by its own value:
// same rune count and script classes, deterministic per key.
func (r *Redactor) SynthesizeString(s string) string {
	var c chain
	return string(r.synthesizeField(&c, make([]byte, 0, len(s)), []byte(s), false))
}

func clonePolicy(p *Policy) Policy {
	c := *p
	c.Keep = slices.Clone(p.Keep)
	c.Prompt = slices.Clone(p.Prompt)
	c.KeepHeaders = slices.Clone(p.KeepHeaders)
	c.CredentialHeaders = slices.Clone(p.CredentialHeaders)
	c.QueryKeep = slices.Clone(p.QueryKeep)
	c.Topics = slices.Clone(p.Topics)
	if c.Text == "" {
		c.Text = TextSynthetic
	}
	if c.Binary == "" {
		c.Binary = BinaryFiller
	}
	if c.QueryValues == "" {
		c.QueryValues = QueryDetect
	}
	if c.BlockBytes == 0 {
		c.BlockBytes = DefaultBlockBytes
	}
	return c
}

func set(list []string, fold bool) map[string]bool {
	m := make(map[string]bool, len(list))
	for _, s := range list {
		if fold {
			s = strings.ToLower(s)
		}
		m[s] = true
	}
	return m
}

// redactedMarker is what replaces a dropped header value or field.
func redactedMarker(v string) string { return CredentialMarker(len(v)) }

// CredentialMarker is what a credential header's value is recorded as:
// its presence and length, never its content. The recorder writes it for
// Authorization and Cookie even without redaction (--raw), so a raw
// dataset never holds them either.
func CredentialMarker(n int) string { return fmt.Sprintf("<redacted len=%d>", n) }

// isMarker reports whether v is already a CredentialMarker (a raw dataset
// being redacted again), which keeps its original length.
func isMarker(v string) bool {
	return strings.HasPrefix(v, "<redacted len=") && strings.HasSuffix(v, ">") &&
		strings.Trim(v[len("<redacted len="):len(v)-1], "0123456789") == ""
}

// SchemeNote says what replaying a dataset redacted under scheme means for
// its fidelity, or "" when there is nothing to say (the current scheme,
// raw, or unknown).
func SchemeNote(scheme string) string {
	switch scheme {
	case "redact/1":
		return "redacted under redact/1 (64-byte HMAC blocks): a shared prompt prefix survives only to the last whole block " +
			"before it diverges, so the shadow's prefix-cache reuse can read below production's; it replays as recorded. " +
			"Redact a raw recording again (reel redact) for " + Scheme + ", which keeps shared prefixes to the word"
	}
	return ""
}
