package redact

import (
	"encoding/base64"
	"net/netip"
	"regexp"
	"strings"
	"unicode/utf8"
)

// Entity types found by the detectors; Finding.Type holds one of them.
const (
	EntityEmail       = "email"
	EntityPhone       = "phone"
	EntityCNMobile    = "cn_mobile"
	EntityCard        = "credit_card"
	EntityIBAN        = "iban"
	EntityIPv4        = "ipv4"
	EntityIPv6        = "ipv6"
	EntitySSN         = "us_ssn"
	EntityCNID        = "cn_resident_id"
	EntityJWT         = "jwt"
	EntityOpenAIKey   = "openai_key"
	EntityAnthropic   = "anthropic_key"
	EntityAWSKey      = "aws_access_key"
	EntityAWSSecret   = "aws_secret_key"
	EntityGCPKey      = "gcp_api_key"
	EntityGCPToken    = "gcp_oauth_token"
	EntityGitHub      = "github_token"
	EntityGitLab      = "gitlab_token"
	EntitySlack       = "slack_token"
	EntityStripe      = "stripe_key"
	EntityHuggingFace = "huggingface_token"
	EntitySendGrid    = "sendgrid_key"
	EntityPrivateKey  = "private_key"
	EntityURLPassword = "url_password" // user:password@ in a URL or DSN
	EntityPassword    = "password"     // password=… in a connection string or config line
	EntityBearer      = "bearer_token"
	EntityBase64      = "base64" // base64 whose decoded text holds any of the above
)

// detector finds one entity type. valid confirms a match (a checksum);
// token makes its deterministic, format-preserving replacement; may is a
// necessary condition for re to match, on the cheap features of the text
// (prefilter.go), so that most detectors are skipped on most strings.
//
// Boundaries: Go's \b counts '_' as a word character, so "card_4539…" or
// "tok_sk-proj-…" had none and values glued to a prefix were missed.
// Instead each detector names the bytes that may not touch a match (its
// glue): a match touching one is part of a longer value of another shape —
// a card number inside a longer digit run, an AWS key id inside a longer
// upper-case run — and is left alone. Anything a value's own format cannot
// contain may touch it: "card_4539…", "AKIA…_prod", "/user_4539…/".
type detector struct {
	typ      string
	re       *regexp.Regexp // the value is submatch 1; a right glue check follows it
	leftGlue func(byte) bool
	valid    func(string) bool
	// shrink, when set, gives the part of a match valid refused that may
	// be the value (an IPv6 address followed by ":port").
	shrink func(m string) string
	token  func(m string, g *rng) string
	may    func(f *features) bool
}

// glue classes: bytes that may not touch a value on one side.
const (
	glueNone       = ""
	glueDigit      = "0-9"
	glueAlnum      = "A-Za-z0-9"
	glueUpperDigit = "A-Z0-9"
)

var glueFuncs = map[string]func(byte) bool{
	glueNone:       nil,
	glueDigit:      isDigit,
	glueAlnum:      isASCIIAlnum,
	glueUpperDigit: func(c byte) bool { return isUpper(c) || isDigit(c) },
}

// det builds a detector for the regexp core: left and right are glue
// classes. The right one is part of the regexp, so a quantifier gives back
// what it must ("4111 1111 1111 1111 2024" still finds the card); the left
// one is checked on each match.
func det(typ, core, left, right string, valid func(string) bool, token func(string, *rng) string, may func(*features) bool) detector {
	expr := "(" + core + ")"
	if right != glueNone {
		expr += "(?:[^" + right + "]|$)"
	}
	return detector{typ: typ, re: regexp.MustCompile(expr), leftGlue: glueFuncs[left], valid: valid, token: token, may: may}
}

func withShrink(d detector, shrink func(string) string) detector {
	d.shrink = shrink
	return d
}

// dropLastGroup cuts an IPv6 match before its last ":group" (a port).
func dropLastGroup(m string) string {
	if i := strings.LastIndexByte(m, ':'); i > 0 {
		return m[:i]
	}
	return ""
}

