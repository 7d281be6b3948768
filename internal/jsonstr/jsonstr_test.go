package jsonstr

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestDecode(t *testing.T) {
	for _, tc := range []string{`"hello"`, ` "a b" `, `""`, `"a\nb"`, `"\u00e9"`, `"\ud83d\ude00"`, `"\ud800"`, "\"bad \xff\"",
		`"tab	in"`, `"quote"inside"`, `"x`, `x"`, `"`, `null`, `5`, `"日本"`,
		"\v\"\"", "\"a\"\f", "\u00a0\"a\"", "\r\n\t \"a\" "} {
		checkDecode(t, []byte(tc))
	}
}

func checkDecode(t *testing.T, raw []byte) {
	t.Helper()
	got, gotErr := Decode(raw)
	var want string
	wantErr := json.Unmarshal(raw, &want)
	if (gotErr == nil) != (wantErr == nil) || (wantErr == nil && got != want) {
		t.Fatalf("Decode(%q) = %q, %v; encoding/json: %q, %v", raw, got, gotErr, want, wantErr)
	}
	if b, err := DecodeBytes(raw); (err == nil) != (wantErr == nil) || (wantErr == nil && string(b) != want) {
		t.Fatalf("DecodeBytes(%q) = %q, %v; encoding/json: %q, %v", raw, b, err, want, wantErr)
	}
}

// FuzzDecode: Decode and DecodeBytes agree with json.Unmarshal into a string.
func FuzzDecode(f *testing.F) {
	for _, s := range []string{`"plain"`, `"esc\"aped\\"`, "\"\xe2\x82\"", `"\u0000"`} {
		f.Add([]byte(s))
	}
	f.Fuzz(checkDecode)
}

func TestSplice(t *testing.T) {
	for _, tc := range []struct {
		prev, b        string
		prefix, suffix int
	}{
		{`{"c":"ab"}`, `{"c":"abc"}`, 8, 2},
		{`{"c":"abc"}`, `{"c":"ab"}`, 8, 2},
		{`{"c":"x"}`, `{"c":"y"}`, 6, 2},
		{`same`, `same`, 4, 0},
		{``, `abc`, 0, 0},
		{`aaaa`, `aa`, 2, 0},
		{`{"content":" a long token here","id":"chatcmpl-0123456789"}`, `{"content":" other","id":"chatcmpl-0123456789"}`, 13, 29},
	} {
		p, s := Splice([]byte(tc.prev), []byte(tc.b))
		if p != tc.prefix || s != tc.suffix {
			t.Errorf("Splice(%q, %q) = %d, %d; want %d, %d", tc.prev, tc.b, p, s, tc.prefix, tc.suffix)
		}
	}
}

func TestValidContent(t *testing.T) {
	for _, tc := range []string{``, `plain`, `a\nb`, `\"q\"`, `\\`, `\u00e9`, `\uD83D\ude00`, "\xff", `日本`, `a\/b`} {
		if !ValidContent([]byte(tc)) {
			t.Errorf("ValidContent(%q) = false, want true", tc)
		}
	}
	for _, tc := range []string{`"`, `a"b`, `\`, `ab\`, `\x`, `\u12`, `\u12g4`, "tab\tin", "\x00", `\\\`} {
		if ValidContent([]byte(tc)) {
			t.Errorf("ValidContent(%q) = true, want false", tc)
		}
	}
}

// FuzzValidContent: ValidContent holds exactly when the content quoted is
// a JSON string encoding/json accepts (UTF-8 aside).
func FuzzValidContent(f *testing.F) {
	for _, s := range []string{`plain`, `esc\"aped\\`, `\u00e9`, `\u12`, `a\`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, inner []byte) {
		raw := append(append([]byte{'"'}, inner...), '"')
		var s string
		want := json.Unmarshal(raw, &s) == nil
		if got := ValidContent(inner); got != want {
			t.Fatalf("ValidContent(%q) = %v; encoding/json accepts %q: %v", inner, got, raw, want)
		}
	})
}

// FuzzSplice: the spliced parts rebuild both inputs.
func FuzzSplice(f *testing.F) {
	f.Add([]byte(`{"c":"ab"}`), []byte(`{"c":"abc"}`))
	f.Add([]byte(`aaaaaaaaaaaaaaaaaaaa`), []byte(`aaaaaaaaa`))
	f.Fuzz(func(t *testing.T, prev, b []byte) {
		p, s := Splice(prev, b)
		if p+s > min(len(prev), len(b)) || string(prev[:p]) != string(b[:p]) || string(prev[len(prev)-s:]) != string(b[len(b)-s:]) {
			t.Fatalf("Splice(%q, %q) = %d, %d", prev, b, p, s)
		}
		if p < min(len(prev), len(b)) && prev[p] == b[p] {
			t.Fatalf("Splice(%q, %q): prefix %d not the longest", prev, b, p)
		}
		if p+s < min(len(prev), len(b)) && prev[len(prev)-s-1] == b[len(b)-s-1] {
			t.Fatalf("Splice(%q, %q): suffix %d not the longest", prev, b, s)
		}
	})
}

// plainRunBytewise is PlainRun one byte at a time.
func plainRunBytewise(b []byte) int {
	for i, c := range b {
		if c < 0x20 || c == '"' || c == '\\' {
			return i
		}
	}
	return len(b)
}

// TestPlainRun: every byte that ends a run, at every place in and around
// a word, and the bytes next to them that do not.
func TestPlainRun(t *testing.T) {
	for _, c := range []byte{'"', '\\', 0, 0x1f, 0x20, 0x21, '!', '#', '[', ']', 0x7f, 0x80, 0xff, 'a'} {
		for n := 0; n <= 19; n++ {
			for at := 0; at <= n; at++ {
				b := []byte(strings.Repeat("x", n))
				if at < n {
					b[at] = c
				}
				if got, want := PlainRun(b), plainRunBytewise(b); got != want {
					t.Fatalf("PlainRun(%q) = %d, want %d", b, got, want)
				}
			}
		}
	}
}

// FuzzPlainRun: PlainRun agrees with a byte loop.
func FuzzPlainRun(f *testing.F) {
	f.Add([]byte(`a long plain text with a "quote`))
	f.Add([]byte("tab\tand \\ escape"))
	f.Fuzz(func(t *testing.T, b []byte) {
		if got, want := PlainRun(b), plainRunBytewise(b); got != want {
			t.Fatalf("PlainRun(%q) = %d, want %d", b, got, want)
		}
	})
}
