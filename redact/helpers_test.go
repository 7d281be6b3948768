package redact

import "testing"

var testKey = []byte("test-key-0123456789abcdef")

func testRedactor(tb testing.TB) *Redactor {
	tb.Helper()
	r, err := New(DefaultPolicy(), testKey)
	if err != nil {
		tb.Fatalf("New: %v", err)
	}
	return r
}
