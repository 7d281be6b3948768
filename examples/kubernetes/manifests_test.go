// Package kubernetes holds manifests that run reel on Kubernetes: the
// recorder as a proxy sidecar and as a passive-capture DaemonSet, sharded
// replay as an Indexed Job and the nightly regression as a CronJob. Its
// tests parse every manifest, check what Kubernetes would only find out at
// run time (or never), and run each reel command line through the real
// reel binary's flag sets.
package kubernetes

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"go.yaml.in/yaml/v3"
)

// reelImage is the image every reel container runs.
const reelImage = "ghcr.io/reelkit/reel"

// manifest is one YAML document of one file.
type manifest struct {
	file string
	m    map[string]any
}

func (d manifest) String() string {
	return fmt.Sprintf("%s: %s %s", d.file, str(d.m, "kind"), str(d.m, "metadata", "name"))
}

// loadManifests decodes every document of every *.yaml file in dir. The
// decoder rejects duplicate keys, which kubectl would silently merge.
func loadManifests(t *testing.T, dir string) []manifest {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no manifests in %s: %v", dir, err)
	}
	var docs []manifest
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		dec := yaml.NewDecoder(bytes.NewReader(b))
		for i := 0; ; i++ {
			var m map[string]any
			err := dec.Decode(&m)
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatalf("%s document %d: %v", filepath.Base(f), i, err)
			}
			if m != nil {
				docs = append(docs, manifest{file: filepath.Base(f), m: m})
			}
		}
	}
	return docs
}

// get walks nested maps by key.
func get(v any, path ...string) any {
	for _, k := range path {
		m, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = m[k]
	}
	return v
}

func str(v any, path ...string) string {
	switch x := get(v, path...).(type) {
	case string:
		return x
	case nil:
		return ""
	default:
		return fmt.Sprint(x)
	}
}

func list(v any, path ...string) []any {
	l, _ := get(v, path...).([]any)
	return l
}

func strs(v any, path ...string) []string {
	var out []string
	for _, x := range list(v, path...) {
		out = append(out, fmt.Sprint(x))
	}
	return out
}

func stringMap(v any, path ...string) map[string]string {
	out := map[string]string{}
	m, _ := get(v, path...).(map[string]any)
	for k, x := range m {
		out[k] = fmt.Sprint(x)
	}
	return out
}

// apiVersions lists the kinds the folder may hold, with their API group.
var apiVersions = map[string]string{
	"Deployment": "apps/v1", "DaemonSet": "apps/v1", "StatefulSet": "apps/v1",
	"Job": "batch/v1", "CronJob": "batch/v1",
	"Service": "v1", "ConfigMap": "v1", "Secret": "v1", "ServiceAccount": "v1", "PersistentVolumeClaim": "v1", "Namespace": "v1",
}

