#!/usr/bin/env bash
# Peak memory (max RSS) of `reel replay`, `reel stats` and `reel report` at a
# small and a big run length, and `reel stats` beside DuckDB on the big one.
#
#   bench/memory/run.sh                                  # 100k vs 10M exchanges (replay at 10M takes ~20 min)
#   SMALL=100000 BIG=1000000 bench/memory/run.sh         # what fits a shared 2-core box
#   REPLAY_BIG=1000000 BIG=10000000 bench/memory/run.sh  # stats/report at 10M, replay at 1M
#   GEN=accesslog bench/memory/run.sh                    # import through reel record --access-log (no TTFT)
#   DUCKDB=0 bench/memory/run.sh                         # skip the DuckDB comparison (needs cgo)
#   REPS=5 bench/memory/run.sh                           # alternating reel stats / DuckDB runs for the comparison's medians (default 3)
#   RSS_REPS=3 bench/memory/run.sh                       # run stats and report 3 times per length; the ratio is of the medians (default 1)
#   REPLAY_REPS=3 bench/memory/run.sh                    # replay 3 times per length (a 10M replay takes ~17 min and both cores; default 1)
#   DATA=/tmp/reel-mem bench/memory/run.sh               # keep generated datasets there and reuse them (10M: ~800 MB, minutes to make)
#   REPLAY=json SPEED=2 REPLAY_BIG=3000000 bench/memory/run.sh   # non-streaming answers, 10k req/s
#   ONLY="stats report" bench/memory/run.sh              # some of replay, stats, report (default all three)
#
# Traffic (bench/memory/main.go): small streaming chat requests, Poisson at
# RATE exchanges/s, log-normal TTFT and token gaps, a burst of 4× longer
# prompts every 10 minutes. The replay sends it at RATE × SPEED req/s to a
# loopback SSE server in its own process that answers at once, so what is
# measured is the replayer (REPLAY=json: the server answers with one JSON
# body instead of an event stream). `reel report` reads the replay's results where
# the replay ran at that length, else results the generator writes (the rows
# a replay at speed 1 would write).
#
# Prints, per command and length, max RSS, wall and CPU seconds, the
# big ÷ small RSS ratio (the target: ≤ 1.2), and the DuckDB comparison: p50
# and p99 of E2E and TTFT from `reel stats --json` against DuckDB's
# quantile_cont over the same Parquet, and both times (medians of REPS
# alternating runs; DuckDB at its default threads and at one thread).
set -euo pipefail
cd "$(dirname "$0")/../.."
SMALL=${SMALL:-100000}
BIG=${BIG:-10000000}
REPLAY_BIG=${REPLAY_BIG:-$BIG}
RATE=${RATE:-5000}
SPEED=${SPEED:-2}
GEN=${GEN:-dataset}
DUCKDB=${DUCKDB:-1}
REPS=${REPS:-3}
RSS_REPS=${RSS_REPS:-1}
REPLAY_REPS=${REPLAY_REPS:-1}
REPLAY=${REPLAY:-sse}
ONLY=${ONLY:-replay stats report}
ADDR=${ADDR:-127.0.0.1:18095}
out=${OUT:-$(mktemp -d)}
data=${DATA:-$out}
srv=
trap '[ -n "$srv" ] && kill $srv 2>/dev/null; [ -z "${OUT:-}" ] && rm -rf "$out"' EXIT
mkdir -p "$data"
want() { case " $ONLY " in *" $1 "*) return 0 ;; esac; return 1; }

CGO_ENABLED=0 go build -o "$out/reel" ./cmd/reel
go build -o "$out/memory-bench" ./bench/memory
server_flags=()
[ "$REPLAY" = json ] && server_flags=(-json)
"$out/memory-bench" server -addr "$ADDR" "${server_flags[@]}" & srv=$!
echo "# machine: $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg), $(go version | cut -d' ' -f3); $GEN traffic at $RATE/s, replayed at ×$SPEED against a $REPLAY server"

