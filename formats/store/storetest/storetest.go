// Package storetest starts real object-storage servers for tests, on
// loopback, in a temporary directory: versitygw with its posix backend (the
// S3 API) and Azurite (Azure Blob Storage). There is no mock of either API:
// what the tests exercise is what a bucket does.
//
// The versitygw binary is found as $REEL_VERSITYGW, versitygw on $PATH, or
// $GOPATH/bin/versitygw (install it with
// `go install github.com/versity/versitygw/cmd/versitygw@v1.8.0`); Azurite
// as $REEL_AZURITE or azurite-blob on $PATH (`npm install -g
// azurite@3.37.0`). Without them the tests skip, except under CI=true,
// where they fail: CI must never pass by skipping them.
package storetest

import (
	"context"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"

	"github.com/reelkit/reel/formats/store"
	"github.com/reelkit/reel/formats/store/s3store"
)

// Install is the command that installs the server binary.
const Install = "go install github.com/versity/versitygw/cmd/versitygw@v1.8.0"

// S3 is a running versitygw.
type S3 struct {
	Endpoint  string // host:port of the S3 API (plain HTTP)
	AccessKey string // access key of the test credentials
	SecretKey string // secret key of the test credentials
	Root      string // the posix backend's directory: one subdirectory per bucket

	relay *relay // set by Throttle
}

// Binary returns the versitygw binary's path, or "" when there is none.
func Binary() string {
	if p := os.Getenv("REEL_VERSITYGW"); p != "" {
		return p
	}
	if p, err := exec.LookPath("versitygw"); err == nil {
		return p
	}
	gopath := os.Getenv("GOPATH")
	if gopath == "" {
		if home, err := os.UserHomeDir(); err == nil {
			gopath = filepath.Join(home, "go")
		}
	}
	for _, dir := range filepath.SplitList(gopath) {
		p := filepath.Join(dir, "bin", "versitygw")
		if st, err := os.Stat(p); err == nil && !st.IsDir() {
			return p
		}
	}
	return ""
}

// Start starts versitygw on a free loopback port and stops it when the test
// ends. It skips the test when the binary is missing, and fails it then
// under CI=true.
func Start(tb testing.TB) *S3 {
	tb.Helper()
	bin := needBinary(tb, Binary(), "versitygw", "S3", Install)
	dir := tb.TempDir()
	s := &S3{AccessKey: "reeltest", SecretKey: "reeltest-secret-key", Root: filepath.Join(dir, "data")}
	side := filepath.Join(dir, "meta")
	for _, d := range []string{s.Root, side} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			tb.Fatal(err)
		}
	}
	s.Endpoint = freeAddr(tb)
	startServer(tb, dir, s.Endpoint, 30*time.Second, bin, "--access", s.AccessKey, "--secret", s.SecretKey, "--port", s.Endpoint,
		"--quiet", "posix", "--sidecar", side, s.Root)
	return s
}

// needBinary returns bin, or skips the test when it is "" (the server is
// not installed) — and fails it then under CI=true, where CI installs it.
func needBinary(tb testing.TB, bin, name, what, install string) string {
	tb.Helper()
	if bin == "" {
		if os.Getenv("CI") == "true" {
			tb.Fatalf("%s not found (CI=true, so this is a failure, not a skip): %s", name, install)
		}
		tb.Skipf("%s not found, skipping the %s test: %s", name, what, install)
	}
	return bin
}

// startServer runs bin with args, its output in dir/<bin's name>.log, waits
// until it accepts connections on addr, and kills it when the test ends.
func startServer(tb testing.TB, dir, addr string, timeout time.Duration, bin string, args ...string) {
	tb.Helper()
	name := filepath.Base(bin)
	cmd := exec.Command(bin, args...)
	logf, err := os.Create(filepath.Join(dir, name+".log"))
	if err != nil {
		tb.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		tb.Fatalf("start %s: %v", name, err)
	}
	tb.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
		logf.Close()
	})
	waitListening(tb, addr, timeout, logf.Name())
}

