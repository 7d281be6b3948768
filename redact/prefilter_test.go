package redact

import (
	"strings"
	"testing"

	"github.com/reelkit/reel/redact/redacttest"
)

// typicalHeaders are header values as LLM APIs send them; most pass
// needsScan (dates, ids, versions) without holding anything detectable.
var typicalHeaders = map[string]string{
	"Content-Type":                   "application/json",
	"Content-Length":                 "612",
	"Date":                           "Sun, 29 Nov 2026 19:26:52 GMT",
	"User-Agent":                     "OpenAI/Python 1.52.0",
	"X-Request-Id":                   "req_7f3c2a9d1b8e4f60a2c5d9e1f4b7a3c8",
	"Openai-Processing-Ms":           "1234",
	"Openai-Version":                 "2020-10-01",
	"X-Ratelimit-Remaining-Tokens":   "149984",
	"X-Ratelimit-Reset-Tokens":       "6m0s",
	"X-Stainless-Runtime-Version":    "3.12.4",
	"X-Stainless-Package-Version":    "1.52.0",
	"Anthropic-Version":              "2023-06-01",
	"Cache-Control":                  "no-cache, must-revalidate",
	"X-Batch-Size":                   "8",
	"Server":                         "uvicorn",
	"Vary":                           "Accept-Encoding",
	"X-Ratelimit-Limit-Requests":     "10000",
	"X-Stainless-Arch":               "x64",
	"Request-Id":                     "a3f1c2d4-5b6e-4f70-8a9b-0c1d2e3f4a5b",
	"X-Ratelimit-Remaining-Requests": "9999",
}

// TestPrefilter checks that the prefiltered detectors find every corpus
// value, in the positions header values hold them, exactly as running every
// regexp does.
func TestPrefilter(t *testing.T) {
	r := testRedactor(t)
	for _, e := range redacttest.Corpus() {
		for _, in := range []string{e.Value, "x " + e.Value + " y", "for=" + e.Value + ";proto=http", "Bearer " + e.Value} {
			t.Run(e.Type+"/"+in, func(t *testing.T) {
				got, _ := r.detectAll(in, nil, true)
				want, _ := r.detectAll(in, nil, false)
				if got != want {
					t.Fatalf("prefiltered %q = %q, every regexp gives %q", in, got, want)
				}
				if strings.Contains(got, e.Value) {
					t.Fatalf("value survived: %q", got)
				}
			})
		}
	}
	for name, v := range typicalHeaders {
		t.Run("typical/"+name, func(t *testing.T) {
			want, _ := r.detectAll(v, nil, false)
			if got, _ := r.detectAll(v, nil, true); got != want {
				t.Fatalf("prefiltered %q = %q, every regexp gives %q", v, got, want)
			}
		})
	}
}

// TestRedactHeadersNames checks the allocation-free name lookup: lists
// match in any case, credentials always go, unknown names go.
func TestRedactHeadersNames(t *testing.T) {
	r := testRedactor(t)
	h := map[string]string{
		"CONTENT-TYPE":  "application/json",
		"x-request-id":  "mail me at jane.doe@example.com",
		"Authorization": "Bearer sk-abcdefghijklmnopqrstuvwxyz",
		"X-Custom":      "something",
		"Date":          "Sun, 29 Nov 2026 19:26:52 GMT",
		strings.Repeat("X-Very-Long-Header-Name-", 4): "value",
	}
	r.RedactHeaders(h)
	want := map[string]string{
		"CONTENT-TYPE":  "application/json",
		"Authorization": "<redacted len=36>",
		"X-Custom":      "<redacted len=9>",
		"Date":          "Sun, 29 Nov 2026 19:26:52 GMT",
		strings.Repeat("X-Very-Long-Header-Name-", 4): "<redacted len=5>",
	}
	for k, v := range want {
		if h[k] != v {
			t.Errorf("%s = %q, want %q", k, h[k], v)
		}
	}
	if got := h["x-request-id"]; strings.Contains(got, "jane.doe@example.com") || !strings.HasPrefix(got, "mail me at ") {
		t.Errorf("x-request-id = %q: email not replaced", got)
	}
}

// FuzzPrefilter checks the prefiltered detectors against every regexp on
// any input.
func FuzzPrefilter(f *testing.F) {
	for _, e := range redacttest.Corpus() {
		f.Add("x " + e.Value + " y")
	}
	for _, v := range typicalHeaders {
		f.Add(v)
	}
	f.Add("AKIAIOSFODNN7EXAMPLE 4111 1111-1111 1111 +44 20 7946 0958 ::1 10.0.0.1")
	f.Add("aWs_SeCrEt_KeY=wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY00 BEARER abcdefgh")
	r := testRedactor(f)
	f.Fuzz(func(t *testing.T, s string) {
		want, _ := r.detectAll(s, nil, false)
		if got, _ := r.detectAll(s, nil, true); got != want {
			t.Fatalf("prefiltered %q = %q, every regexp gives %q", s, got, want)
		}
	})
}

// BenchmarkRedactHeaders redacts a typical set of request and response
// header values; "all" is the peer: every detector's regexp on every value
// that passes needsScan, as before the prefilter.
func BenchmarkRedactHeaders(b *testing.B) {
	r := testRedactor(b)
	for _, prefilter := range []bool{true, false} {
		name := map[bool]string{true: "prefilter", false: "all"}[prefilter]
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				for _, v := range typicalHeaders {
					r.detectAll(v, nil, prefilter)
				}
			}
		})
	}
}