var dnsLabel = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$`)

// pod is a workload's pod template with what the Job controller adds.
type pod struct {
	doc         manifest
	meta        map[string]any // template metadata
	spec        map[string]any // pod spec
	job         map[string]any // Job spec (Job, CronJob), else nil
	jobName     string         // the name the controller gives the Job
	indexed     bool           // completionMode Indexed
	completions int
}

// podOf returns the pod template of a workload, or false for other kinds.
func podOf(t *testing.T, d manifest) (*pod, bool) {
	var tmpl, job any
	name := str(d.m, "metadata", "name")
	p := &pod{doc: d}
	switch str(d.m, "kind") {
	case "Deployment", "DaemonSet", "StatefulSet":
		tmpl = get(d.m, "spec", "template")
	case "Job":
		job, p.jobName = get(d.m, "spec"), name
	case "CronJob":
		job, p.jobName = get(d.m, "spec", "jobTemplate", "spec"), name+"-29387130" // what the controller appends
	default:
		return nil, false
	}
	if job != nil {
		p.job, _ = job.(map[string]any)
		tmpl = get(job, "template")
		p.indexed = str(job, "completionMode") == "Indexed"
		p.completions = 1
		if c := str(job, "completions"); c != "" {
			n, err := strconv.Atoi(c)
			if err != nil {
				t.Errorf("%s: completions %q", d, c)
			}
			p.completions = n
		}
	}
	p.meta, _ = get(tmpl, "metadata").(map[string]any)
	p.spec, _ = get(tmpl, "spec").(map[string]any)
	if p.spec == nil {
		t.Errorf("%s: no pod template spec", d)
		return nil, false
	}
	return p, true
}

// container is one (init) container of a pod.
type container struct {
	pod  *pod
	m    map[string]any
	init bool
}

func (c container) String() string {
	kind := "container"
	if c.init {
		kind = "initContainer"
	}
	return fmt.Sprintf("%s %s %q", c.pod.doc, kind, str(c.m, "name"))
}

func (p *pod) containers() []container {
	var out []container
	for _, x := range list(p.spec, "initContainers") {
		out = append(out, container{pod: p, m: x.(map[string]any), init: true})
	}
	for _, x := range list(p.spec, "containers") {
		out = append(out, container{pod: p, m: x.(map[string]any)})
	}
	return out
}

func (c container) isReel() bool {
	img := str(c.m, "image")
	return strings.HasPrefix(img, reelImage+":") || strings.HasPrefix(img, reelImage+"@")
}

// env resolves the container's environment as the kubelet would for pod
// number index: downward-API fields from the template (and the labels the
// Job controller adds), placeholders for secrets and config maps,
// JOB_COMPLETION_INDEX in Indexed Jobs. A reference Kubernetes could not
// resolve is an error.
func (c container) env(index int) (map[string]string, error) {
	p := c.pod
	labels, annots := stringMap(p.meta, "labels"), stringMap(p.meta, "annotations")
	if p.job != nil {
		labels["batch.kubernetes.io/job-name"], labels["job-name"] = p.jobName, p.jobName
		labels["batch.kubernetes.io/controller-uid"] = "uid-of-" + p.jobName // the Job's UID, shared by its pods
		if p.indexed {
			annots["batch.kubernetes.io/job-completion-index"] = strconv.Itoa(index)
			labels["batch.kubernetes.io/job-completion-index"] = strconv.Itoa(index)
		}
	}
	env := map[string]string{}
	if p.indexed {
		env["JOB_COMPLETION_INDEX"] = strconv.Itoa(index)
	}
	keyed := regexp.MustCompile(`^metadata\.(labels|annotations)\['([^']+)'\]$`)
	for _, e := range list(c.m, "env") {
		name := str(e, "name")
		if name == "" {
			return nil, errors.New("env entry without a name")
		}
		_, hasValue := e.(map[string]any)["value"]
		from := get(e, "valueFrom")
		if hasValue == (from != nil) {
			return nil, fmt.Errorf("env %s: want exactly one of value and valueFrom", name)
		}
		if hasValue {
			v, err := expand(str(e, "value"), env, true)
			if err != nil {
				return nil, fmt.Errorf("env %s: %w", name, err)
			}
			env[name] = v
			continue
		}
		switch {
		case get(from, "fieldRef") != nil:
			fp := str(from, "fieldRef", "fieldPath")
			switch fp {
			case "metadata.name":
				env[name] = p.jobName + "-0-abcde"
			case "metadata.namespace":
				env[name] = str(p.doc.m, "metadata", "namespace")
			case "metadata.uid":
				env[name] = "0b5e1c1e-3f7a-4c55-9a43-1d2f0c2b7e11"
			case "spec.nodeName":
				env[name] = "node-1"
			case "spec.serviceAccountName":
				env[name] = "default"
			case "status.hostIP", "status.podIP":
				env[name] = "10.0.0.7"
			default:
				m := keyed.FindStringSubmatch(fp)
				if m == nil {
					return nil, fmt.Errorf("env %s: fieldPath %q is not one the downward API offers", name, fp)
				}
				src := labels
				if m[1] == "annotations" {
					src = annots
				}
				v, ok := src[m[2]]
				if !ok {
					return nil, fmt.Errorf("env %s: the pod has no %s %q", name, m[1], m[2])
				}
				env[name] = v
			}
		case get(from, "secretKeyRef") != nil:
			env[name] = "secret-" + str(from, "secretKeyRef", "name")
		case get(from, "configMapKeyRef") != nil:
			env[name] = "config-" + str(from, "configMapKeyRef", "name")
		case get(from, "resourceFieldRef") != nil:
			env[name] = "1"
		default:
			return nil, fmt.Errorf("env %s: unknown valueFrom", name)
		}
	}
	return env, nil
}

