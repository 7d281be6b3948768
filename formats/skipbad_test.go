package formats

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestSkipBadDamagedPages: --skip-bad also skips a file whose footer is
// fine but whose pages are damaged (found only while reading), with a
// warning naming it, and the other files are read in full.
func TestSkipBadDamagedPages(t *testing.T) {
	good := validFile(t)
	// Find a flipped byte that passes the footer checks but breaks a page.
	var bad []byte
	for pos := 0; pos < len(good) && bad == nil; pos++ {
		b := append([]byte(nil), good...)
		b[pos] ^= 0x5a
		if _, err := readDamaged(t, b); errors.Is(err, ErrBadFile) {
			path := filepath.Join(t.TempDir(), "x.parquet")
			os.WriteFile(path, b, 0o644)
			if r, err := OpenReader[Exchange](context.Background(), []string{path}, ReaderOptions{}); err == nil {
				r.Close()
				bad = b // opens, then fails in Next: page damage
			}
		}
	}
	if bad == nil {
		t.Skip("no single flip damaged a page without the footer noticing")
	}
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "a-damaged.parquet"), bad, 0o644)
	os.WriteFile(filepath.Join(dir, "b-good.parquet"), good, 0o644)
	if _, err := readAllErr(dir, ReaderOptions{}); !errors.Is(err, ErrBadFile) {
		t.Fatalf("without SkipBad: %v, want ErrBadFile", err)
	}
	var warned []string
	n, err := readAllErr(dir, ReaderOptions{SkipBad: true, Warn: func(err error) { warned = append(warned, err.Error()) }})
	if err != nil {
		t.Fatalf("SkipBad: %v", err)
	}
	if n < 3 || n > 6 {
		t.Errorf("read %d rows, want the good file's 3 and what came before the damage", n)
	}
	if len(warned) != 1 || !strings.Contains(warned[0], "a-damaged.parquet") || !strings.Contains(warned[0], "damaged pages") {
		t.Errorf("warnings %q: want one naming the damaged file", warned)
	}
}

func readAllErr(dir string, opts ReaderOptions) (int, error) {
	r, err := OpenReader[Exchange](context.Background(), []string{dir}, opts)
	if err != nil {
		return 0, err
	}
	defer r.Close()
	for n := 0; n < 1000; n++ {
		if _, err := r.Next(); err == io.EOF {
			return n, nil
		} else if err != nil {
			return n, err
		}
	}
	return 1000, errors.New("too many rows")
}
