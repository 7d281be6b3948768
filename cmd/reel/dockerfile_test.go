package main

import (
	"debug/elf"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"testing"
)

// dockerStage is one FROM … AS … stage of the root Dockerfile.
type dockerStage struct {
	from, name string
	lines      []string // instructions after FROM, continuation lines joined
}

func parseDockerfile(t *testing.T, path string) []dockerStage {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var stages []dockerStage
	var cur string
	flush := func(line string) {
		line = strings.TrimSpace(line)
		if line == "" {
			return
		}
		if f := strings.Fields(line); strings.EqualFold(f[0], "FROM") {
			st := dockerStage{}
			args := f[1:]
			if len(args) > 0 && strings.HasPrefix(args[0], "--platform=") {
				st.lines = append(st.lines, args[0])
				args = args[1:]
			}
			st.from = args[0]
			if len(args) == 3 && strings.EqualFold(args[1], "AS") {
				st.name = args[2]
			}
			stages = append(stages, st)
			return
		}
		if len(stages) > 0 {
			stages[len(stages)-1].lines = append(stages[len(stages)-1].lines, line)
		}
	}
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(strings.TrimSpace(l), "#") {
			continue
		}
		if s, ok := strings.CutSuffix(strings.TrimRight(l, " "), "\\"); ok {
			cur += s + " "
			continue
		}
		flush(cur + l)
		cur = ""
	}
	return stages
}

func stageHas(st dockerStage, prefix string) string {
	for _, l := range st.lines {
		if strings.HasPrefix(l, prefix) {
			return l
		}
	}
	return ""
}

// TestDockerfile checks the root Dockerfile's stages (a cross-compiling
// build stage on the builder's platform, a non-root release stage with the
// OCI labels) and builds the binary it names with the same command and
// flags: static, stripped, and reporting the version passed in.
func TestDockerfile(t *testing.T) {
	stages := parseDockerfile(t, "../../Dockerfile")
	if len(stages) != 2 || stages[0].name != "build" || stages[1].name != "release" {
		t.Fatalf("stages %+v: want build, then release", stages)
	}
	build, release := stages[0], stages[1]
	if stageHas(build, "--platform=$BUILDPLATFORM") == "" || !strings.HasPrefix(build.from, "golang:") {
		t.Errorf("build stage %q: want a golang image on --platform=$BUILDPLATFORM (cross-compiling, no emulation)", build.from)
	}
	if stageHas(build, "ARG TARGETARCH") == "" {
		t.Error("build stage: no ARG TARGETARCH (multi-arch builds)")
	}
	run := stageHas(build, "RUN CGO_ENABLED=0 ")
	if run == "" || !strings.Contains(run, "GOARCH=${TARGETARCH}") || !strings.Contains(run, "./cmd/reel") {
		t.Fatalf("build stage: no static, per-TARGETARCH go build of ./cmd/reel: %q", run)
	}
	if !strings.Contains(run, `-ldflags "-s -w -X main.version=${VERSION}"`) {
		t.Errorf("go build %q: want -ldflags \"-s -w -X main.version=${VERSION}\"", run)
	}
	user := stageHas(release, "USER ")
	if user == "" || strings.HasPrefix(user, "USER root") || strings.HasPrefix(user, "USER 0") {
		t.Errorf("release stage runs as %q: want a non-root USER", user)
	}
	out := regexp.MustCompile(`-o (\S+)`).FindStringSubmatch(run)
	if out == nil || stageHas(release, "COPY --from=build "+out[1]+" /usr/local/bin/reel") == "" ||
		stageHas(release, `ENTRYPOINT ["/usr/local/bin/reel"]`) == "" {
		t.Errorf("release stage does not copy %v to the entrypoint /usr/local/bin/reel", out)
	}
	labels := strings.Join(release.lines, " ")
	for _, l := range []string{"title", "description", "source", "licenses", "version", "revision"} {
		if !strings.Contains(labels, "org.opencontainers.image."+l+"=") {
			t.Errorf("release stage: no OCI label org.opencontainers.image.%s", l)
		}
	}

	if testing.Short() {
		t.Skip("builds the binary")
	}
	// Build as the RUN line does, for this machine's architecture.
	const version = "v0.0.0-dockerfile-test"
	cmdline := strings.TrimPrefix(run, "RUN ")
	cmdline = strings.NewReplacer("${TARGETOS}", runtime.GOOS, "${TARGETARCH}", runtime.GOARCH,
		"${VERSION}", version, "/out/reel", filepath.Join(t.TempDir(), "reel")).Replace(cmdline)
	env, args := splitCommand(t, cmdline)
	if len(args) < 2 || args[0] != "go" || args[1] != "build" {
		t.Fatalf("RUN line runs %v, want go build", args)
	}
	bin := args[slices.Index(args, "-o")+1]
	c := exec.Command("go", args[1:]...)
	c.Dir = "../.."
	c.Env = append(os.Environ(), env...)
	if b, err := c.CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", cmdline, err, b)
	}
	f, err := elf.Open(bin)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			t.Error("the binary has a dynamic loader: not static")
		}
	}
	if s := f.Section(".symtab"); s != nil {
		t.Error("the binary keeps its symbol table: -s -w not applied")
	}
	got, err := exec.Command(bin, "--version").CombinedOutput()
	if err != nil || !strings.Contains(string(got), version) {
		t.Errorf("reel --version printed %q (%v), want %s", got, err, version)
	}
}

// splitCommand splits a shell command line of VAR=value words, then words
// and double-quoted strings.
func splitCommand(t *testing.T, s string) (env, args []string) {
	t.Helper()
	for _, m := range regexp.MustCompile(`"[^"]*"|\S+`).FindAllString(s, -1) {
		if strings.HasPrefix(m, `"`) {
			m = strings.Trim(m, `"`)
		} else if len(args) == 0 && strings.Contains(m, "=") {
			env = append(env, m)
			continue
		}
		args = append(args, m)
	}
	return env, args
}
