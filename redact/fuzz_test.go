package redact

import (
	"encoding/json"
	"os"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/reelkit/reel/redact/redacttest"
)

// maxGrowth bounds output size: a raw control byte inside a string
// (invalid JSON) is written escaped as \u00XX (6 bytes), an invalid UTF-8
// byte becomes U+FFFD (3 bytes), and an IPv4 token can be a few bytes
// longer than the address. Valid JSON text stays within about 1.1×.
func maxGrowth(n int) int { return 6*n + 64 }

func FuzzRedactJSON(f *testing.F) {
	for _, file := range []string{"testdata/chat_en.json", "testdata/chat_zh.json", "testdata/tools.json"} {
		if b, err := os.ReadFile(file); err == nil {
			f.Add(b)
		}
	}
	f.Add([]byte(`{"a":"\ud83d\ude00\u0000","b":[1,-2.5e10,true,null],"model":"x@y.com"}`))
	f.Add([]byte(`{"messages":[{"content":"trunc`))
	f.Add([]byte(`[[[[[["deep"]]]]]]`))
	f.Add([]byte("{\"k\":\"\xff\xfe\"}"))
	f.Add([]byte(`{"card":4111111111111111}`))
	r := testRedactor(f)
	f.Fuzz(func(t *testing.T, in []byte) {
		out := r.RedactJSON(in)
		if len(out) > maxGrowth(len(in)) {
			t.Fatalf("output %d bytes for %d input bytes", len(out), len(in))
		}
		if !json.Valid(in) {
			return
		}
		if !json.Valid(out) {
			t.Fatalf("valid input gave invalid output:\n%q\n%q", in, out)
		}
		var a, b any
		if json.Unmarshal(in, &a) == nil && utf8.Valid(in) {
			if err := json.Unmarshal(out, &b); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(shapeLoose(a), shapeLoose(b)) {
				t.Fatalf("shape changed:\n%q\n%q", in, out)
			}
		}
	})
}

// shapeLoose is shape with numbers reduced to their kind: the number
// detector may replace an integer that looks like a card or an ID.
func shapeLoose(v any) any {
	switch x := v.(type) {
	case map[string]any:
		m := map[string]any{}
		for k, e := range x {
			m[k] = shapeLoose(e)
		}
		return len(m)
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = shapeLoose(e)
		}
		return out
	case float64:
		return "n"
	case string:
		return "s"
	}
	return v
}

func FuzzDetect(f *testing.F) {
	for _, e := range redacttest.Corpus() {
		f.Add("x " + e.Value + " y")
	}
	f.Add("+8613800138000 and 1.2.3.4 and ::1 and fe80::")
	f.Add("Bearer \t x")
	r := testRedactor(f)
	f.Fuzz(func(t *testing.T, s string) {
		out, findings := r.Detect(s)
		if len(out) > 2*len(s)+64 {
			t.Fatalf("output %d bytes for %d", len(out), len(s))
		}
		again, _ := r.Detect(s)
		if again != out {
			t.Fatalf("not deterministic: %q vs %q", out, again)
		}
		for _, fd := range findings {
			if fd.Token == fd.Value {
				t.Fatalf("finding kept its value: %+v", fd)
			}
		}
		if d, ok := r.detectDigits(s); ok && len(d) != len(s) {
			t.Fatalf("digit token changed length: %q → %q", s, d)
		}
	})
}

func FuzzRedactBody(f *testing.F) {
	f.Add("text/event-stream", []byte("data: {\"a\":\"b\"}\n\ndata: [DONE]\n\n"))
	f.Add("application/x-www-form-urlencoded", []byte("a=b&c=%zz&d"))
	f.Add("text/plain", []byte("hello 世界 123"))
	f.Add("", []byte{0, 1, 2, 0xff})
	f.Add("application/json; charset=utf-8", []byte(`{"x":1}`))
	r := testRedactor(f)
	f.Fuzz(func(t *testing.T, ct string, in []byte) {
		for _, resp := range []bool{false, true} {
			var b Body
			var err error
			if resp {
				b, err = r.RedactResponseBody(ct, "", in)
			} else {
				b, err = r.RedactRequestBody(ct, "", in)
			}
			if err != nil {
				// Only a declared text type over bytes that are not text
				// fails closed.
				if e, ok := err.(*Error); !ok || !strings.Contains(e.Reason, "not text") || b.Data != nil {
					t.Fatalf("error on a plain body: %v (data %q)", err, b.Data)
				}
				continue
			}
			// Worst case: an invalid byte in a form value becomes U+FFFD,
			// percent-encoded as %EF%BF%BD (9 bytes).
			if len(b.Data) > 9*len(in)+64 {
				t.Fatalf("output %d bytes for %d", len(b.Data), len(in))
			}
		}
	})
}

// FuzzCleanURL checks CleanURL leaves no user information in any URL of
// its input, is idempotent and only removes bytes.
func FuzzCleanURL(f *testing.F) {
	f.Add("proxy:http://svcuser:pw@10.0.0.5:8000/v1")
	f.Add("postgres://a:b@c@db:5432/x and https://u@h/?q=a@b")
	f.Add("://@:// x://y:z@")
	f.Fuzz(func(t *testing.T, s string) {
		out := CleanURL(s)
		if len(out) > len(s) {
			t.Fatalf("CleanURL(%q) = %q: longer", s, out)
		}
		if again := CleanURL(out); again != out {
			t.Fatalf("not idempotent: %q → %q → %q", s, out, again)
		}
		for rest := out; ; {
			i := strings.Index(rest, "://")
			if i < 0 {
				break
			}
			rest = rest[i+3:]
			authority := rest
			if end := strings.IndexAny(authority, "/?#\\ \t\r\n"); end >= 0 {
				authority = authority[:end]
			}
			if strings.Contains(authority, "@") && !strings.Contains(authority, "://") {
				t.Fatalf("CleanURL(%q) = %q keeps user information %q", s, out, authority)
			}
		}
	})
}