# measure NAME N CMD...: one line "NAME N rss_MB wall_s cpu_s"
measure() {
  local name=$1 n=$2
  shift 2
  /usr/bin/time -f "%M %e %U %S" -o "$out/time" "$@" > "$out/$name-$n.out" 2> "$out/$name-$n.err" || {
    echo "$name at $n failed:" >&2; tail -5 "$out/$name-$n.err" >&2; return 1; }
  read -r kb wall user sys < "$out/time"
  printf '%-7s %10d %8.1f %8.1f %8.1f\n' "$name" "$n" "$(echo "$kb/1024" | bc -l)" "$wall" "$(echo "$user+$sys" | bc -l)" | tee -a "$out/table"
}

generate() { # N → $data/data-N (a recording), unless it is there
  local n=$1 dir=$data/$GEN-$RATE-$1
  [ -d "$dir" ] && return 0
  if [ "$GEN" = accesslog ]; then
    "$out/memory-bench" accesslog -n "$n" -rate "$RATE" | "$out/reel" record --access-log - --out "$dir.tmp" > /dev/null 2>&1
  else
    "$out/memory-bench" dataset -n "$n" -rate "$RATE" -out "$dir.tmp"
  fi
  mv "$dir.tmp" "$dir"
}
recording() { echo "$data/$GEN-$RATE-$1"; }

printf '%-7s %10s %8s %8s %8s\n' command exchanges rss_MB wall_s cpu_s
: > "$out/table"
for n in "$SMALL" "$BIG"; do
  generate "$n"
  for _ in $(seq "$RSS_REPS"); do
    want stats && measure stats "$n" "$out/reel" stats "$(recording "$n")" --json
  done
  results="$out/results-$n"
  replay_n=$n
  [ "$n" = "$BIG" ] && replay_n=$REPLAY_BIG
  if want replay; then
    generate "$replay_n"
    for _ in $(seq "$REPLAY_REPS"); do
      rm -rf "$out/replayed-$replay_n"
      measure replay "$replay_n" "$out/reel" replay "$(recording "$replay_n")" --target "http://$ADDR" --out "$out/replayed-$replay_n" --speed "$SPEED" --quiet
      grep -i 'cpu-bound\|behind\|peak in flight\|lag ' "$out/replay-$replay_n.err" "$out/replay-$replay_n.out" 2>/dev/null | sed 's/^/  replay summary: /' | head -4
    done
  fi
  if want report; then
    if [ "$replay_n" = "$n" ] && [ -d "$out/replayed-$n" ]; then
      results="$out/replayed-$n"
    else # results a replay at speed 1 would write, generated
      results="$data/results-$RATE-$n"
      [ -d "$results" ] || { "$out/memory-bench" results -n "$n" -rate "$RATE" -out "$results.tmp" && mv "$results.tmp" "$results"; }
    fi
    for _ in $(seq "$RSS_REPS"); do
      measure report "$n" "$out/reel" report "$results"
    done
  fi
done
echo "# load at the end: $(cut -d' ' -f1-3 /proc/loadavg)"

echo "## big ÷ small max RSS (target ≤ 1.2; medians of the runs at each length)"
for c in stats replay report; do
  python3 - "$out/table" "$c" <<'EOF'
import statistics, sys
rss = {}
for l in open(sys.argv[1]):
    f = l.split()
    if f[0] == sys.argv[2]:
        rss.setdefault(int(f[1]), []).append(float(f[2]))
if len(rss) >= 2:
    small, big = min(rss), max(rss)
    med = {n: statistics.median(v) for n, v in rss.items()}
    print(f"{sys.argv[2]:7} {med[big] / med[small]:.2f} ({big} vs {small} exchanges; MB {med[big]:.1f} vs {med[small]:.1f}, of {len(rss[big])} and {len(rss[small])} runs)")
EOF
done