// detectors run in this order: the most specific shapes first, so a JWT is
// not half-eaten as something else. Key patterns follow the providers'
// documented formats (gitleaks' rule set was the reference), loosened in
// length where a provider has changed it before.
var detectors = []detector{
	// A private key block, or its start when the END line was cut off: then
	// the body up to the first character that cannot be in it.
	det(EntityPrivateKey, `-----BEGIN[A-Z ]*PRIVATE KEY(?: BLOCK)?-----(?:[\s\S]*?-----END[A-Z ]*PRIVATE KEY(?: BLOCK)?-----|[A-Za-z0-9+/=:,\s\\-]*)`,
		glueNone, glueNone, nil, tokenPEM, func(f *features) bool { return f.pem }),
	det(EntityJWT, `eyJ[A-Za-z0-9_-]{4,}\.[A-Za-z0-9_-]{4,}\.[A-Za-z0-9_-]*`, glueAlnum, glueNone, nil, tokenKeep(3),
		func(f *features) bool { return f.jwt }),
	// scheme://user:password@: basic auth in URLs and database DSNs.
	det(EntityURLPassword, `[A-Za-z][A-Za-z0-9+.-]*://[^\s/?#@:]*:[^\s/?#]*@`, glueNone, glueNone, nil, tokenUserinfo,
		func(f *features) bool { return f.at && f.scheme }),
	// password=… in key-value connection strings and config lines.
	det(EntityPassword, `(?i)(?:password|passwd|pwd)\s*[=:]\s*(?:"[^"\s]+"|'[^'\s]+'|[^\s"'&;,]+)`, glueAlnum, glueNone, nil, tokenAssignment,
		func(f *features) bool { return f.password }),
	det(EntityBearer, `(?i)bearer[ \t]+[A-Za-z0-9._~+/=-]{6,}`, glueAlnum, glueNone, nil, tokenBearer,
		func(f *features) bool { return f.bearer }),
	det(EntityGitHub, `gh[pousr]_[A-Za-z0-9]{30,255}|github_pat_[A-Za-z0-9_]{22,255}`, glueAlnum, glueNone, nil, tokenAfter("_"),
		func(f *features) bool { return f.github }),
	det(EntityGitLab, `gl(?:pat|ptt|dt|rt|cbt|soat)-[A-Za-z0-9_-]{20,255}`, glueAlnum, glueNone, nil, tokenAfter("-"),
		func(f *features) bool { return f.gitlab }),
	det(EntitySlack, `xox[abeposr]-[A-Za-z0-9-]{10,255}|xapp-[0-9]+-[A-Za-z0-9-]{10,255}|hooks\.slack\.com/(?:services|workflows|triggers)/[A-Za-z0-9+/_-]{16,255}`,
		glueAlnum, glueNone, nil, tokenAfter("-/"), func(f *features) bool { return f.slack }),
	det(EntityStripe, `(?:sk|rk)_(?:live|test|prod)_[A-Za-z0-9]{10,255}|whsec_[A-Za-z0-9]{20,255}`, glueAlnum, glueNone, nil, tokenAfter("_"),
		func(f *features) bool { return f.stripe }),
	det(EntityHuggingFace, `(?:hf|api_org)_[A-Za-z0-9]{30,255}`, glueAlnum, glueNone, nil, tokenAfter("_"),
		func(f *features) bool { return f.huggingFace }),
	det(EntitySendGrid, `SG\.[A-Za-z0-9_-]{16,32}\.[A-Za-z0-9_-]{16,64}`, glueAlnum, glueNone, nil, tokenKeep(3),
		func(f *features) bool { return f.sendGrid }),
	det(EntityAnthropic, `sk-ant-[A-Za-z0-9_-]{16,}`, glueAlnum, glueNone, nil, tokenKeep(7), func(f *features) bool { return f.skKey }),
	det(EntityOpenAIKey, `sk-[A-Za-z0-9_-]{16,}`, glueAlnum, glueNone, nil, tokenKeep(3), func(f *features) bool { return f.skKey }),
	det(EntityAWSKey, `(?:AKIA|ASIA|AGPA|AIDA|AROA|ANPA|ANVA|AIPA)[A-Z0-9]{16}`, glueUpperDigit, glueUpperDigit, nil, tokenKeep(4),
		func(f *features) bool { return f.awsKey }),
	det(EntityAWSSecret, `(?i)aws_?secret_?(?:access_?)?key["']?\s*[:=]\s*["']?[A-Za-z0-9/+=]{40}`, glueNone, glueNone, nil, tokenSuffix(40),
		func(f *features) bool { return f.awsSecret }),
	det(EntityGCPKey, `AIza[0-9A-Za-z_-]{30,40}`, glueAlnum, glueNone, nil, tokenKeep(4), func(f *features) bool { return f.gcpKey }),
	det(EntityGCPToken, `ya29\.[0-9A-Za-z_-]{16,}`, glueAlnum, glueNone, nil, tokenKeep(5), func(f *features) bool { return f.gcpToken }),
	det(EntityEmail, `[A-Za-z0-9_.%+-]+@(?:[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}|localhost)`, glueNone, glueNone, nil, tokenEmail,
		func(f *features) bool { return f.at }),
	det(EntityIBAN, `[A-Z]{2}[0-9]{2}(?: ?[A-Z0-9]{4}){2,7}(?: ?[A-Z0-9]{1,3})?`, glueUpperDigit, glueUpperDigit, validIBAN, tokenIBAN,
		func(f *features) bool { return f.ibanStart }),
	det(EntityCNID, `[1-9][0-9]{16}[0-9Xx]`, glueDigit, glueDigit, validCNID, tokenCNID, func(f *features) bool { return f.digitRun >= 17 }),
	// Card numbers start with 2-6 (Mastercard, Amex/JCB/Diners, Visa, Mastercard, Discover/UnionPay):
	// millisecond and microsecond timestamps start with 1 and are left alone.
	det(EntityCard, `[2-6](?:[ -]?[0-9]){12,18}`, glueDigit, glueDigit, validLuhn, tokenCard, func(f *features) bool { return f.sepRun >= 13 }),
	det(EntitySSN, `[0-9]{3}[- ][0-9]{2}[- ][0-9]{4}`, glueDigit, glueDigit, validSSN, tokenSSN, func(f *features) bool { return f.sepRun >= 9 }),
	det(EntityPhone, `\+[1-9](?:[ -]?\(?[0-9]\)?){6,14}`, glueNone, glueDigit, nil, tokenDigits(2),
		func(f *features) bool { return f.plus && f.digits >= 7 }),
	// North American numbers as people write them: (650) 253-0000,
	// 650-253-0000, 650.253.0000. A bare run of ten digits is not claimed.
	det(EntityPhone, `(?:\([2-9][0-9]{2}\) ?|[2-9][0-9]{2}[.-])[2-9][0-9]{2}[.-][0-9]{4}`, glueDigit, glueDigit, nil, tokenNANP,
		func(f *features) bool { return f.nanpEnd }),
	det(EntityCNMobile, `1[3-9][0-9](?:[ -]?[0-9]){8}`, glueDigit, glueDigit, nil, tokenCNMobile, func(f *features) bool { return f.sepRun >= 11 }),
	// A valid IPv6 address has "::" or seven colons: times like 19:26:52
	// skip the regexp.
	withShrink(det(EntityIPv6, `(?i)[0-9a-f]{0,4}(?::[0-9a-f]{0,4}){2,7}`, glueNone, glueNone, validIPv6, tokenHex,
		func(f *features) bool { return f.doubleColon || f.colons >= 7 }), dropLastGroup),
	det(EntityIPv4, `(?:[0-9]{1,3}\.){3}[0-9]{1,3}`, glueDigit, glueDigit, validIPv4, tokenIPv4, func(f *features) bool { return f.dots >= 3 && f.digits >= 4 }),
}

