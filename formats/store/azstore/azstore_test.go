package azstore_test

import (
	"context"
	"testing"

	"github.com/reelkit/reel/formats/store/azstore"
	"github.com/reelkit/reel/formats/store/storetest"
)

// TestBucket runs the Bucket conformance checks against Azurite, with
// 1 MiB blocks so that a file of a few MiB goes up as staged blocks and one
// Put Block List.
func TestBucket(t *testing.T) {
	a := storetest.StartAzurite(t)
	a.Container(t, "conformance")
	o := a.Options()
	o.PartSize = 1 << 20
	b, err := azstore.New(context.Background(), "conformance", o)
	if err != nil {
		t.Fatal(err)
	}
	storetest.Conformance(t, b, 1<<20)
}

// TestConnectionString: the connection string alone (what
// AZURE_STORAGE_CONNECTION_STRING holds) reaches the server.
func TestConnectionString(t *testing.T) {
	a := storetest.StartAzurite(t)
	a.Container(t, "connstring")
	b, err := azstore.New(context.Background(), "connstring", azstore.Options{ConnectionString: a.ConnectionString()})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.List(context.Background(), ""); err != nil {
		t.Fatalf("list with a connection string: %v", err)
	}
}

// TestNoAccount: neither an account nor a connection string is a clear
// error, not a request to a made-up host.
func TestNoAccount(t *testing.T) {
	if _, err := azstore.New(context.Background(), "c", azstore.Options{}); err == nil {
		t.Fatal("New without an account: no error")
	}
}
