package main

import (
	"database/sql"
	"fmt"
	"math"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/reelkit/reel/analysis"
	"github.com/reelkit/reel/formats"
	"github.com/reelkit/reel/formats/formatstest"
)

// freeAddr returns a loopback address nothing listens on right now.
func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// waitListening waits up to 30 s for addr to accept connections.
func waitListening(t *testing.T, addr string, cmd *exec.Cmd, log *strings.Builder) {
	t.Helper()
	for range 300 {
		if c, err := net.DialTimeout("tcp", addr, 100*time.Millisecond); err == nil {
			c.Close()
			return
		}
		if cmd.ProcessState != nil {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("%s never listened on %s:\n%s", cmd.Path, addr, log)
}

// recordDataset records real traffic the way a gateway's sidecar would:
// the simulated cluster (10× time scale) behind `reel record` as a proxy,
// driven by the simulator's bursty chat traffic with a long-prompt incident,
// then a SIGTERM that closes the files. Both programs are built from this
// tree.
func recordDataset(t *testing.T) string {
	t.Helper()
	bin := t.TempDir()
	for _, pkg := range []string{"./cmd/reel", "./examples/simcluster"} {
		b := exec.Command("go", "build", "-o", bin, pkg)
		b.Dir = "../.."
		b.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := b.CombinedOutput(); err != nil {
			t.Fatalf("go build %s: %v\n%s", pkg, err, out)
		}
	}
	start := func(log *strings.Builder, name string, args ...string) *exec.Cmd {
		cmd := exec.Command(filepath.Join(bin, name), args...)
		cmd.Env = append(os.Environ(), "REEL_REDACT_KEY=6f7c2a19d0b34e8a9c15f2e7b4d8a6c3")
		cmd.Stdout, cmd.Stderr = log, log
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			if cmd.ProcessState == nil {
				cmd.Process.Kill()
				cmd.Wait()
			}
		})
		return cmd
	}
	dir := t.TempDir()
	var simLog, recLog, genLog strings.Builder
	simAddr, recAddr := freeAddr(t), freeAddr(t)
	sim := start(&simLog, "simcluster", "--listen", simAddr, "--time-scale", "10")
	waitListening(t, simAddr, sim, &simLog)
	rec := start(&recLog, "reel", "record", "--listen", recAddr, "--upstream", "http://"+simAddr, "--out", dir,
		"--recorder-id", "gw-1", "--metrics-listen", "", "--context-header", "x-batch-size", "--context-header", "x-queue-depth")
	waitListening(t, recAddr, rec, &recLog)
	gen := start(&genLog, "simcluster", "--generate", "--target", "http://"+recAddr, "--speed", "4", "--duration", "15s",
		"--incident-at", "6s", "--incident-for", "4s", "--seed", "9")
	if err := gen.Wait(); err != nil {
		t.Fatalf("traffic generator: %v\n%s", err, &genLog)
	}
	rec.Process.Signal(syscall.SIGTERM)
	done := make(chan error, 1)
	go func() { done <- rec.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("reel record after SIGTERM: %v\n%s", err, &recLog)
		}
	case <-time.After(90 * time.Second):
		t.Fatalf("reel record did not stop within 90 s of SIGTERM:\n%s", &recLog)
	}
	return dir
}