// Finding is one detected value.
type Finding struct {
	Type  string // detector entity type (Entity* names)
	Value string // the value as found in the text
	Token string // what replaced it
}

// needsScan is the cheap pre-filter: only text with an '@', two colons,
// seven digits (phones, cards, IDs, IBANs, SSNs), four digits and three
// dots (IPv4), the first letters of a key or token shape, or a run that
// may be base64 can hold anything detectable. Model names like "gpt-4o"
// skip the regexps.
func needsScan[T string | []byte](s T) bool {
	digits, dots, colons := 0, 0, 0
	var b64 base64Run
	long := len(s) >= minBase64Run // shorter text holds no base64 run worth decoding
	for i := 0; i < len(s); i++ {
		c := s[i]
		if long && b64.add(c) {
			return true
		}
		switch c {
		case '@':
			return true
		case ':':
			colons++
		case '.':
			dots++
		case '0', '1', '2', '3', '4', '5', '6', '7', '8', '9':
			digits++
		case 's', 'A', 'e', 'y', 'b', 'B', '-', 'w', 'W', 'g', 'x', 'r', 'h', 'S', 'p', 'P', 'a':
			if i+2 < len(s) {
				switch string(s[i : i+3]) {
				case "sk-", "sk_", "rk_", "AKI", "ASI", "AGP", "AID", "ARO", "ANP", "ANV", "AIP", "AIz", "eyJ", "ya2",
					"---", "ws_", "WS_", "wss", "WSS", "Wss",
					"ghp", "gho", "ghu", "ghs", "ghr", "glp", "gld", "glr", "glc", "gls",
					"xox", "xap", "hf_", "SG.", "hoo", "whs":
					return true
				}
				// Case-insensitive shapes: bearer, passw(or)d, pwd.
				if c1, c2 := lowerByte(s[i+1]), lowerByte(s[i+2]); (c|0x20) == 'b' && c1 == 'e' && c2 == 'a' ||
					(c|0x20) == 'p' && (c1 == 'a' && c2 == 's' || c1 == 'w' && c2 == 'd') {
					return true
				}
			}
			if c == 'g' && len(s)-i >= 11 && string(s[i:i+11]) == "github_pat_" || c == 'a' && len(s)-i >= 8 && string(s[i:i+8]) == "api_org_" {
				return true
			}
		}
	}
	return colons >= 2 || digits >= 7 || digits >= 4 && dots >= 3
}