// expand replaces $(VAR) as the kubelet does ($$ escapes, an unknown
// reference stays as written, so a shell's $(cmd) survives). With strict it
// fails on an unknown reference instead: in reel's own args that is a typo
// Kubernetes would pass on literally.
func expand(s string, env map[string]string, strict bool) (string, error) {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '$' || i+1 >= len(s) {
			b.WriteByte(s[i])
			continue
		}
		switch s[i+1] {
		case '$':
			b.WriteByte('$')
			i++
		case '(':
			j := strings.IndexByte(s[i:], ')')
			if j < 0 {
				return "", fmt.Errorf("unclosed $( in %q", s)
			}
			name := s[i+2 : i+j]
			v, ok := env[name]
			switch {
			case ok:
				b.WriteString(v)
			case strict:
				return "", fmt.Errorf("$(%s) in %q is not in the container's env: Kubernetes would pass it literally", name, s)
			default:
				b.WriteString(s[i : i+j+1])
			}
			i += j
		default:
			b.WriteByte('$')
		}
	}
	return b.String(), nil
}

// reelLine is one reel command line of a container.
type reelLine struct {
	args  []string // after "reel"
	shell bool     // taken from a shell script: variables are placeholders
}

// reelLines returns the reel command lines a container runs: its args when
// reel is the entrypoint, or each `reel …` line of its `sh -c` script.
func (c container) reelLines(env map[string]string) ([]reelLine, error) {
	cmd, args := strs(c.m, "command"), strs(c.m, "args")
	shell := len(cmd) > 0 && (filepath.Base(cmd[0]) == "sh" || filepath.Base(cmd[0]) == "bash")
	var all []string
	for _, a := range append(slices.Clone(cmd), args...) {
		v, err := expand(a, env, !shell)
		if err != nil {
			return nil, err
		}
		all = append(all, v)
	}
	switch {
	case len(cmd) == 0:
		return []reelLine{{args: all}}, nil
	case filepath.Base(cmd[0]) == "reel":
		return []reelLine{{args: all[1:]}}, nil
	case shell && len(all) >= 3 && all[1] == "-c":
		var out []reelLine
		script := strings.ReplaceAll(all[2], "\\\n", " ")
		for _, line := range strings.Split(script, "\n") {
			line = strings.TrimSpace(line)
			line = strings.TrimPrefix(line, "exec ")
			if !strings.HasPrefix(line, "reel ") {
				continue
			}
			words, err := shellWords(line, env)
			if err != nil {
				return nil, fmt.Errorf("script line %q: %w", line, err)
			}
			out = append(out, reelLine{args: words[1:], shell: true})
		}
		return out, nil
	}
	return nil, fmt.Errorf("command %q: neither reel nor sh -c", cmd)
}

