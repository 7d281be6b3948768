package store

import (
	"context"
	"errors"
	"testing"
)

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want Location
		err  bool
	}{
		{"s3://traffic/gw1", Location{"s3", "traffic", "gw1"}, false},
		{"s3://traffic/gw1/", Location{"s3", "traffic", "gw1"}, false},
		{"s3://traffic", Location{"s3", "traffic", ""}, false},
		{"S3://traffic/a//b/../c", Location{"s3", "traffic", "a/c"}, false},
		{"gs://b/p/q", Location{"gs", "b", "p/q"}, false},
		{"file:///data/traffic", Location{"file", "", "/data/traffic"}, false},
		{"file://host/data", Location{}, true},
		{"s3:///nobucket", Location{}, true},
		{"s3://b/p?versionId=1", Location{}, true},
		{"s3://key:secret@b/p", Location{}, true},
	} {
		got, err := Parse(tc.in)
		if (err != nil) != tc.err || err == nil && got != tc.want {
			t.Errorf("Parse(%q) = %+v, %v; want %+v (error %v)", tc.in, got, err, tc.want, tc.err)
		}
	}
}

func TestIsURL(t *testing.T) {
	for in, want := range map[string]bool{
		"s3://b/p": true, "file:///x": true, "azblob://c": true,
		"./data": false, "/abs/path": false, "data/s3://x": false, "C:\\data": false, "": false,
	} {
		if IsURL(in) != want {
			t.Errorf("IsURL(%q) = %v", in, !want)
		}
	}
}

func TestKey(t *testing.T) {
	if k := (Location{Prefix: "gw"}).Key("dt=x/a.parquet"); k != "gw/dt=x/a.parquet" {
		t.Errorf("key %q", k)
	}
	if k := (Location{}).Key("/dt=x/a.parquet"); k != "dt=x/a.parquet" {
		t.Errorf("key %q", k)
	}
}

func TestOpenUnregistered(t *testing.T) {
	Refuse("azblob", "use s3:// through a gateway")
	_, _, err := Open(context.Background(), "azblob://c/p")
	if !errors.Is(err, ErrUnsupported) {
		t.Fatalf("azblob: %v, want ErrUnsupported", err)
	}
	if _, _, err := Open(context.Background(), "nosuch://b/p"); !errors.Is(err, ErrUnsupported) {
		t.Fatalf("nosuch: %v", err)
	}
}