// base64Run follows runs of base64 characters byte by byte. A run of
// minBase64Run or more that mixes upper- and lower-case letters and holds a
// digit or padding may be encoded text worth decoding.
type base64Run struct {
	n     int
	kinds uint8 // b64Upper | b64Lower | b64Digit seen in the run
}

const minBase64Run = 16

// Byte classes of base64Run; b64Other is '+', '/', '-' and '_'.
const (
	b64Upper uint8 = 1 << iota
	b64Lower
	b64Digit
	b64Other
	b64All = b64Upper | b64Lower | b64Digit
)

var base64Class = func() (t [256]uint8) {
	for c := 'A'; c <= 'Z'; c++ {
		t[c] = b64Upper
	}
	for c := 'a'; c <= 'z'; c++ {
		t[c] = b64Lower
	}
	for c := '0'; c <= '9'; c++ {
		t[c] = b64Digit
	}
	t['+'], t['/'], t['-'], t['_'] = b64Other, b64Other, b64Other, b64Other
	return t
}()

func isBase64Byte(c byte) bool { return base64Class[c] != 0 }

// add takes the next byte; it reports whether the run so far qualifies.
func (b *base64Run) add(c byte) bool {
	k := base64Class[c]
	if k == 0 {
		if c != '=' || b.n == 0 {
			*b = base64Run{}
			return false
		}
		k = b64Digit // padding counts as the digit
	}
	b.n++
	b.kinds |= k
	return b.n >= minBase64Run && b.kinds&b64All == b64All
}

// detect replaces every detected value in s by its token.
func (r *Redactor) detect(s string) (string, bool) {
	return r.detectAll(s, nil, true)
}

// Detect returns s with every detected value replaced by its token, and
// what was found.
func (r *Redactor) Detect(s string) (string, []Finding) {
	var fs []Finding
	out, _ := r.detectAll(s, &fs, true)
	return out, fs
}

// detectAll runs the detectors over s in order, then decodes what may be
// base64 and replaces a run whose decoded text holds anything detectable.
// With prefilter, a detector whose regexp cannot match s's features
// (prefilter.go) is skipped, and the features are taken again after a
// replacement, as a token may have a new shape; without, every regexp
// runs: the reference the tests compare with.
func (r *Redactor) detectAll(s string, findings *[]Finding, prefilter bool) (string, bool) {
	return r.detectDepth(s, findings, prefilter, addrsReplace, 0)
}

// addrPolicy says which IP addresses a scan leaves in place.
type addrPolicy uint8

const (
	addrsReplace  addrPolicy = iota // every address is replaced (client addresses, bodies, headers)
	addrsInternal                   // loopback, private and link-local addresses stay
	addrsKeep                       // every address stays
)

// detectError is detect for error strings: loopback, private and
// link-local addresses stay readable, as they name machines inside the
// operator's network, not people, and an error that says which backend
// refused is what makes it worth keeping. A public address there may be a
// client's ("read tcp 10.0.0.5:8000->203.0.113.9:51234") and is replaced.
func (r *Redactor) detectError(s string) string {
	out, _ := r.detectDepth(s, nil, true, addrsInternal, 0)
	return out
}