// shellWords splits one simple shell command into words, expanding $VAR and
// ${VAR} from env (other variables, set by the script, become "x").
func shellWords(line string, env map[string]string) ([]string, error) {
	var words []string
	var w strings.Builder
	inWord, quote := false, byte(0)
	flush := func() {
		if inWord {
			words = append(words, w.String())
		}
		w.Reset()
		inWord = false
	}
	for i := 0; i < len(line); i++ {
		ch := line[i]
		switch {
		case quote == '\'':
			if ch == '\'' {
				quote = 0
			} else {
				w.WriteByte(ch)
			}
		case ch == '\'' || ch == '"':
			if quote == ch {
				quote = 0
			} else if quote == 0 {
				quote, inWord = ch, true
			} else {
				w.WriteByte(ch)
			}
		case ch == '\\' && i+1 < len(line):
			i++
			w.WriteByte(line[i])
			inWord = true
		case ch == '$':
			rest := line[i+1:]
			var name string
			switch {
			case strings.HasPrefix(rest, "{"):
				j := strings.IndexByte(rest, '}')
				if j < 0 {
					return nil, errors.New("unclosed ${")
				}
				name, i = rest[1:j], i+1+j
			case strings.HasPrefix(rest, "("):
				return nil, errors.New("command substitution in a reel line: give reel plain words")
			default:
				j := 0
				for j < len(rest) && (rest[j] == '_' || rest[j] >= 'A' && rest[j] <= 'Z' || rest[j] >= 'a' && rest[j] <= 'z' || rest[j] >= '0' && rest[j] <= '9') {
					j++
				}
				name, i = rest[:j], i+j
			}
			if v, ok := env[name]; ok {
				w.WriteString(v)
			} else if strings.HasSuffix(name, "from") || strings.HasSuffix(name, "to") {
				w.WriteString("2026-01-01T00:00:00Z") // set by the script: a time, as typed flags want
			} else {
				w.WriteString("x")
			}
			inWord = true
		case quote == 0 && (ch == ' ' || ch == '\t'):
			flush()
		case quote == 0 && strings.IndexByte(";&|<>#", ch) >= 0:
			if ch == '#' && inWord {
				w.WriteByte(ch)
				continue
			}
			flush()
			return words, nil
		default:
			w.WriteByte(ch)
			inWord = true
		}
	}
	if quote != 0 {
		return nil, errors.New("unclosed quote")
	}
	flush()
	return words, nil
}

// reelCLI runs the reel binary built from this tree.
type reelCLI struct {
	bin   string
	mu    sync.Mutex         // guards flags
	flags map[string]flagSet // subcommand → its flags
}

// flagSet maps each flag name of a subcommand to whether it needs a value.
type flagSet map[string]bool

var (
	buildOnce sync.Once
	builtBin  string
	buildErr  error
)

// buildReel builds cmd/reel once per test binary.
func buildReel(t *testing.T) *reelCLI {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "reel-manifests-")
		if err != nil {
			buildErr = err
			return
		}
		builtBin = filepath.Join(dir, "reel")
		out, err := exec.Command("go", "build", "-o", builtBin, "../../cmd/reel").CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("go build ./cmd/reel: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return &reelCLI{bin: builtBin, flags: map[string]flagSet{}}
}

// run runs reel with args and exactly the environment env (plus PATH).
func (r *reelCLI) run(env map[string]string, args ...string) (string, int) {
	cmd := exec.Command(r.bin, args...)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.TempDir()}
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	out, err := cmd.CombinedOutput()
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		return err.Error(), -1
	}
	return string(out), code
}

var flagLine = regexp.MustCompile(`^\s+(?:-([a-zA-Z0-9]), )?--([a-z0-9][a-z0-9-]*)(\[=[^\]]*\])?( \S+)?`)

// flagsOf reads a subcommand's flags from its --help (pflag's listing:
// "--name type" needs a value, "--name[=true|false]" and "--name type[=x]"
// do not).
func (r *reelCLI) flagsOf(sub string) (flagSet, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if fs, ok := r.flags[sub]; ok {
		return fs, nil
	}
	out, code := r.run(nil, sub, "--help")
	if code != 0 || !strings.Contains(out, "usage: reel "+sub) {
		return nil, fmt.Errorf("reel %s --help exited %d without its usage: no such subcommand?\n%s", sub, code, out)
	}
	lines := strings.Split(out, "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		if strings.EqualFold(strings.TrimSpace(lines[i]), "flags:") {
			lines = lines[i+1:]
			break
		}
	}
	fs := flagSet{"help": false}
	for _, l := range lines {
		if m := flagLine.FindStringSubmatch(l); m != nil {
			// "--name type[=x]": a value is optional (pflag's NoOptDefVal)
			fs[m[2]] = m[3] == "" && m[4] != "" && !strings.Contains(m[4], "[=")
		}
	}
	if len(fs) < 3 {
		return nil, fmt.Errorf("reel %s --help lists no flags:\n%s", sub, out)
	}
	r.flags[sub] = fs
	return fs, nil
}

