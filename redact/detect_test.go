package redact

import (
	"net/netip"
	"regexp"
	"strings"
	"testing"

	"github.com/reelkit/reel/redact/redacttest"
)

// TestDetectCorpus checks every seeded value is found with its type and
// replaced by a token of the same format, so validators and routes still
// accept it on replay.
func TestDetectCorpus(t *testing.T) {
	r := testRedactor(t)
	emailRE := regexp.MustCompile(`^[a-z0-9_.%+-]+@(?:[A-Za-z0-9.-]+\.[A-Za-z]{2,}|localhost)$`)
	for _, e := range redacttest.Corpus() {
		t.Run(e.Type+"/"+e.Value, func(t *testing.T) {
			in := "before " + e.Value + " after"
			out, found := r.Detect(in)
			if len(found) == 0 {
				t.Fatalf("not detected: %q", in)
			}
			if found[0].Type != e.Type {
				t.Errorf("type %s, want %s", found[0].Type, e.Type)
			}
			// A PEM block cut off before its END line runs to the first
			// character no key body holds: " after" goes with it.
			cutPEM := e.Type == EntityPrivateKey && !strings.Contains(e.Value, "-----END")
			if strings.Contains(out, e.Value) || !strings.HasPrefix(out, "before ") || !strings.HasSuffix(out, " after") && !cutPEM {
				t.Fatalf("output %q", out)
			}
			tok := found[0].Token
			switch e.Type {
			case EntityCard:
				if !validLuhn(tok) || len(tok) != len(e.Value) || tok[0] != e.Value[0] {
					t.Errorf("card token %q: not a Luhn-valid card of the same shape", tok)
				}
			case EntityEmail:
				if !emailRE.MatchString(tok) || len(tok) != len(e.Value) {
					t.Errorf("email token %q", tok)
				}
			case EntityCNID:
				if !validCNID(tok) {
					t.Errorf("CN ID token %q has a bad check digit", tok)
				}
			case EntityIBAN:
				if !validIBAN(tok) || tok[:2] != e.Value[:2] || len(tok) != len(e.Value) {
					t.Errorf("IBAN token %q fails mod 97 or changed shape", tok)
				}
			case EntitySSN:
				if !validSSN(tok) || len(tok) != len(e.Value) {
					t.Errorf("SSN token %q", tok)
				}
			case EntityIPv4:
				if a, err := netip.ParseAddr(tok); err != nil || !a.Is4() {
					t.Errorf("IPv4 token %q", tok)
				}
			case EntityIPv6:
				if a, err := netip.ParseAddr(tok); err != nil || !a.Is6() {
					t.Errorf("IPv6 token %q", tok)
				}
			case EntityPhone, EntityCNMobile:
				if len(tok) != len(e.Value) || countDigits(tok) != countDigits(e.Value) || (tok[0] == '+') != (e.Value[0] == '+') {
					t.Errorf("phone token %q for %q", tok, e.Value)
				}
			case EntityBase64:
				if len(tok) != len(found[0].Value) || strings.Trim(tok, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/=") != "" {
					t.Errorf("base64 token %q", tok)
				}
			default: // keys and tokens keep their prefix and length
				if v := found[0].Value; len(tok) != len(v) || tok[:3] != v[:3] {
					t.Errorf("token %q for %q", tok, v)
				}
			}
		})
	}
}

func TestDetectNegatives(t *testing.T) {
	r := testRedactor(t)
	for _, s := range []string{
		"gpt-4o-mini", "qwen2.5-72b-instruct", "2024-02-01", "12:30:45", "version 1.2.3",
		"4111111111111112",           // fails Luhn
		"DE89370400440532013001",     // fails mod 97
		"110105194912310021",         // bad CN ID check digit
		"000-12-3456", "666-12-3456", // invalid SSN areas
		"999.1.1.1", "sk-short", "chatcmpl-abc123", "max_tokens",
		"task-management-system-for-everyone", // "sk-" inside a word
		"ghost_protocol_handler", "hf_small", "glpat-short", "xoxb-short",
		"6502530000",                                                               // a bare run of digits
		"https://example.com/path", "postgres://db.internal:5432/app", "user@host", // no password, no domain
		"the password is", "Meta-Llama-3.1-70B-Instruct", "req_7f3c2a9d1b8e4f60a2c5d9e1f4b7a3c8",
	} {
		if out, found := r.Detect(s); len(found) > 0 {
			t.Errorf("%q: false positive %+v → %q", s, found, out)
		}
	}
}

