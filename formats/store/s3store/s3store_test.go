package s3store_test

import (
	"context"
	"testing"

	"github.com/reelkit/reel/formats/store/s3store"
	"github.com/reelkit/reel/formats/store/storetest"
)

// TestBucket runs the Bucket conformance checks against versitygw, with
// S3's smallest part size, so that a 12.5 MiB file is a multipart upload.
func TestBucket(t *testing.T) {
	s := storetest.Start(t)
	s.Bucket(t, "conformance")
	o := s.Options()
	o.PartSize = 5 << 20
	b, err := s3store.New(context.Background(), "s3", "conformance", o)
	if err != nil {
		t.Fatal(err)
	}
	storetest.Conformance(t, b, 5<<20)
}