// queryAll runs a query file and returns its rows as maps by column name.
func queryAll(t *testing.T, db *sql.DB, file string) []map[string]any {
	t.Helper()
	q, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	rows, err := db.Query(string(q))
	if err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	defer rows.Close()
	cols, _ := rows.Columns()
	var out []map[string]any
	for rows.Next() {
		vals := make([]any, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		m := map[string]any{}
		for i, c := range cols {
			m[c] = vals[i]
		}
		out = append(out, m)
	}
	if err := rows.Err(); err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	if len(out) == 0 {
		t.Fatalf("%s: no rows", file)
	}
	return out
}

// num turns a scanned DuckDB number into a float64 (NaN for NULL).
func num(v any) float64 {
	switch x := v.(type) {
	case int64:
		return float64(x)
	case int32:
		return float64(x)
	case float64:
		return x
	case float32:
		return float64(x)
	case nil:
		return math.NaN()
	}
	panic(fmt.Sprintf("not a number: %T %v", v, v))
}

// near reports whether a and b agree to 1e-9 relative (both NaN agree).
func near(a, b float64) bool {
	if math.IsNaN(a) || math.IsNaN(b) {
		return math.IsNaN(a) && math.IsNaN(b)
	}
	return math.Abs(a-b) <= 1e-9*math.Max(1, math.Max(math.Abs(a), math.Abs(b)))
}

func asTime(t *testing.T, v any) time.Time {
	t.Helper()
	ts, ok := v.(time.Time)
	if !ok {
		t.Fatalf("not a timestamp: %T %v", v, v)
	}
	return ts.UTC()
}

// checkRows compares query rows with expected rows, column by column.
func checkRows(t *testing.T, got []map[string]any, want [][]float64, key func(map[string]any) string, wantKeys []string, cols []string) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%d rows, want %d", len(got), len(want))
	}
	for i, row := range got {
		if k := key(row); k != wantKeys[i] {
			t.Errorf("row %d is %s, want %s", i, k, wantKeys[i])
		}
		for j, c := range cols {
			if g := num(row[c]); !near(g, want[i][j]) {
				t.Errorf("row %s: %s = %v, want %v", wantKeys[i], c, g, want[i][j])
			}
		}
	}
}

func mean(v []float64) float64 {
	if len(v) == 0 {
		return math.NaN()
	}
	s := 0.0
	for _, x := range v {
		s += x
	}
	return s / float64(len(v))
}

// pearson is the sample correlation DuckDB's corr computes.
func pearson(x, y []float64) float64 {
	mx, my := mean(x), mean(y)
	var sxy, sxx, syy float64
	for i := range x {
		sxy += (x[i] - mx) * (y[i] - my)
		sxx += (x[i] - mx) * (x[i] - mx)
		syy += (y[i] - my) * (y[i] - my)
	}
	return sxy / math.Sqrt(sxx*syy)
}

// groupBy groups rows by a key, keeping the keys in first-seen order of the
// sorted keys.
func groupBy[T any](xs []*formats.Exchange, key func(*formats.Exchange) (time.Time, bool), val func(*formats.Exchange) T) ([]time.Time, map[time.Time][]T) {
	g := map[time.Time][]T{}
	for _, x := range xs {
		if k, ok := key(x); ok {
			g[k] = append(g[k], val(x))
		}
	}
	keys := make([]time.Time, 0, len(g))
	for k := range g {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b time.Time) int { return a.Compare(b) })
	return keys, g
}