func TestDetectDigits(t *testing.T) {
	r := testRedactor(t)
	tests := []struct {
		in   string
		want bool
	}{
		{"4111111111111111", true},
		{"13800138000", true},
		{"440301198503072614", true},
		{"1700000000123", false},    // a millisecond timestamp
		{"1700000000000001", false}, // a microsecond timestamp that happens to pass Luhn
		{"12345678901", false},
	}
	for _, tt := range tests {
		out, ok := r.detectDigits(tt.in)
		if ok != tt.want || len(out) != len(tt.in) || ok && out == tt.in {
			t.Errorf("detectDigits(%q) = %q, %v", tt.in, out, ok)
		}
	}
}

// TestDetectGlued checks values glued to '_', and to letters where their
// format holds none, are found: "card_4539…", "AKIA…_prod", "tok_sk-…".
func TestDetectGlued(t *testing.T) {
	r := testRedactor(t)
	for _, e := range redacttest.Corpus() {
		for _, in := range redacttest.Glued(e) {
			t.Run(e.Type+"/"+in, func(t *testing.T) {
				out, found := r.Detect(in)
				if len(found) == 0 || len(redacttest.Find([]byte(out), "out")) > 0 {
					t.Fatalf("glued value survived: %q → %q", in, out)
				}
			})
		}
	}
	// Glue the format does not allow: part of a longer value of another shape.
	for _, in := range []string{"14539000000001026", "45390000000010261", "XAKIAIOSFODNN7EXAMPLE", "AKIAIOSFODNN7EXAMPLEX", "1650-253-00001"} {
		if out, found := r.Detect(in); len(found) > 0 {
			t.Errorf("%q: found %+v → %q", in, found, out)
		}
	}
}

// TestDetectShapes checks shapes the corpus cannot hold (line breaks) and
// the tokens of the newer detectors.
func TestDetectShapes(t *testing.T) {
	r := testRedactor(t)
	pem := "-----BEGIN EC PRIVATE KEY-----\nMHcCAQEEIBkg4LVWM9nuwNSk3yBy6Ej8ijL0/Ic7s9T1ZgC1s1wcoAoGCCqGSM49\nAwEHoUQDQgAE\n-----END EC PRIVATE KEY-----\n"
	for name, in := range map[string]string{"pem": "key: " + pem + "done", "pem without END": "key: " + pem[:strings.Index(pem, "-----END")]} {
		out, found := r.Detect(in)
		if len(found) != 1 || found[0].Type != EntityPrivateKey || strings.Contains(out, "MHcCAQEEIBkg4LVWM9") || !strings.HasPrefix(out, "key: -----BEGIN EC PRIVATE KEY-----\n") {
			t.Errorf("%s: %q, %+v", name, out, found)
		}
	}
	if out, _ := r.Detect("call (650) 253-0000 or 650-253-0000"); !regexp.MustCompile(`^call \([2-9][0-9]{2}\) [2-9][0-9]{2}-[0-9]{4} or [2-9][0-9]{2}-[2-9][0-9]{2}-[0-9]{4}$`).MatchString(out) || strings.Contains(out, "253-0000") {
		t.Errorf("NANP phones: %q", out)
	}
	if out, _ := r.Detect("dsn postgres://admin:hunter2@db:5432/app"); !strings.HasPrefix(out, "dsn postgres://") || !strings.HasSuffix(out, "@db:5432/app") || strings.Contains(out, "hunter2") || strings.Contains(out, "admin") {
		t.Errorf("DSN: %q", out)
	}
}

func TestCleanURL(t *testing.T) {
	for in, want := range map[string]string{
		"http://svcuser:pw@10.0.0.5:8000":                   "http://10.0.0.5:8000",
		"proxy:https://u:p%40ss@gateway.example.com/v1?x=1": "proxy:https://gateway.example.com/v1?x=1",
		"http://a:b@h1/x and postgres://c:d@e@h2:5432/db":   "http://h1/x and postgres://h2:5432/db",
		"http://127.0.0.1:8000/metrics":                     "http://127.0.0.1:8000/metrics",
		"10.0.0.5:8000":                                     "10.0.0.5:8000",
		"http://user@host/":                                 "http://host/",
		"":                                                  "",
	} {
		if got := CleanURL(in); got != want {
			t.Errorf("CleanURL(%q) = %q, want %q", in, got, want)
		}
	}
}
