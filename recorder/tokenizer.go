package recorder

import (
	"fmt"
	"sort"
	"strings"
	"sync"

	"github.com/tiktoken-go/tokenizer"
)

// Names of the BPE vocabularies a Tokenizer can use.
const (
	O200kBase  = "o200k_base"  // GPT-4o, GPT-4.1, GPT-5, o-series
	Cl100kBase = "cl100k_base" // GPT-4, GPT-3.5
)

// DefaultTokenizer is the vocabulary used when none is named.
const DefaultTokenizer = O200kBase

// Tokenizer counts tokens under a real BPE vocabulary (tiktoken's o200k_base
// or cl100k_base). It is safe for concurrent use. The vocabulary is loaded
// once per process, on first use (about 6 MB of heap and 20 ms).
type Tokenizer struct {
	name  string
	codec tokenizer.Codec

	wordsOnce sync.Once
	words     []string // see SingleTokenWords
}

var (
	tokenizersMu sync.Mutex // guards tokenizers
	tokenizers   = map[string]*Tokenizer{}
)

// NewTokenizer returns the Tokenizer for a vocabulary name (O200kBase,
// Cl100kBase; "" means DefaultTokenizer). Tokenizers are shared: the same
// name returns the same value.
func NewTokenizer(name string) (*Tokenizer, error) {
	if name == "" {
		name = DefaultTokenizer
	}
	var enc tokenizer.Encoding
	switch name {
	case O200kBase:
		enc = tokenizer.O200kBase
	case Cl100kBase:
		enc = tokenizer.Cl100kBase
	default:
		return nil, fmt.Errorf("unknown tokenizer %q (want %s or %s)", name, O200kBase, Cl100kBase)
	}
	tokenizersMu.Lock()
	defer tokenizersMu.Unlock()
	if t := tokenizers[name]; t != nil {
		return t, nil
	}
	c, err := tokenizer.Get(enc)
	if err != nil {
		return nil, fmt.Errorf("load tokenizer %s: %w", name, err)
	}
	t := &Tokenizer{name: name, codec: c}
	tokenizers[name] = t
	return t, nil
}

// Name reports the vocabulary's name.
func (t *Tokenizer) Name() string { return t.name }

// Count returns the number of tokens of s.
func (t *Tokenizer) Count(s string) int {
	n, err := t.codec.Count(s)
	if err != nil { // the split pattern failed (its time-out): fall back on bytes
		return (len(s) + 3) / 4
	}
	return n
}

// Encode returns the token ids of s.
func (t *Tokenizer) Encode(s string) ([]uint, error) {
	ids, _, err := t.codec.Encode(s)
	return ids, err
}

// SingleTokenWords returns the lower-case ASCII words w (2 to 10 letters)
// for which " "+w is one token of the vocabulary, in token-id order. Text
// made of such words separated by single spaces has exactly one token per
// word under this tokenizer, wherever it is cut: trace import builds its
// prompts from them. The list is computed once per Tokenizer.
func (t *Tokenizer) SingleTokenWords() []string {
	t.wordsOnce.Do(func() {
		type idWord struct {
			id   uint
			word string
		}
		var found []idWord
		// Token ids are dense from 0; the vocabularies hold about 100k and
		// 200k entries. Decode fails on the gaps (special tokens).
		for id := uint(0); id < 210_000; id++ {
			s, err := t.codec.Decode([]uint{id})
			if err != nil || len(s) < 3 || len(s) > 11 || s[0] != ' ' || !isLowerASCII(s[1:]) {
				continue
			}
			if ids, _, err := t.codec.Encode(s); err != nil || len(ids) != 1 {
				continue
			}
			found = append(found, idWord{id, s[1:]})
		}
		sort.Slice(found, func(i, j int) bool { return found[i].id < found[j].id })
		t.words = make([]string, len(found))
		for i, f := range found {
			t.words[i] = f.word
		}
	})
	return t.words
}

func isLowerASCII(s string) bool {
	return s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyz") == ""
}