// waitListening waits until a server started by the test accepts
// connections on addr, failing the test with the server's log after
// timeout.
func waitListening(tb testing.TB, addr string, timeout time.Duration, logPath string) {
	tb.Helper()
	deadline := time.Now().Add(timeout)
	for {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			c.Close()
			return
		}
		if time.Now().After(deadline) {
			log, _ := os.ReadFile(logPath)
			tb.Fatalf("the test server did not listen on %s within %v: %s", addr, timeout, log)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Options are s3store options for this server (through the throttle when
// one is set).
func (s *S3) Options() s3store.Options {
	ep := s.Endpoint
	if s.relay != nil {
		ep = s.relay.addr
	}
	return s3store.Options{Endpoint: ep, Insecure: true, Region: "us-east-1", PathStyle: true,
		AccessKey: s.AccessKey, SecretKey: s.SecretKey}
}

// Env is the environment that points reel's s3:// at this server, the way a
// user would configure it (cmd/reel reads AWS_ENDPOINT_URL).
func (s *S3) Env() []string {
	o := s.Options()
	return []string{
		"AWS_ENDPOINT_URL=http://" + o.Endpoint,
		"AWS_ACCESS_KEY_ID=" + s.AccessKey,
		"AWS_SECRET_ACCESS_KEY=" + s.SecretKey,
		"AWS_REGION=us-east-1",
	}
}

// Register makes this process's s3:// URLs talk to the server.
func (s *S3) Register(tb testing.TB) {
	tb.Helper()
	store.Register("s3", s3store.Opener(s.Options()))
	tb.Cleanup(func() { store.Refuse("s3", "the test's S3 server has stopped") })
}

// Bucket creates a bucket and returns its URL, s3://name.
func (s *S3) Bucket(tb testing.TB, name string) string {
	tb.Helper()
	c, err := minio.New(s.Endpoint, &minio.Options{Creds: credentials.NewStaticV4(s.AccessKey, s.SecretKey, ""),
		Region: "us-east-1", BucketLookup: minio.BucketLookupPath})
	if err != nil {
		tb.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := c.MakeBucket(ctx, name, minio.MakeBucketOptions{Region: "us-east-1"}); err != nil {
		tb.Fatalf("create bucket %s: %v", name, err)
	}
	return "s3://" + name
}

// Throttle puts a loopback relay in front of the server that passes at most
// bytesPerSecond from clients to the server (uploads), so a test can kill a
// process in the middle of one. Call it before Options, Env or Register.
func (s *S3) Throttle(tb testing.TB, bytesPerSecond int) {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	s.relay = &relay{ln: ln, addr: ln.Addr().String(), target: s.Endpoint, rate: bytesPerSecond}
	go s.relay.serve()
	tb.Cleanup(s.relay.close)
}

// relay forwards TCP connections, pacing the client-to-server direction.
type relay struct {
	ln     net.Listener
	addr   string
	target string
	rate   int

	mu    sync.Mutex // guards conns
	conns []net.Conn
}

func (r *relay) serve() {
	for {
		c, err := r.ln.Accept()
		if err != nil {
			return
		}
		up, err := net.Dial("tcp", r.target)
		if err != nil {
			c.Close()
			continue
		}
		r.mu.Lock()
		r.conns = append(r.conns, c, up)
		r.mu.Unlock()
		go func() {
			defer up.Close()
			defer c.Close()
			buf := make([]byte, 4096)
			for {
				n, err := c.Read(buf)
				if n > 0 {
					if _, werr := up.Write(buf[:n]); werr != nil {
						return
					}
					time.Sleep(time.Duration(n) * time.Second / time.Duration(r.rate))
				}
				if err != nil {
					if err == io.EOF {
						if tc, ok := up.(*net.TCPConn); ok {
							tc.CloseWrite()
						}
					}
					return
				}
			}
		}()
		go func() {
			io.Copy(c, up)
			c.Close()
		}()
	}
}

func (r *relay) close() {
	r.ln.Close()
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, c := range r.conns {
		c.Close()
	}
}

func freeAddr(tb testing.TB) string {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}
