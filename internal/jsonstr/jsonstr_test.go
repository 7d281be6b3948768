package jsonstr

import (
	"encoding/json"
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
}

// FuzzDecode: Decode agrees with json.Unmarshal into a string.
func FuzzDecode(f *testing.F) {
	for _, s := range []string{`"plain"`, `"esc\"aped\\"`, "\"\xe2\x82\"", `"\u0000"`} {
		f.Add([]byte(s))
	}
	f.Fuzz(checkDecode)
}