// TestQueries runs every queries/*.sql file with DuckDB on a dataset
// recorded by `reel record` and checks each answer against the same figure
// computed in Go from reel's reader (and, for prefix sharing, from the
// analysis `reel stats` runs). A new .sql file needs a check here.
func TestQueries(t *testing.T) {
	if testing.Short() {
		t.Skip("records 15 s of simulated traffic")
	}
	dir := recordDataset(t)
	xs := formatstest.Read[formats.Exchange](t, dir)
	if len(xs) < 200 {
		t.Fatalf("recorded %d exchanges, want a few hundred", len(xs))
	}
	db := openDuckDB(t)
	db.SetMaxOpenConns(1)           // the SET and the view belong to one connection
	db.Exec("SET TimeZone = 'UTC'") // date_trunc on TIMESTAMPTZ follows the session zone; without ICU it is UTC anyway
	if _, err := db.Exec(fmt.Sprintf("CREATE VIEW exchanges AS SELECT * FROM read_parquet('%s', hive_partitioning = true)",
		filepath.ToSlash(filepath.Join(dir, "dt=*", "hour=*", "*.parquet")))); err != nil {
		t.Fatal(err)
	}
	timeKey := func(col string) func(map[string]any) string {
		return func(r map[string]any) string { return asTime(t, r[col]).Format(time.RFC3339) }
	}
	fmtKeys := func(ks []time.Time) []string {
		var s []string
		for _, k := range ks {
			s = append(s, k.Format(time.RFC3339))
		}
		return s
	}

	checks := map[string]func(t *testing.T, rows []map[string]any){
		"arrival_rate_per_minute.sql": func(t *testing.T, rows []map[string]any) {
			sorted := slices.Clone(xs)
			slices.SortStableFunc(sorted, func(a, b *formats.Exchange) int {
				if a.TsUnixNs != b.TsUnixNs {
					return int(a.TsUnixNs - b.TsUnixNs)
				}
				if c := strings.Compare(a.Recorder, b.Recorder); c != 0 {
					return c
				}
				return int(a.Seq - b.Seq)
			})
			gaps := map[*formats.Exchange]float64{}
			for i := 1; i < len(sorted); i++ {
				gaps[sorted[i]] = float64(sorted[i].TsUnixNs-sorted[i-1].TsUnixNs) / 1e6
			}
			keys, g := groupBy(sorted, func(x *formats.Exchange) (time.Time, bool) { return x.Ts.UTC().Truncate(time.Minute), true },
				func(x *formats.Exchange) *formats.Exchange { return x })
			var want [][]float64
			for _, k := range keys {
				var gs []float64
				stream := 0.0
				for _, x := range g[k] {
					if d, ok := gaps[x]; ok {
						gs = append(gs, d)
					}
					if x.Stream {
						stream++
					}
				}
				n := float64(len(g[k]))
				want = append(want, []float64{n, n / 60, quantileCont(gs, 0.5), quantileCont(gs, 0.99), stream / n})
			}
			checkRows(t, rows, want, timeKey("minute"), fmtKeys(keys), []string{"requests", "requests_per_s", "gap_p50_ms", "gap_p99_ms", "stream_share"})
		},
		"prompt_length_by_hour.sql": func(t *testing.T, rows []map[string]any) {
			keys, g := groupBy(xs, func(x *formats.Exchange) (time.Time, bool) { return x.Ts.UTC().Truncate(time.Hour), x.PromptTokens > 0 },
				func(x *formats.Exchange) *formats.Exchange { return x })
			var want [][]float64
			for _, k := range keys {
				var p []float64
				var buckets [4]float64
				usage := 0.0
				for _, x := range g[k] {
					v := x.PromptTokens
					p = append(p, float64(v))
					switch {
					case v < 512:
						buckets[0]++
					case v < 2048:
						buckets[1]++
					case v < 8192:
						buckets[2]++
					default:
						buckets[3]++
					}
					if x.PromptTokensSource == "usage" {
						usage++
					}
				}
				n := float64(len(p))
				want = append(want, []float64{n, quantileCont(p, 0.5), quantileCont(p, 0.9), quantileCont(p, 0.99), slices.Max(p),
					buckets[0], buckets[1], buckets[2], buckets[3], usage / n})
			}
			checkRows(t, rows, want, timeKey("hour_start"), fmtKeys(keys),
				[]string{"requests", "p50_tokens", "p90_tokens", "p99_tokens", "max_tokens", "short", "medium", "long", "very_long", "from_usage_share"})
			if len(want) > 0 && want[0][7] == 0 && want[0][8] == 0 {
				t.Errorf("no long prompts in the recording: the incident did not reach the dataset")
			}
		},
		"prefix_sharing.sql": func(t *testing.T, rows []map[string]any) {
			a := analysis.New(analysis.Options{})
			for _, x := range xs {
				a.AddExchange(x)
			}
			p := a.Summary().Prefix
			if p.Capped || p.Blocks == 0 {
				t.Fatalf("analysis prefix sharing %+v: nothing to compare", p)
			}
			if p.Ratio <= 0 {
				t.Errorf("prefix-sharing ratio %v: the simulator's chat traffic shares prompt prefixes", p.Ratio)
			}
			want := [][]float64{{float64(p.Requests), float64(p.Blocks), float64(p.Reused), p.Ratio, p.RequestShare}}
			checkRows(t, rows, want, func(map[string]any) string { return "all" }, []string{"all"},
				[]string{"requests", "blocks", "reused_blocks", "ratio", "request_share"})
		},
		"p99_vs_batch_size.sql": func(t *testing.T, rows []map[string]any) {
			keys, g := groupBy(xs, func(x *formats.Exchange) (time.Time, bool) {
				return time.Unix(0, x.Ts.UnixNano()-x.Ts.UnixNano()%int64(5*time.Second)).UTC(), x.Status >= 200 && x.Status <= 399 && x.Error == ""
			}, func(x *formats.Exchange) *formats.Exchange { return x })
			var want [][]float64
			var p99s, batches []float64
			for _, k := range keys {
				var d, b, q []float64
				long := 0.0
				for _, x := range g[k] {
					d = append(d, float64(x.DurationNs)/1e6)
					if x.BatchSize >= 0 {
						b = append(b, float64(x.BatchSize))
					}
					if x.QueueDepth >= 0 {
						q = append(q, float64(x.QueueDepth))
					}
					if x.PromptTokens >= 2048 {
						long++
					}
				}
				p99 := quantileCont(d, 0.99)
				if len(b) > 0 {
					p99s, batches = append(p99s, p99), append(batches, mean(b))
				}
				want = append(want, []float64{float64(len(d)), quantileCont(d, 0.5), p99, mean(b), mean(q), long / float64(len(d))})
			}
			if len(batches) < 3 {
				t.Fatalf("%d frames report a batch size: the recorder did not keep x-batch-size", len(batches))
			}
			corr := pearson(p99s, batches)
			for i := range want {
				want[i] = append(want[i], corr)
			}
			checkRows(t, rows, want, timeKey("frame"), fmtKeys(keys),
				[]string{"requests", "p50_ms", "p99_ms", "mean_batch", "mean_queue", "long_prompt_share", "corr_p99_batch"})
			t.Logf("%d frames; correlation of frame p99 with mean batch size: %.2f", len(keys), corr)
		},
	}

	files, err := filepath.Glob("queries/*.sql")
	if err != nil || len(files) == 0 {
		t.Fatalf("no queries/*.sql: %v", err)
	}
	for _, f := range files {
		name := filepath.Base(f)
		check, ok := checks[name]
		if !ok {
			t.Errorf("%s has no check in TestQueries", name)
			continue
		}
		delete(checks, name)
		t.Run(strings.TrimSuffix(name, ".sql"), func(t *testing.T) { check(t, queryAll(t, db, f)) })
	}
	for name := range checks {
		t.Errorf("check for %s, but no such file in queries/", name)
	}
}

