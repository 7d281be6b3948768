package filestore

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/reelkit/reel/formats/store"
)

func TestDir(t *testing.T) {
	ctx := context.Background()
	root := t.TempDir()
	d := New(filepath.Join(root, "ds"))
	if objs, err := d.List(ctx, ""); err != nil || len(objs) != 0 {
		t.Fatalf("list of a missing root: %v, %v", objs, err)
	}
	src := filepath.Join(root, "part")
	os.WriteFile(src, []byte("hello parquet"), 0o644)
	if err := d.Put(ctx, "dt=x/hour=01/a.parquet", src); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(src); !errors.Is(err, os.ErrNotExist) {
		t.Error("Put did not move the local file")
	}
	os.WriteFile(src, []byte("b"), 0o644)
	d.Put(ctx, "dt=x/hour=02/b.parquet", src)
	objs, err := d.List(ctx, "dt=x/hour=01/")
	if err != nil || len(objs) != 1 || objs[0].Key != "dt=x/hour=01/a.parquet" || objs[0].Size != 13 {
		t.Fatalf("list: %+v, %v", objs, err)
	}
	f, err := d.Open(ctx, "dt=x/hour=01/a.parquet")
	if err != nil {
		t.Fatal(err)
	}
	b := make([]byte, 7)
	if n, err := f.ReadAt(b, 6); n != 7 || err != nil && err != io.EOF || string(b) != "parquet" || f.Size() != 13 {
		t.Errorf("ReadAt: %d %v %q", n, err, b)
	}
	f.Close()
	if err := d.Delete(ctx, "dt=x/hour=01/a.parquet"); err != nil {
		t.Fatal(err)
	}
	if err := d.Delete(ctx, "dt=x/hour=01/a.parquet"); err != nil {
		t.Errorf("deleting a missing file: %v", err)
	}
	if _, err := d.Stat(ctx, "dt=x/hour=01/a.parquet"); !errors.Is(err, store.ErrNotExist) {
		t.Errorf("stat after delete: %v", err)
	}
	if _, err := d.Open(ctx, "../escape"); err == nil {
		t.Error("a key outside the root was opened")
	}
}