// detectServer is detect for the host and upstream columns: they name the
// server a client addressed and the backend the gateway used, never a
// person's machine, so addresses stay (replay's recorded-host refusal
// compares them with --target); everything else is replaced as usual.
func (r *Redactor) detectServer(s string) (string, bool) {
	return r.detectDepth(s, nil, true, addrsKeep, 0)
}

// keeps reports whether the policy leaves address m in place.
func (p addrPolicy) keeps(m string) bool {
	switch p {
	case addrsKeep:
		return true
	case addrsInternal:
		a, err := netip.ParseAddr(m)
		return err == nil && (a.IsLoopback() || a.IsPrivate() || a.IsLinkLocalUnicast() || a.IsUnspecified())
	}
	return false
}

// maxBase64Depth bounds how many layers of base64 are decoded.
const maxBase64Depth = 2

func (r *Redactor) detectDepth(s string, findings *[]Finding, prefilter bool, keepAddrs addrPolicy, depth int) (string, bool) {
	if !needsScan(s) {
		return s, false
	}
	var f features
	if prefilter {
		f = scanFeatures(s)
	}
	changed := false
	for i := range detectors {
		d := &detectors[i]
		if prefilter && !d.may(&f) || !d.re.MatchString(s) {
			continue
		}
		out, replaced := d.replace(s, func(m string) (string, int) {
			if d.valid != nil && !d.valid(m) {
				if d.shrink == nil {
					return "", 0
				}
				if m = d.shrink(m); m == "" || !d.valid(m) {
					return "", 0
				}
			}
			if (d.typ == EntityIPv4 || d.typ == EntityIPv6) && keepAddrs.keeps(m) {
				return "", 0
			}
			g := r.seed(domainPII, d.typ, m)
			t := d.token(m, &g)
			if t == m {
				return "", 0
			}
			if findings != nil {
				*findings = append(*findings, Finding{Type: d.typ, Value: m, Token: t})
			}
			return t, len(m)
		})
		if replaced {
			s, changed = out, true
			if prefilter {
				f = scanFeatures(s)
			}
		}
	}
	if depth < maxBase64Depth && (!prefilter || f.base64) {
		if out, replaced := r.detectBase64(s, findings, prefilter, keepAddrs, depth); replaced {
			s, changed = out, true
		}
	}
	return s, changed
}

// replace returns s with each match that touches no glue byte replaced by
// what tok returns for it: a token and how many bytes of the match it
// replaces (0: none, not a value).
func (d *detector) replace(s string, tok func(m string) (string, int)) (string, bool) {
	var out []byte
	last := 0
	for pos := 0; pos < len(s); {
		loc := d.re.FindStringSubmatchIndex(s[pos:])
		if loc == nil {
			break
		}
		a, e := pos+loc[2], pos+loc[3]
		if e > a && (d.leftGlue == nil || a == 0 || !d.leftGlue(s[a-1])) {
			if t, n := tok(s[a:e]); n > 0 {
				if out == nil {
					out = make([]byte, 0, len(s)+16)
				}
				out = append(out, s[last:a]...)
				out = append(out, t...)
				last, pos = a+n, a+n
				continue
			}
		}
		// Nothing here: look again from the next byte that may start a
		// value (a match inside a run of glue bytes cannot).
		pos = a + 1
		for d.leftGlue != nil && pos < len(s) && d.leftGlue(s[pos-1]) {
			pos++
		}
	}
	if out == nil {
		return s, false
	}
	return string(append(out, s[last:]...)), true
}

// detectBase64 decodes each run of s that may be base64 (standard or URL
// alphabet, padded or not) to valid UTF-8 and runs the detectors over the
// decoded text; a run whose text holds anything is replaced by a token of
// the same length and alphabet. A run that does not decode as a whole is
// tried again in pieces split at '-' and '_' (standard base64 glued to a
// name: "tok_Y29udGFjdC…"). Finding.Value is the encoded run.
func (r *Redactor) detectBase64(s string, findings *[]Finding, prefilter bool, keepAddrs addrPolicy, depth int) (string, bool) {
	return r.base64Runs(s, findings, prefilter, keepAddrs, depth, isBase64Byte)
}

func isStdBase64Byte(c byte) bool { return isASCIIAlnum(c) || c == '+' || c == '/' }

