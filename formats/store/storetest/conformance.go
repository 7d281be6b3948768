package storetest

import (
	"bytes"
	"context"
	"errors"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/reelkit/reel/formats/store"
)

// Conformance checks what package formats relies on from a store.Bucket,
// against a real server: Put (of a file smaller than a part, and of one
// spanning several parts: pass partSize, the backend's), replacing an
// object, Stat, List by prefix in key order, ranged reads (a middle range,
// the tail, past the end), ErrNotExist for missing objects, and Delete,
// which is idempotent.
func Conformance(t *testing.T, b store.Bucket, partSize int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	rng := rand.New(rand.NewPCG(7, 9))
	random := func(n int) []byte {
		p := make([]byte, n)
		for i := range p {
			p[i] = byte(rng.Uint32())
		}
		return p
	}
	dir := t.TempDir()
	put := func(key string, data []byte) {
		t.Helper()
		p := filepath.Join(dir, filepath.Base(key))
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := b.Put(ctx, key, p); err != nil {
			t.Fatalf("put %s (%d bytes): %v", key, len(data), err)
		}
	}
	small := random(100 << 10)
	large := random(2*partSize + partSize/2) // three parts
	put("ds/dt=2025-03-14/hour=10/b.parquet", small)
	put("ds/dt=2025-03-14/hour=09/a.parquet", large)
	put("other/c.parquet", small[:10])
	put("ds/dt=2025-03-14/hour=10/b.parquet", small[:50<<10]) // replaces

	objs, err := b.List(ctx, "ds/")
	if err != nil {
		t.Fatal(err)
	}
	want := []store.Object{{Key: "ds/dt=2025-03-14/hour=09/a.parquet", Size: int64(len(large))}, {Key: "ds/dt=2025-03-14/hour=10/b.parquet", Size: 50 << 10}}
	if len(objs) != len(want) {
		t.Fatalf("list ds/: %+v, want %+v", objs, want)
	}
	for i := range want {
		if objs[i].Key != want[i].Key || objs[i].Size != want[i].Size || objs[i].Modified.IsZero() {
			t.Errorf("list ds/ [%d]: %+v, want %+v with a modification time", i, objs[i], want[i])
		}
	}
	if o, err := b.Stat(ctx, want[0].Key); err != nil || o.Size != want[0].Size {
		t.Errorf("stat %s: %+v, %v", want[0].Key, o, err)
	}

	f, err := b.Open(ctx, want[0].Key)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if f.Size() != int64(len(large)) {
		t.Fatalf("open: size %d, want %d", f.Size(), len(large))
	}
	for _, r := range []struct{ off, n int }{{partSize - 10, 20}, {0, 8}, {len(large) - 8, 8}, {len(large) - 40<<10, 100}, {len(large) - 4, 16}} {
		p := make([]byte, r.n)
		n, err := f.ReadAt(p, int64(r.off))
		end := min(r.off+r.n, len(large))
		if n != end-r.off || !bytes.Equal(p[:n], large[r.off:end]) {
			t.Errorf("read %d bytes at %d: got %d bytes, %v; not the object's", r.n, r.off, n, err)
		}
		if end < r.off+r.n && err != io.EOF {
			t.Errorf("read past the end at %d: %v, want io.EOF", r.off, err)
		}
	}
	if _, err := f.ReadAt(make([]byte, 1), int64(len(large))); err != io.EOF {
		t.Errorf("read at the end: %v, want io.EOF", err)
	}

	for _, key := range []string{"ds/missing.parquet"} {
		if _, err := b.Stat(ctx, key); !errors.Is(err, store.ErrNotExist) {
			t.Errorf("stat %s: %v, want ErrNotExist", key, err)
		}
		if _, err := b.Open(ctx, key); !errors.Is(err, store.ErrNotExist) {
			t.Errorf("open %s: %v, want ErrNotExist", key, err)
		}
	}
	for range 2 {
		if err := b.Delete(ctx, want[1].Key); err != nil {
			t.Errorf("delete %s: %v", want[1].Key, err)
		}
	}
	if _, err := b.Stat(ctx, want[1].Key); !errors.Is(err, store.ErrNotExist) {
		t.Errorf("stat after delete: %v, want ErrNotExist", err)
	}
	if objs, err := b.List(ctx, "ds/"); err != nil || len(objs) != 1 {
		t.Errorf("list after delete: %+v, %v", objs, err)
	}
	if u := b.URL("ds/x.parquet"); u == "" {
		t.Error("URL is empty")
	}
}
