package redact

import (
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// TestTopicsFoundWhileSynthesizing: the keywords synthesis records on the
// way (chain.synthesize with topics) are exactly those a scan of the same
// text finds, for text of every script around keywords of every kind
// (ASCII at word starts, CJK anywhere, one and two bytes long), inside
// camelCase, after digits and non-ASCII letters, and at the very end.
func TestTopicsFoundWhileSynthesizing(t *testing.T) {
	ix := compileTopics([]TopicRule{
		{Name: "code", Keywords: []string{"func ", "python", "sql", "stack trace", "代码"}},
		{Name: "short", Keywords: []string{"x", "go", "#", "写一"}},
		{Name: "accents", Keywords: []string{"café", "été", "naïve"}},
		{Name: "invalid", Keywords: []string{"\x80x", "\xe4"}}, // lower-cased to U+FFFD
	})
	pieces := []string{"python", "Python", "SQL", "sql", "func ", "stack trace", "stack", " trace", "代码", "写一", "写", "一",
		"x", "X", "go", "Go", "#", "café", "Café", "été", "naïve", "iPython", "3sql", "sql3", "éclair", "caféPython", "ésql",
		" ", ",", "\n", "\"", "Привет", "Ωmega", "日本", "한국", "\xff", "\xe4", "\x80x", "\uFFFDx", "12", "_", "-"}
	rnd := rand.New(rand.NewPCG(1, 2))
	var c chain
	for n := 0; n < 5000; n++ {
		var b strings.Builder
		for k := rnd.IntN(12); k >= 0; k-- {
			b.WriteString(pieces[rnd.IntN(len(pieces))])
		}
		text := []byte(b.String())
		var want, got topicScan
		want.reset(ix)
		got.reset(ix)
		ix.scan(text, &want)
		c.reset(sipKey{}, 64, false)
		c.synthesize(nil, text, n%2 == 0, ix, &got)
		if !slices.Equal(got.seen, want.seen) || !slices.Equal(got.hits, want.hits) {
			t.Fatalf("%q: synthesis found %v (hits %v), a scan %v (hits %v)", text, got.seen, got.hits, want.seen, want.hits)
		}
	}
}