func (r *Redactor) base64Runs(s string, findings *[]Finding, prefilter bool, keepAddrs addrPolicy, depth int, in func(byte) bool) (string, bool) {
	var out []byte
	last := 0
	for i := 0; i < len(s); {
		if !in(s[i]) {
			i++
			continue
		}
		j := i
		for j < len(s) && in(s[j]) {
			j++
		}
		for j < len(s) && s[j] == '=' {
			j++
		}
		run := s[i:j]
		t, found := "", false
		if len(run) >= minBase64Run {
			if r.base64Secret(run, prefilter, keepAddrs, depth) {
				g := r.seed(domainPII, EntityBase64, run)
				t, found = reshape(run, 0, &g), true
				if findings != nil {
					*findings = append(*findings, Finding{Type: EntityBase64, Value: run, Token: t})
				}
			} else if strings.ContainsAny(run, "-_") {
				t, found = r.base64Runs(run, findings, prefilter, keepAddrs, depth, isStdBase64Byte)
			}
		}
		if found {
			if out == nil {
				out = make([]byte, 0, len(s))
			}
			out = append(out, s[last:i]...)
			out = append(out, t...)
			last = j
		}
		i = j
	}
	if out == nil {
		return s, false
	}
	return string(append(out, s[last:]...)), true
}

var base64Encodings = []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding, base64.URLEncoding, base64.RawURLEncoding}

// base64Secret reports whether run decodes to text with something
// detectable in it.
func (r *Redactor) base64Secret(run string, prefilter bool, keepAddrs addrPolicy, depth int) bool {
	var b base64Run
	qualifies := false
	for i := 0; i < len(run) && !qualifies; i++ {
		qualifies = b.add(run[i])
	}
	if !qualifies {
		return false
	}
	for _, enc := range base64Encodings {
		dec, err := enc.DecodeString(run)
		if err != nil || len(dec) == 0 || !utf8.Valid(dec) {
			continue
		}
		_, found := r.detectDepth(string(dec), nil, prefilter, keepAddrs, depth+1)
		return found
	}
	return false
}

// detectDigits checks a bare run of digits (a JSON number) for cards, CN
// mobiles and CN resident IDs.
func (r *Redactor) detectDigits(d string) (string, bool) {
	var typ string
	var tok func(string, *rng) string
	switch {
	case len(d) == 18 && validCNID(d):
		typ, tok = EntityCNID, tokenCNID
	case len(d) >= 13 && len(d) <= 19 && d[0] >= '2' && d[0] <= '6' && validLuhn(d):
		typ, tok = EntityCard, tokenCard
	case len(d) == 11 && d[0] == '1' && d[1] >= '3':
		typ, tok = EntityCNMobile, tokenCNMobile
	default:
		return d, false
	}
	g := r.seed(domainPII, typ, d)
	t := tok(d, &g)
	return t, t != d
}

// --- validators ---

func validLuhn(m string) bool {
	sum, n, double := 0, 0, false
	for i := len(m) - 1; i >= 0; i-- {
		c := m[i]
		if c < '0' || c > '9' {
			continue
		}
		v := int(c - '0')
		if double {
			v *= 2
			if v > 9 {
				v -= 9
			}
		}
		sum += v
		double = !double
		n++
	}
	return n >= 13 && n <= 19 && sum%10 == 0
}

func luhnCheckDigit(digits []byte) byte {
	// digits excludes the check digit; the rightmost of them is doubled.
	sum, double := 0, true
	for i := len(digits) - 1; i >= 0; i-- {
		v := int(digits[i] - '0')
		if double {
			v *= 2
			if v > 9 {
				v -= 9
			}
		}
		sum += v
		double = !double
	}
	return byte('0' + (10-sum%10)%10)
}

func validIBAN(m string) bool {
	s := strings.ReplaceAll(m, " ", "")
	if len(s) < 15 || len(s) > 34 {
		return false
	}
	return ibanMod97(s) == 1
}

func ibanMod97(s string) int {
	rot := s[4:] + s[:4]
	mod := 0
	for i := 0; i < len(rot); i++ {
		c := rot[i]
		switch {
		case c >= '0' && c <= '9':
			mod = (mod*10 + int(c-'0')) % 97
		case c >= 'A' && c <= 'Z':
			mod = (mod*100 + int(c-'A'+10)) % 97
		default:
			return -1
		}
	}
	return mod
}

var cnIDWeights = [17]int{7, 9, 10, 5, 8, 4, 2, 1, 6, 3, 7, 9, 10, 5, 8, 4, 2}

const cnIDChecks = "10X98765432"