if [ "$DUCKDB" = 1 ] && want stats; then
  # The same run, alternating: `reel stats` and DuckDB (its default of one
  # thread per core, and one thread: DuckDB's cheapest in CPU here) REPS
  # times each over the same files; medians of CPU (user + system, every
  # thread of the process) and wall.
  echo "## reel stats vs DuckDB quantile_cont, $BIG exchanges, medians of $REPS alternating runs"
  (cd examples/duckdb && CGO_ENABLED=1 go build -o "$out/duckdb-quantiles" ./quantiles)
  : > "$out/duck-table"
  for i in $(seq "$REPS"); do
    measure vsduck "$BIG" "$out/reel" stats "$(recording "$BIG")" --json > /dev/null
    for threads in 0 1; do
      /usr/bin/time -f "%e %U %S" -o "$out/duck-time" "$out/duckdb-quantiles" -threads "$threads" "$(recording "$BIG")" > "$out/duck-$threads.json"
      read -r dwall duser dsys < "$out/duck-time"
      echo "$threads $dwall $(echo "$duser+$dsys" | bc -l) $(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["threads"])' "$out/duck-$threads.json")" >> "$out/duck-table"
    done
  done
  echo "# load at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
  python3 - "$out/vsduck-$BIG.out" "$out/duck-0.json" "$out/table" "$out/duck-table" "$BIG" <<'EOF'
import json, statistics, sys
reel = json.load(open(sys.argv[1]))["summary"]
duck = json.load(open(sys.argv[2]))
rows = [l.split() for l in open(sys.argv[3])]
runs = [r for r in rows if r[0] == "vsduck" and r[1] == sys.argv[5]]
ducks = [l.split() for l in open(sys.argv[4])]
print(f"{'quantile':10} {'reel':>14} {'duckdb':>14} {'diff':>8}  reel rel_err bound")
ok = True
for m, key in (("e2e", "e2e"), ("ttft", "ttft")):
    for p in ("p50", "p99"):
        r = reel[m][p + "_ns"]
        d = duck[f"{key}_{p}_ns"]
        bound = reel[m].get("rel_err", 0)
        diff = (r - d) / d
        ok &= abs(diff) <= bound + 0.002  # + what nearest rank vs interpolation can differ by
        print(f"{m + '.' + p:10} {r:14d} {d:14.0f} {100 * diff:+7.2f}%  {100 * bound:g} %")
print(f"rows: reel {reel['requests']}, duckdb {duck['rows']}; values within the bound: {ok}")
med = statistics.median
rwall, rcpu = med(float(r[3]) for r in runs), med(float(r[4]) for r in runs)
print(f"reel stats (every §7 statistic): {rwall:.1f} s wall, {rcpu:.1f} s CPU; wall runs: {', '.join(r[3] for r in runs)}; CPU runs: {', '.join(r[4] for r in runs)}")
for t in ("0", "1"):
    ds = [d for d in ducks if d[0] == t]
    dwall, dcpu = med(float(d[1]) for d in ds), med(float(d[2]) for d in ds)
    print(f"duckdb, {ds[0][3]} thread(s) (4 quantiles of 2 columns): {dwall:.1f} s wall, {dcpu:.1f} s CPU; wall runs: {', '.join(d[1] for d in ds)}; CPU runs: {', '.join(d[2] for d in ds)}; "
          f"reel ÷ duckdb: {rwall / dwall:.2f}× wall, {rcpu / dcpu:.2f}× CPU")
    # Each round's reel run against the DuckDB run right after it: the
    # box's speed drifts over minutes, so the paired ratios' median is the
    # steadier comparison.
    pw = [float(r[3]) / float(d[1]) for r, d in zip(runs, ds)]
    pc = [float(r[4]) / float(d[2]) for r, d in zip(runs, ds)]
    print(f"  paired by round, {ds[0][3]} thread(s): median {med(pw):.2f}× wall ({', '.join(f'{x:.2f}' for x in pw)}), {med(pc):.2f}× CPU ({', '.join(f'{x:.2f}' for x in pc)})")
EOF
fi