// check validates one reel command line against the real flag sets: the
// subcommand exists, every flag is one of its flags, every flag that needs
// a value has one, and reel itself parses every value (run with --help
// appended, which stops reel right after parsing). It returns the
// positional arguments.
func (r *reelCLI) check(l reelLine, env map[string]string) ([]string, error) {
	if len(l.args) == 0 {
		return nil, errors.New("reel without a subcommand")
	}
	sub := l.args[0]
	fs, err := r.flagsOf(sub)
	if err != nil {
		return nil, err
	}
	var pos []string
	for i := 1; i < len(l.args); i++ {
		a := l.args[i]
		if a == "--" {
			pos = append(pos, l.args[i+1:]...)
			break
		}
		if !strings.HasPrefix(a, "-") || a == "-" {
			pos = append(pos, a)
			continue
		}
		name, _, hasValue := strings.Cut(strings.TrimLeft(a, "-"), "=")
		needs, ok := fs[name]
		if !ok || (!strings.HasPrefix(a, "--") && len(name) > 1) {
			return nil, fmt.Errorf("reel %s has no flag %s", sub, a)
		}
		if needs && !hasValue {
			if i+1 >= len(l.args) || strings.HasPrefix(l.args[i+1], "--") {
				return nil, fmt.Errorf("reel %s %s: the flag needs a value", sub, a)
			}
			i++
		}
	}
	if out, code := r.run(env, append(slices.Clone(l.args), "--help")...); code != 0 {
		return nil, fmt.Errorf("reel %s rejects the line (exit %d):\n%s", sub, code, out)
	}
	return pos, nil
}

// readOnly subcommands fail at once, and harmlessly, on a missing dataset.
var readOnly = map[string]bool{"replay": true, "report": true, "compare": true, "stats": true, "inspect": true}

// runForReal runs a read-only command line whose datasets do not exist
// here: reel must get past all of its checks of the flags (else it exits 2,
// misuse) and fail on the first missing dataset (exit 1, naming it).
func (r *reelCLI) runForReal(t *testing.T, l reelLine, pos []string, env map[string]string) error {
	if !readOnly[l.args[0]] || len(pos) == 0 {
		return nil
	}
	for _, p := range pos {
		if _, err := os.Stat(p); err == nil {
			t.Logf("reel %s: %s exists on this machine; not running the line for real", l.args[0], p)
			return nil
		}
	}
	out, code := r.run(env, l.args...)
	if code != 1 || !strings.Contains(out, pos[0]) || strings.Contains(out, "\ntry: ") {
		return fmt.Errorf("reel %s exited %d; want 1 for the missing dataset %s, after every flag check:\n%s", l.args[0], code, pos[0], out)
	}
	return nil
}

// flagValue returns the value of --name in args ("" and false when absent).
func flagValue(args []string, name string) (string, bool) {
	for i, a := range args {
		if v, ok := strings.CutPrefix(a, "--"+name+"="); ok {
			return v, true
		}
		if a == "--"+name && i+1 < len(args) {
			return args[i+1], true
		}
	}
	return "", false
}