// sqlColumns extracts "name type" pairs from the column list of the CREATE
// TABLE statement that starts with head in doc.
func sqlColumns(t *testing.T, doc, head string) [][2]string {
	t.Helper()
	i := strings.Index(doc, head)
	if i < 0 {
		t.Fatalf("docs/schema.md has no %q", head)
	}
	s := doc[i+strings.Index(doc[i:], "(")+1:]
	var cols [][2]string
	depth, start := 0, 0
	for j := 0; j < len(s); j++ {
		switch s[j] {
		case '(', '<':
			depth++
		case '>':
			depth--
		case ')':
			if depth == 0 {
				s = s[:j]
				j = len(s)
				break
			}
			depth--
		case ',':
			if depth == 0 {
				item := strings.Fields(s[start:j])
				cols = append(cols, [2]string{item[0], strings.Join(item[1:], " ")})
				start = j + 1
			}
		}
	}
	item := strings.Fields(s[start:])
	return append(cols, [2]string{item[0], strings.Join(item[1:], " ")})
}

// engineType spells a DuckDB column type in Spark SQL or Trino.
func engineType(duck string, trino bool) string {
	if e, ok := strings.CutSuffix(duck, "[]"); ok {
		if trino {
			return "array(" + engineType(e, trino) + ")"
		}
		return "ARRAY<" + engineType(e, trino) + ">"
	}
	if kv, ok := strings.CutPrefix(duck, "MAP("); ok {
		k, v, _ := strings.Cut(strings.TrimSuffix(kv, ")"), ", ")
		if trino {
			return "map(" + engineType(k, trino) + ", " + engineType(v, trino) + ")"
		}
		return "MAP<" + engineType(k, trino) + ", " + engineType(v, trino) + ">"
	}
	spark := map[string]string{"BIGINT": "BIGINT", "INTEGER": "INT", "VARCHAR": "STRING", "BLOB": "BINARY",
		"BOOLEAN": "BOOLEAN", "TIMESTAMP WITH TIME ZONE": "TIMESTAMP"}[duck]
	if trino {
		return map[string]string{"BIGINT": "bigint", "INT": "integer", "STRING": "varchar", "BINARY": "varbinary",
			"BOOLEAN": "boolean", "TIMESTAMP": "timestamp"}[spark]
	}
	return spark
}

