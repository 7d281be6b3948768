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
	emailRE := regexp.MustCompile(`^[a-z0-9._%+-]+@[A-Za-z0-9.-]+\.[A-Za-z]{2,}$`)
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
			if strings.Contains(out, e.Value) || !strings.HasPrefix(out, "before ") || !strings.HasSuffix(out, " after") {
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
			default: // keys and tokens keep their prefix and length
				if len(tok) != len(e.Value) || tok[:3] != e.Value[:3] {
					t.Errorf("token %q for %q", tok, e.Value)
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