func TestManifests(t *testing.T) {
	docs := loadManifests(t, ".")
	cli := buildReel(t)
	kinds := map[string]int{}
	for _, d := range docs {
		kind := str(d.m, "kind")
		kinds[kind]++
		t.Run(d.file+"/"+kind+"/"+str(d.m, "metadata", "name"), func(t *testing.T) {
			want, known := apiVersions[kind]
			if !known {
				t.Fatalf("%s: kind %q is not one this test knows; add it to apiVersions", d, kind)
			}
			if got := str(d.m, "apiVersion"); got != want {
				t.Errorf("%s: apiVersion %q, want %q", d, got, want)
			}
			if name := str(d.m, "metadata", "name"); !dnsLabel.MatchString(name) {
				t.Errorf("%s: metadata.name %q is not a DNS label", d, name)
			}
			if kind == "Service" && (len(stringMap(d.m, "spec", "selector")) == 0 || len(list(d.m, "spec", "ports")) == 0) {
				t.Errorf("%s: a Service needs a selector and ports", d)
			}
			p, ok := podOf(t, d)
			if !ok {
				return
			}
			checkPod(t, cli, p)
		})
	}
	for _, k := range []string{"Job", "CronJob"} {
		if kinds[k] == 0 {
			t.Errorf("no %s in the folder: the replay Job and nightly CronJob examples are missing", k)
		}
	}
}

// checkPod checks one pod template and every reel command line in it.
func checkPod(t *testing.T, cli *reelCLI, p *pod) {
	d := p.doc
	labels := stringMap(p.meta, "labels")
	switch str(d.m, "kind") {
	case "Deployment", "DaemonSet", "StatefulSet":
		sel := stringMap(d.m, "spec", "selector", "matchLabels")
		if len(sel) == 0 {
			t.Errorf("%s: spec.selector.matchLabels is empty", d)
		}
		for k, v := range sel {
			if labels[k] != v {
				t.Errorf("%s: selector %s=%s does not match the template's labels %v", d, k, v, labels)
			}
		}
	case "CronJob":
		if f := strings.Fields(str(d.m, "spec", "schedule")); len(f) != 5 {
			t.Errorf("%s: schedule %q: want five cron fields", d, str(d.m, "spec", "schedule"))
		}
		fallthrough
	case "Job":
		if rp := str(p.spec, "restartPolicy"); rp != "Never" && rp != "OnFailure" {
			t.Errorf("%s: a Job's pods need restartPolicy Never or OnFailure, got %q", d, rp)
		}
	}
	volumes := map[string]bool{}
	for _, v := range list(p.spec, "volumes") {
		volumes[str(v, "name")] = true
	}
	cs := p.containers()
	if len(list(p.spec, "containers")) == 0 {
		t.Fatalf("%s: no containers", d)
	}
	indexes := []int{0}
	if p.indexed && p.completions > 1 {
		indexes = append(indexes, p.completions-1)
	}
	for _, c := range cs {
		img := str(c.m, "image")
		if img == "" || !(strings.Contains(img[strings.LastIndex(img, "/")+1:], ":") || strings.Contains(img, "@sha256:")) {
			t.Errorf("%s: image %q: give a tag or digest", c, img)
		}
		for _, vm := range list(c.m, "volumeMounts") {
			if !volumes[str(vm, "name")] {
				t.Errorf("%s: mounts volume %q the pod does not declare", c, str(vm, "name"))
			}
		}
		if !c.isReel() {
			continue
		}
		for _, idx := range indexes {
			env, err := c.env(idx)
			if err != nil {
				t.Errorf("%s: %v", c, err)
				continue
			}
			lines, err := c.reelLines(env)
			if err != nil {
				t.Errorf("%s: %v", c, err)
				continue
			}
			if len(lines) == 0 {
				t.Errorf("%s: runs the reel image but no reel command line", c)
			}
			for _, l := range lines {
				pos, err := cli.check(l, env)
				if err != nil {
					t.Errorf("%s: %v", c, err)
					continue
				}
				if !l.shell {
					if err := cli.runForReal(t, l, pos, env); err != nil {
						t.Errorf("%s: %v", c, err)
					}
				}
				checkSecurity(t, c, l)
				if l.args[0] == "replay" {
					checkShardWiring(t, c, l, idx)
				}
			}
		}
	}
	if str(d.m, "kind") == "CronJob" {
		checkNightly(t, p)
	}
}

