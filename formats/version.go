package formats

import "runtime/debug"

// modulePath is reel's module path, looked up in the build information.
const modulePath = "github.com/reelkit/reel"

// moduleVersion is reel's module version in this build (see Version).
func moduleVersion() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "devel"
	}
	v := bi.Main.Version
	if bi.Main.Path != modulePath {
		v = ""
		for _, d := range bi.Deps {
			if d.Path == modulePath {
				v = d.Version
				if d.Replace != nil && d.Replace.Version != "" {
					v = d.Replace.Version
				}
			}
		}
	}
	if v == "" || v == "(devel)" {
		return "devel"
	}
	return v
}
