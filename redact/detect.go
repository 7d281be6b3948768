package redact

import (
	"net/netip"
	"regexp"
	"strings"
)

// Entity types found by the detectors; Finding.Type holds one of them.
const (
	EntityEmail      = "email"
	EntityPhone      = "phone"
	EntityCNMobile   = "cn_mobile"
	EntityCard       = "credit_card"
	EntityIBAN       = "iban"
	EntityIPv4       = "ipv4"
	EntityIPv6       = "ipv6"
	EntitySSN        = "us_ssn"
	EntityCNID       = "cn_resident_id"
	EntityJWT        = "jwt"
	EntityOpenAIKey  = "openai_key"
	EntityAnthropic  = "anthropic_key"
	EntityAWSKey     = "aws_access_key"
	EntityAWSSecret  = "aws_secret_key"
	EntityGCPKey     = "gcp_api_key"
	EntityGCPToken   = "gcp_oauth_token"
	EntityPrivateKey = "private_key"
	EntityBearer     = "bearer_token"
)

// detector finds one entity type. valid confirms a regexp match (a
// checksum); token makes its deterministic, format-preserving replacement.
type detector struct {
	typ   string
	re    *regexp.Regexp
	valid func(string) bool
	token func(m string, g *rng) string
}

// detectors run in this order: the most specific shapes first, so a JWT is
// not half-eaten as something else.
var detectors = []detector{
	{EntityPrivateKey, regexp.MustCompile(`-----BEGIN [A-Z ]*PRIVATE KEY-----[\s\S]*?-----END [A-Z ]*PRIVATE KEY-----`), nil, tokenPEM},
	{EntityJWT, regexp.MustCompile(`\beyJ[A-Za-z0-9_-]{4,}\.[A-Za-z0-9_-]{4,}\.[A-Za-z0-9_-]*`), nil, tokenKeep(3)},
	{EntityBearer, regexp.MustCompile(`(?i)\bbearer[ \t]+[A-Za-z0-9._~+/=-]{6,}`), nil, tokenBearer},
	{EntityAnthropic, regexp.MustCompile(`\bsk-ant-[A-Za-z0-9_-]{16,}`), nil, tokenKeep(7)},
	{EntityOpenAIKey, regexp.MustCompile(`\bsk-[A-Za-z0-9_-]{16,}`), nil, tokenKeep(3)},
	{EntityAWSKey, regexp.MustCompile(`\b(?:AKIA|ASIA|AGPA|AIDA|AROA|ANPA|ANVA|AIPA)[A-Z0-9]{16}\b`), nil, tokenKeep(4)},
	{EntityAWSSecret, regexp.MustCompile(`(?i)aws_?secret_?(?:access_?)?key["']?\s*[:=]\s*["']?[A-Za-z0-9/+=]{40}`), nil, tokenSuffix(40)},
	{EntityGCPKey, regexp.MustCompile(`\bAIza[0-9A-Za-z_-]{30,40}`), nil, tokenKeep(4)},
	{EntityGCPToken, regexp.MustCompile(`\bya29\.[0-9A-Za-z_-]{16,}`), nil, tokenKeep(5)},
	{EntityEmail, regexp.MustCompile(`[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}`), nil, tokenEmail},
	{EntityIBAN, regexp.MustCompile(`\b[A-Z]{2}[0-9]{2}(?: ?[A-Z0-9]{4}){2,7}(?: ?[A-Z0-9]{1,3})?\b`), validIBAN, tokenIBAN},
	{EntityCNID, regexp.MustCompile(`\b[1-9][0-9]{16}[0-9Xx]\b`), validCNID, tokenCNID},
	// Card numbers start with 2-6 (Mastercard, Amex/JCB/Diners, Visa, Mastercard, Discover/UnionPay):
	// millisecond and microsecond timestamps start with 1 and are left alone.
	{EntityCard, regexp.MustCompile(`\b[2-6](?:[ -]?[0-9]){12,18}\b`), validLuhn, tokenCard},
	{EntitySSN, regexp.MustCompile(`\b[0-9]{3}[- ][0-9]{2}[- ][0-9]{4}\b`), validSSN, tokenSSN},
	{EntityPhone, regexp.MustCompile(`\+[1-9](?:[ -]?\(?[0-9]\)?){6,14}\b`), nil, tokenDigits(2)},
	{EntityCNMobile, regexp.MustCompile(`\b1[3-9][0-9](?:[ -]?[0-9]){8}\b`), nil, tokenCNMobile},
	{EntityIPv6, regexp.MustCompile(`(?i)[0-9a-f]{0,4}(?::[0-9a-f]{0,4}){2,7}`), validIPv6, tokenHex},
	{EntityIPv4, regexp.MustCompile(`\b(?:[0-9]{1,3}\.){3}[0-9]{1,3}\b`), validIPv4, tokenIPv4},
}