// checkSecurity: reel containers never escalate, drop every capability and
// add back only what passive capture needs, and only for passive capture;
// everything but passive capture runs as a non-root user.
func checkSecurity(t *testing.T, c container, l reelLine) {
	sc := get(c.m, "securityContext")
	podSC := get(c.pod.spec, "securityContext")
	capture := false
	if l.args[0] == "record" {
		_, capture = flagValue(l.args, "iface")
	}
	if v, ok := get(sc, "allowPrivilegeEscalation").(bool); !ok || v {
		t.Errorf("%s: set securityContext.allowPrivilegeEscalation: false", c)
	}
	if v, _ := get(sc, "privileged").(bool); v {
		t.Errorf("%s: privileged: reel never needs it", c)
	}
	if !slices.Contains(strs(sc, "capabilities", "drop"), "ALL") {
		t.Errorf("%s: drop ALL capabilities (securityContext.capabilities.drop)", c)
	}
	add := strs(sc, "capabilities", "add")
	for _, a := range add {
		if !capture {
			t.Errorf("%s: adds capability %s but does not capture packets", c, a)
		} else if a != "NET_RAW" && a != "NET_ADMIN" {
			t.Errorf("%s: adds capability %s; passive capture needs NET_RAW (and optionally NET_ADMIN) only", c, a)
		}
	}
	if capture && !slices.Contains(add, "NET_RAW") {
		t.Errorf("%s: passive capture without NET_RAW fails at start", c)
	}
	if !capture {
		nonRoot := func(sc any) (bool, bool) {
			if v, ok := get(sc, "runAsNonRoot").(bool); ok {
				return v, true
			}
			if u := str(sc, "runAsUser"); u != "" {
				return u != "0", true
			}
			return false, false
		}
		v, ok := nonRoot(sc)
		if !ok {
			v, ok = nonRoot(podSC)
		}
		if !ok || !v {
			t.Errorf("%s: run as a non-root user (runAsNonRoot or runAsUser in the pod or container securityContext)", c)
		}
	}
}

// checkShardWiring: a sharded replay is an Indexed Job with completions ==
// parallelism == --shards, takes its index from JOB_COMPLETION_INDEX, shares
// one --start-at and one --run-id across its pods.
func checkShardWiring(t *testing.T, c container, l reelLine, idx int) {
	p := c.pod
	shards, sharded := flagValue(l.args, "shards")
	if !sharded && !p.indexed {
		return
	}
	if !p.indexed {
		t.Errorf("%s: --shards outside an Indexed Job: nothing gives each pod its index", c)
		return
	}
	n, err := strconv.Atoi(shards)
	if err != nil {
		t.Errorf("%s: an Indexed Job replay needs --shards N (got %q)", c, shards)
		return
	}
	par, _ := strconv.Atoi(str(p.job, "parallelism"))
	if p.completions != n || par != n {
		t.Errorf("%s: completions %d, parallelism %d, --shards %d: want all equal (all shards at once, none missing)", c, p.completions, par, n)
	}
	if v, _ := flagValue(l.args, "shard-from-env"); v != "JOB_COMPLETION_INDEX" {
		t.Errorf("%s: --shard-from-env %q, want JOB_COMPLETION_INDEX", c, v)
	}
	if _, ok := flagValue(l.args, "shard"); ok {
		t.Errorf("%s: a fixed --shard in an Indexed Job replays one share n times", c)
	}
	for _, f := range []string{"start-at", "run-id", "out"} {
		if v, ok := flagValue(l.args, f); !ok || v == "" {
			t.Errorf("%s (pod %d): --%s missing or empty: every shard needs the same one", c, idx, f)
		}
	}
	if bl := str(p.job, "backoffLimit"); bl != "0" {
		t.Errorf("%s: backoffLimit %q: a retried shard replays its share on a later clock; want 0", c, bl)
	}
}

