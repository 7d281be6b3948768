package main

import (
	"context"
	"fmt"
	"io"
	"runtime"
	"runtime/debug"

	"github.com/spf13/pflag"

	"github.com/reelkit/reel/formats"
)

// version is set for releases: go build -ldflags "-X main.version=v1.2.3".
// Empty otherwise, and the build information names the version.
var version string

// buildVersion is what reel --version prints and what reel writes into its
// files' metadata.
type buildVersion struct {
	Version  string `json:"version"`            // release, module or pseudo-version; "devel" when unknown
	Revision string `json:"revision,omitempty"` // VCS commit
	Time     string `json:"time,omitempty"`     // commit time
	Modified bool   `json:"modified,omitempty"` // built from a tree with uncommitted changes
	Go       string `json:"go"`                 // Go toolchain
	Platform string `json:"platform"`           // GOOS/GOARCH
}

// readBuildVersion reads the version from -X main.version, else from
// runtime/debug.ReadBuildInfo (formats.Version already holds that).
func readBuildVersion() buildVersion {
	v := buildVersion{Version: formats.Version, Go: runtime.Version(), Platform: runtime.GOOS + "/" + runtime.GOARCH}
	if version != "" {
		v.Version = version
	}
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				v.Revision = s.Value
			case "vcs.time":
				v.Time = s.Value
			case "vcs.modified":
				v.Modified = s.Value == "true"
			}
		}
	}
	return v
}

// String is the one line of reel --version: "reel v1.2.3 (abc1234, go1.26.0 linux/amd64)".
func (v buildVersion) String() string {
	s := "reel " + v.Version + " ("
	if v.Revision != "" {
		rev := v.Revision
		if len(rev) > 12 {
			rev = rev[:12]
		}
		if v.Modified {
			rev += "+dirty"
		}
		s += rev + ", "
	}
	return s + v.Go + " " + v.Platform + ")"
}

const versionUsage = `usage: reel version [--json]

Print reel's version: the release it was built as (-ldflags "-X
main.version=v1.2.3"), else the module version from the build information
(a tag for go install …@v1.2.3, a pseudo-version for a checkout build), with
the commit, Go toolchain and platform. The same version is written into
every file reel writes (reel.version). reel --version and reel -v print
the same line.

flags:
`

func runVersion(_ context.Context, args []string, stdout, stderr io.Writer) error {
	fs := pflag.NewFlagSet("version", pflag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = usageFunc(fs, versionUsage)
	asJSON := fs.Bool("json", false, "print the version as JSON (version, revision, time, modified, go, platform)")
	if helped, err := parseFlags(fs, args, "reel version --json", stdout); helped || err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return &usageError{msg: fmt.Sprintf("unexpected argument %q", fs.Arg(0)), hint: "reel version --json"}
	}
	v := readBuildVersion()
	if *asJSON {
		return writeJSON(stdout, v)
	}
	fmt.Fprintln(stdout, v)
	return nil
}