// Finding is one detected value.
type Finding struct {
	Type  string
	Value string
	Token string
}

// needsScan is the cheap pre-filter: only text with an '@', two colons,
// seven digits (phones, cards, IDs, IBANs, SSNs), four digits and three
// dots (IPv4), or the first letters of a key or token shape can hold
// anything detectable. Model names like "gpt-4o" skip the regexps.
func needsScan[T string | []byte](s T) bool {
	digits, dots, colons := 0, 0, 0
	for i := 0; i < len(s); i++ {
		switch c := s[i]; c {
		case '@':
			return true
		case ':':
			colons++
		case '.':
			dots++
		case '0', '1', '2', '3', '4', '5', '6', '7', '8', '9':
			digits++
		case 's', 'A', 'e', 'y', 'b', 'B', '-', 'w', 'W':
			if i+2 < len(s) {
				switch string(s[i : i+3]) {
				case "sk-", "AKI", "ASI", "AGP", "AID", "ARO", "ANP", "ANV", "AIP", "AIz", "eyJ", "ya2",
					"bea", "Bea", "BEA", "---", "ws_", "WS_", "wss", "WSS", "Wss":
					return true
				}
			}
		}
	}
	return colons >= 2 || digits >= 7 || digits >= 4 && dots >= 3
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

// detectAll runs the detectors over s in order. With prefilter, a detector
// whose regexp cannot match s's features (prefilter.go) is skipped, and the
// features are taken again after a replacement, as a token may have a new
// shape; without, every regexp runs: the reference the tests compare with.
func (r *Redactor) detectAll(s string, findings *[]Finding, prefilter bool) (string, bool) {
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
		if prefilter && !f.mayMatch(d.typ) || !d.re.MatchString(s) {
			continue
		}
		replaced := false
		s = d.re.ReplaceAllStringFunc(s, func(m string) string {
			if d.valid != nil && !d.valid(m) {
				return m
			}
			g := r.seed(domainPII, d.typ, m)
			t := d.token(m, &g)
			if t == m {
				return m
			}
			changed, replaced = true, true
			if findings != nil {
				*findings = append(*findings, Finding{Type: d.typ, Value: m, Token: t})
			}
			return t
		})
		if prefilter && replaced {
			f = scanFeatures(s)
		}
	}
	return s, changed
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

func tokenPEM(m string, g *rng) string {
	begin := strings.Index(m, "-----\n")
	if begin < 0 {
		begin = strings.Index(m[5:], "-----") + 10
	}
	end := strings.LastIndex(m, "-----END")
	if begin < 0 || end < begin {
		return reshape(m, 0, g)
	}
	return m[:begin] + reshape(m[begin:end], 0, g) + m[end:]
}

func tokenDigits(keep int) func(string, *rng) string {
	return func(m string, g *rng) string { return reshape(m, keep, g) }
}

func tokenEmail(m string, g *rng) string {
	at := strings.LastIndexByte(m, '@')
	dot := strings.LastIndexByte(m, '.')
	if at < 0 || dot < at {
		return reshape(m, 0, g)
	}
	local := []byte(m[:at])
	for i, c := range local {
		if isASCIIAlnum(c) {
			local[i] = alnum[26+g.intn(36)] // lower-case letters and digits
		}
	}
	return string(local) + "@" + reshape(m[at+1:dot], 0, g) + m[dot:]
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
