package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"strings"
	"testing"
)

// TestCLIConventions: help goes to stdout with exit 0, misuse to stderr
// with exit 2, and the version is one flag away.
func TestCLIConventions(t *testing.T) {
	tests := []struct {
		name           string
		args           []string
		code           int
		stdout, stderr string // substrings; "" = must be empty
	}{
		{"no args", nil, 0, "usage: reel COMMAND", ""},
		{"--help", []string{"--help"}, 0, "usage: reel COMMAND", ""},
		{"help", []string{"help"}, 0, "usage: reel COMMAND", ""},
		{"help replay", []string{"help", "replay"}, 0, "usage: reel replay DATASET", ""},
		{"help compare", []string{"help", "compare"}, 0, "--expect", ""},
		{"replay --help", []string{"replay", "--help"}, 0, "--max-error-rate", ""},
		{"record -h", []string{"record", "-h"}, 0, "usage: reel record", ""},
		{"stats --help", []string{"stats", "--help"}, 0, "usage: reel stats", ""},
		{"version --help", []string{"version", "--help"}, 0, "usage: reel version", ""},
		{"--version", []string{"--version"}, 0, "reel ", ""},
		{"-v", []string{"-v"}, 0, "reel ", ""},
		{"version", []string{"version"}, 0, "reel ", ""},
		{"unknown command", []string{"frobnicate"}, 2, "", "unknown command \"frobnicate\""},
		{"help unknown", []string{"help", "frobnicate"}, 2, "", "unknown command \"frobnicate\""},
		{"unknown flag", []string{"replay", "--bogus"}, 2, "", "unknown flag: --bogus"},
		{"bad flag value", []string{"report", "x", "--prompt-tokens", "9:1"}, 2, "", "MIN above MAX"},
		{"missing argument", []string{"compare", "a"}, 2, "", "try: reel compare"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := dispatch(context.Background(), tc.args, &stdout, &stderr)
			if code != tc.code {
				t.Errorf("exit %d, want %d\nstdout:\n%s\nstderr:\n%s", code, tc.code, stdout.String(), stderr.String())
			}
			for _, c := range []struct {
				name, want string
				got        *bytes.Buffer
			}{{"stdout", tc.stdout, &stdout}, {"stderr", tc.stderr, &stderr}} {
				if c.want == "" && c.got.Len() > 0 {
					t.Errorf("%s should be empty, got:\n%s", c.name, c.got.String())
				}
				if c.want != "" && !strings.Contains(c.got.String(), c.want) {
					t.Errorf("%s lacks %q:\n%s", c.name, c.want, c.got.String())
				}
			}
		})
	}
	t.Run("no SPEC in help", func(t *testing.T) {
		for name := range commands {
			var stdout, stderr bytes.Buffer
			dispatch(context.Background(), []string{"help", name}, &stdout, &stderr)
			if strings.Contains(stdout.String(), "SPEC") {
				t.Errorf("reel help %s names the SPEC, which users don't have", name)
			}
		}
	})
	t.Run("version --json", func(t *testing.T) {
		var stdout, stderr bytes.Buffer
		if code := dispatch(context.Background(), []string{"version", "--json"}, &stdout, &stderr); code != 0 {
			t.Fatalf("exit %d: %s", code, stderr.String())
		}
		var v buildVersion
		if err := json.Unmarshal(stdout.Bytes(), &v); err != nil || v.Version == "" || v.Go == "" || v.Platform == "" {
			t.Fatalf("version --json: %+v, %v\n%s", v, err, stdout.String())
		}
	})
}

// TestBuiltVersion builds the binary twice: a plain go build reports the
// version from the build information (not a constant), a release build
// the -ldflags -X main.version it was given; both also on --version.
func TestBuiltVersion(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	dir := t.TempDir()
	build := func(name string, extra ...string) string {
		bin := filepath.Join(dir, name)
		args := append([]string{"build", "-o", bin}, extra...)
		cmd := exec.Command("go", append(args, ".")...)
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("go build: %v\n%s", err, out)
		}
		return bin
	}
	run := func(bin string, args ...string) string {
		out, err := exec.Command(bin, args...).CombinedOutput()
		if err != nil {
			t.Fatalf("%s %v: %v\n%s", bin, args, err, out)
		}
		return string(out)
	}

	plain := build("reel")
	out, err := exec.Command("go", "version", "-m", plain).CombinedOutput()
	if err != nil {
		t.Fatalf("go version -m: %v\n%s", err, out)
	}
	var modVersion string
	for _, line := range strings.Split(string(out), "\n") {
		if f := strings.Fields(line); len(f) >= 3 && f[0] == "mod" && f[1] == "github.com/reelkit/reel" {
			modVersion = f[2]
		}
	}
	want := modVersion
	if want == "" || want == "(devel)" {
		want = "devel"
	}
	var v buildVersion
	if err := json.Unmarshal([]byte(run(plain, "version", "--json")), &v); err != nil {
		t.Fatal(err)
	}
	if v.Version != want || v.Version == "0.1.0" {
		t.Errorf("plain build says version %q; its build information says %q", v.Version, want)
	}
	if line := run(plain, "--version"); !strings.HasPrefix(line, "reel "+want+" (") {
		t.Errorf("--version %q, want it to start with %q", line, "reel "+want)
	}
	if bi, ok := debug.ReadBuildInfo(); ok && v.Go != bi.GoVersion {
		t.Errorf("go %q, want %q", v.Go, bi.GoVersion)
	}

	release := build("reel-release", "-ldflags", "-X main.version=v9.8.7-test")
	if line := run(release, "-v"); !strings.HasPrefix(line, "reel v9.8.7-test (") {
		t.Errorf("release -v %q, want reel v9.8.7-test", line)
	}
	if err := json.Unmarshal([]byte(run(release, "version", "--json")), &v); err != nil || v.Version != "v9.8.7-test" {
		t.Errorf("release version --json: %+v %v", v, err)
	}
}