func cnIDCheck(d string) byte {
	sum := 0
	for i := range 17 {
		sum += int(d[i]-'0') * cnIDWeights[i]
	}
	return cnIDChecks[sum%11]
}

func validCNID(m string) bool {
	if len(m) != 18 {
		return false
	}
	for i := range 17 {
		if m[i] < '0' || m[i] > '9' {
			return false
		}
	}
	c := m[17]
	if c == 'x' {
		c = 'X'
	}
	return cnIDCheck(m) == c
}

func validSSN(m string) bool {
	d := digitsOf(m)
	if len(d) != 9 {
		return false
	}
	area, group, serial := d[:3], d[3:5], d[5:]
	return area != "000" && area != "666" && area[0] != '9' && group != "00" && serial != "0000"
}

func validIPv4(m string) bool {
	a, err := netip.ParseAddr(m)
	return err == nil && a.Is4()
}

func validIPv6(m string) bool {
	if strings.Count(m, ":") < 2 {
		return false
	}
	a, err := netip.ParseAddr(m)
	return err == nil && a.Is6()
}

func digitsOf(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] >= '0' && s[i] <= '9' {
			b.WriteByte(s[i])
		}
	}
	return b.String()
}

// --- tokens: same shape, fresh content, deterministic per key and value ---

const (
	alnum    = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
	lowerAZ  = "abcdefghijklmnopqrstuvwxyz"
	upperAZ  = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
	hexLower = "0123456789abcdef"
)

// reshape replaces letters and digits from position keep on by random ones
// of the same class, keeping everything else.
func reshape(m string, keep int, g *rng) string {
	b := []byte(m)
	for i := keep; i < len(b); i++ {
		c := b[i]
		switch {
		case c >= '0' && c <= '9':
			b[i] = byte('0' + g.intn(10))
		case c >= 'a' && c <= 'z':
			b[i] = lowerAZ[g.intn(26)]
		case c >= 'A' && c <= 'Z':
			b[i] = upperAZ[g.intn(26)]
		}
	}
	return string(b)
}

func tokenKeep(prefix int) func(string, *rng) string {
	return func(m string, g *rng) string { return reshape(m, prefix, g) }
}

func tokenSuffix(n int) func(string, *rng) string {
	return func(m string, g *rng) string { return reshape(m, len(m)-n, g) }
}

func tokenBearer(m string, g *rng) string {
	i := strings.IndexAny(m, " \t")
	return reshape(m, i, g)
}

// tokenPEM keeps the BEGIN and END lines and reshapes the body between
// them (all that follows BEGIN when END is missing).
func tokenPEM(m string, g *rng) string {
	begin := strings.Index(m, "KEY-----")
	if begin < 0 {
		return reshape(m, 0, g)
	}
	begin += len("KEY-----")
	if strings.HasPrefix(m[begin:], " BLOCK-----") {
		begin += len(" BLOCK-----")
	}
	end := strings.LastIndex(m, "-----END")
	if end < begin {
		end = len(m)
	}
	return m[:begin] + reshape(m[begin:end], 0, g) + m[end:]
}

// tokenAfter keeps a key's prefix, up to and including the first of seps,
// and reshapes the rest.
func tokenAfter(seps string) func(string, *rng) string {
	return func(m string, g *rng) string {
		return reshape(m, strings.IndexAny(m, seps)+1, g)
	}
}

// tokenUserinfo keeps a URL's scheme and reshapes its user and password.
func tokenUserinfo(m string, g *rng) string {
	return reshape(m, strings.Index(m, "://")+3, g)
}

// tokenAssignment keeps "password=" and reshapes the value.
func tokenAssignment(m string, g *rng) string {
	return reshape(m, strings.IndexAny(m, "=:")+1, g)
}

// tokenNANP draws a North American number of the same layout whose area
// code and exchange still start with 2-9.
func tokenNANP(m string, g *rng) string {
	b := []byte(reshape(m, 0, g))
	n := 0
	for i, c := range b {
		if !isDigit(c) {
			continue
		}
		if n == 0 || n == 3 {
			b[i] = byte('2' + g.intn(8))
		}
		n++
	}
	return string(b)
}

func tokenDigits(keep int) func(string, *rng) string {
	return func(m string, g *rng) string { return reshape(m, keep, g) }
}