// checkNightly: the CronJob ends in `reel compare --fail-on` in a main
// container (so its exit code is the pod's), and a failure is not retried.
func checkNightly(t *testing.T, p *pod) {
	found := false
	for _, c := range p.containers() {
		if c.init || !c.isReel() {
			continue
		}
		env, err := c.env(0)
		if err != nil {
			continue // reported by checkPod
		}
		lines, _ := c.reelLines(env)
		for _, l := range lines {
			if v, ok := flagValue(l.args, "fail-on"); l.args[0] == "compare" && ok && v != "" {
				found = true
			}
		}
	}
	if !found {
		t.Errorf("%s: no container runs reel compare --fail-on RULES", p.doc)
	}
	if bl := str(p.job, "backoffLimit"); bl != "0" {
		t.Errorf("%s: backoffLimit %q: a regression should fail the Job at once; want 0", p.doc, bl)
	}
}

// TestCommandLineCheck shows the checks above catch the mistakes they are
// there for (so a manifest that passes was really checked).
func TestCommandLineCheck(t *testing.T) {
	cli := buildReel(t)
	env := map[string]string{"JOB_COMPLETION_INDEX": "3"}
	base := []string{"replay", "/nonexistent/reel-data", "--target=http://shadow:8000", "--out=/nonexistent/out",
		"--shards=8", "--shard-from-env=JOB_COMPLETION_INDEX", "--start-at=2026-11-26T02:00:00Z"}
	tests := []struct {
		name  string
		args  []string
		bad   bool // check or runForReal must fail
		check bool // the flag check alone catches it
	}{
		{"good line", base, false, false},
		{"unknown subcommand", []string{"replai", "--out=x"}, true, true},
		{"unknown flag", append(slices.Clone(base), "--shardz=8"), true, true},
		{"flag without value at the end", append(slices.Clone(base), "--frame"), true, true},
		{"bad duration", append(slices.Clone(base), "--frame=5x"), true, true},
		{"bad int", []string{"replay", "/nonexistent/d", "--target=http://s:1", "--out=/o", "--shards=eight"}, true, true},
		{"start-at not a time", append(slices.Clone(base[:6]), "--start-at=tomorrow"), true, false},
		{"shard-from-env without --shards", append(slices.Clone(base[:4]), "--shard-from-env=JOB_COMPLETION_INDEX"), true, false},
		{"record with a bad flag", []string{"record", "--iface=eth0", "--port=8000", "--out=/x", "--rotate-age=five"}, true, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			l := reelLine{args: tc.args}
			pos, err := cli.check(l, env)
			if tc.check && err == nil {
				t.Fatalf("the flag check passed %q", tc.args)
			}
			if err == nil {
				err = cli.runForReal(t, l, pos, env)
			}
			if (err != nil) != tc.bad {
				t.Errorf("err %v, want bad=%v", err, tc.bad)
			}
		})
	}
	t.Run("unresolved env reference", func(t *testing.T) {
		if _, err := expand("--start-at=$(START_AT)", map[string]string{}, true); err == nil {
			t.Error("an undefined $(VAR) passed")
		}
		if v, err := expand("$$(KEEP) $(A) $(date +%s)", map[string]string{"A": "1"}, false); err != nil || v != "$(KEEP) 1 $(date +%s)" {
			t.Errorf("got %q, %v", v, err)
		}
	})
	t.Run("shell words", func(t *testing.T) {
		w, err := shellWords(`reel compare "$A" 'x y' --fail-on "$RULES" --html "$A/$run.html" # note`, map[string]string{"A": "/r", "RULES": "p99>+10%"})
		want := []string{"reel", "compare", "/r", "x y", "--fail-on", "p99>+10%", "--html", "/r/x.html"}
		if err != nil || !slices.Equal(w, want) {
			t.Errorf("got %q, %v; want %q", w, err, want)
		}
	})
}