// TestSchemaDocTables checks the Spark and Trino table definitions in
// docs/schema.md against the columns DuckDB finds in files reel writes:
// same names, same order, matching types, dt and hour last.
func TestSchemaDocTables(t *testing.T) {
	b, err := os.ReadFile("../../docs/schema.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	exDir, resDir := t.TempDir(), t.TempDir()
	writeExchanges(t, exDir, 10)
	writeAll(t, formats.WriterOptions{Dir: resDir, Recorder: "replay", NoSpool: true}, []formats.Result{{OrigTs: t0, Frame: t0}})
	db := openDuckDB(t)
	describe := func(dir string) [][2]string {
		rows, err := db.Query(fmt.Sprintf("DESCRIBE SELECT * FROM read_parquet('%s', hive_partitioning = false)", datasetGlob(dir)))
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		cols, _ := rows.Columns()
		var out [][2]string
		for rows.Next() {
			vals := make([]any, len(cols))
			ptrs := make([]any, len(cols))
			for i := range vals {
				ptrs[i] = &vals[i]
			}
			if err := rows.Scan(ptrs...); err != nil {
				t.Fatal(err)
			}
			out = append(out, [2]string{fmt.Sprint(vals[0]), fmt.Sprint(vals[1])})
		}
		return out
	}
	norm := func(s string) string { return strings.ToLower(strings.ReplaceAll(s, " ", "")) }
	for _, tc := range []struct {
		head  string
		dir   string
		trino bool
	}{
		{"CREATE TABLE reel_exchanges (", exDir, false},
		{"CREATE TABLE reel_results (", resDir, false},
		{"CREATE TABLE hive.reel.exchanges (", exDir, true},
	} {
		t.Run(tc.head, func(t *testing.T) {
			got := sqlColumns(t, doc, tc.head)
			want := describe(tc.dir)
			if n := len(got); n < 3 || got[n-2][0] != "dt" || got[n-1][0] != "hour" {
				t.Fatalf("the table should end with the partition columns dt, hour: %v", got)
			}
			got = got[:len(got)-2]
			if len(got) != len(want) {
				t.Fatalf("%d columns documented, the files have %d: %v", len(got), len(want), want)
			}
			for i := range want {
				wt := engineType(want[i][1], tc.trino)
				if got[i][0] != want[i][0] || norm(got[i][1]) != norm(wt) {
					t.Errorf("column %d: documented %s %s, the files have %s %s (%s)", i+1, got[i][0], got[i][1], want[i][0], wt, want[i][1])
				}
			}
		})
	}
}