func tokenEmail(m string, g *rng) string {
	at := strings.LastIndexByte(m, '@')
	dot := strings.LastIndexByte(m, '.')
	if at < 0 {
		return reshape(m, 0, g)
	}
	if dot < at { // user@localhost
		dot = len(m)
	}
	local := []byte(m[:at])
	for i, c := range local {
		if isASCIIAlnum(c) {
			local[i] = alnum[26+g.intn(36)] // lower-case letters and digits
		}
	}
	domain := m[at+1 : dot]
	if domain != "localhost" {
		domain = reshape(domain, 0, g)
	}
	return string(local) + "@" + domain + m[dot:]
}

func tokenCard(m string, g *rng) string {
	b := []byte(m)
	var digits []byte
	var pos []int
	for i, c := range b {
		if c >= '0' && c <= '9' {
			pos = append(pos, i)
			if len(pos) > 1 && len(pos) < countDigits(m) {
				b[i] = byte('0' + g.intn(10))
			}
			digits = append(digits, b[i])
		}
	}
	last := pos[len(pos)-1]
	b[last] = luhnCheckDigit(digits[:len(digits)-1])
	if string(b) == m { // same digits drawn: perturb and fix again
		i := pos[len(pos)-2]
		b[i] = '0' + (b[i]-'0'+1)%10
		digits[len(digits)-2] = b[i]
		b[last] = luhnCheckDigit(digits[:len(digits)-1])
	}
	return string(b)
}

func countDigits(s string) int {
	n := 0
	for i := 0; i < len(s); i++ {
		if s[i] >= '0' && s[i] <= '9' {
			n++
		}
	}
	return n
}

func tokenIBAN(m string, g *rng) string {
	b := []byte(reshape(m, 4, g))
	compact := strings.ReplaceAll(string(b), " ", "")
	compact = compact[:2] + "00" + compact[4:]
	check := 98 - ibanMod97(compact)
	b[2], b[3] = byte('0'+check/10), byte('0'+check%10)
	return string(b)
}

func tokenCNID(m string, g *rng) string {
	b := make([]byte, 18)
	b[0] = byte('1' + g.intn(6))
	for i := 1; i < 6; i++ {
		b[i] = byte('0' + g.intn(10))
	}
	year := 1950 + g.intn(55)
	month := 1 + g.intn(12)
	day := 1 + g.intn(28)
	copy(b[6:], []byte{
		byte('0' + year/1000), byte('0' + year/100%10), byte('0' + year/10%10), byte('0' + year%10),
		byte('0' + month/10), byte('0' + month%10), byte('0' + day/10), byte('0' + day%10),
	})
	for i := 14; i < 17; i++ {
		b[i] = byte('0' + g.intn(10))
	}
	b[17] = cnIDCheck(string(b))
	return string(b)
}

func tokenSSN(m string, g *rng) string {
	b := []byte(m)
	area := 100 + g.intn(565) // 100..664: never 000, 666 or 9xx
	group := 1 + g.intn(99)
	serial := 1 + g.intn(9999)
	d := []byte{byte('0' + area/100), byte('0' + area/10%10), byte('0' + area%10),
		byte('0' + group/10), byte('0' + group%10),
		byte('0' + serial/1000), byte('0' + serial/100%10), byte('0' + serial/10%10), byte('0' + serial%10)}
	k := 0
	for i, c := range b {
		if c >= '0' && c <= '9' {
			b[i] = d[k]
			k++
		}
	}
	return string(b)
}

func tokenCNMobile(m string, g *rng) string {
	b := []byte(reshape(m, 2, g))
	b[1] = byte('3' + g.intn(7))
	return string(b)
}

func tokenHex(m string, g *rng) string {
	b := []byte(m)
	for i, c := range b {
		if c != ':' {
			b[i] = hexLower[g.intn(16)]
		}
	}
	return string(b)
}

func tokenIPv4(m string, g *rng) string {
	var b strings.Builder
	for i := range 4 {
		if i > 0 {
			b.WriteByte('.')
		}
		v := 1 + g.intn(254)
		if i == 0 {
			v = 11 + g.intn(212) // a public-looking first octet, never 0, 10 or 127
		}
		b.WriteString(itoa(v))
	}
	return b.String()
}

func itoa(v int) string {
	if v < 10 {
		return string(rune('0' + v))
	}
	var buf [20]byte
	i := len(buf)
	for v > 0 {
		i--
		buf[i] = byte('0' + v%10)
		v /= 10
	}
	return string(buf[i:])
}
