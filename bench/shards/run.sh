#!/usr/bin/env bash
# Aggregate replay rate of n `reel replay` shard processes on one machine:
# the same window, split with --shards n --shard-from-env, all started on one
# --start-at, against one trivial loopback server in its own process. The
# window is offered faster than one replayer can send (RATE), so what each
# configuration completes per second is its capacity. Every process is a
# real `reel replay`, wired exactly as the Kubernetes Indexed Job wires them.
#
#   bench/shards/run.sh                      # 1, 2 and 4 shards, 3 runs each
#   REPS=1 N=60000 bench/shards/run.sh       # quick look
#   SHARDS="1 2 4 8" WORKERS=256 bench/shards/run.sh
#   PROCS= bench/shards/run.sh               # every shard may use every core
#
# Prints, per shard count, the median over REPS of the aggregate completed
# rate (requests ÷ (last end − first due), from `reel report --json` over
# all shards' results) and its ratio to one shard, the requests per CPU
# second the shards used together (user + sys; what sharding costs, and what
# the rate becomes where each shard has a core of its own), lag p99 and
# errors.
set -euo pipefail
cd "$(dirname "$0")/../.."
REPS=${REPS:-3}
N=${N:-200000}
RATE=${RATE:-100000}
CONNS=${CONNS:-1024}
SHARDS=${SHARDS:-1 2 4}
WORKERS=${WORKERS:-0}
PROCS=${PROCS:-1}   # GOMAXPROCS of each shard: one core per shard, like a pod with a 1-CPU limit ("" = all cores)
ADDR=${ADDR:-127.0.0.1:18090}
out=$(mktemp -d)
srv=
trap '[ -n "$srv" ] && kill $srv 2>/dev/null; rm -rf "$out"' EXIT

go build -o "$out/reel" ./cmd/reel
go build -o "$out/shards-bench" ./bench/shards
go build -o "$out/replay-bench" ./bench/replay   # its trivial loopback server
"$out/shards-bench" dataset -out "$out/data" -n "$N" -rate "$RATE" -conns "$CONNS"
"$out/replay-bench" server -addr "$ADDR" & srv=$!
sleep 0.5
echo "# machine: $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg), $(go version | cut -d' ' -f3)"
echo "# window: $N requests offered at $RATE req/s on $CONNS recorded connections; --workers $WORKERS; GOMAXPROCS=${PROCS:-all} per shard"

median() { sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
json() { python3 -c "import sys,json; s=json.load(open('$1')); print($2)"; }

printf '%-7s %12s %8s %14s %10s %8s\n' shards 'req/s' ratio 'req/CPU-s' lag_p99_ms errors
base=
for n in $SHARDS; do
  : > "$out/rates"; : > "$out/lags"; : > "$out/errs"; : > "$out/eff"
  for rep in $(seq "$REPS"); do
    res="$out/res-$n-$rep"
    start=$(date -u -d '+2 sec' +%Y-%m-%dT%H:%M:%S.%3NZ)
    pids=()
    for i in $(seq 0 $((n - 1))); do
      ( TIMEFORMAT='%U %S'; time { JOB_COMPLETION_INDEX=$i GOMAXPROCS=$PROCS "$out/reel" replay "$out/data" \
        --target "http://$ADDR" --out "$res" --run-id "bench-$n-$rep" --shards "$n" \
        --shard-from-env JOB_COMPLETION_INDEX --start-at "$start" --allow-recorded-host --quiet \
        --workers "$WORKERS" --timeout 30s > "$out/log-$n-$rep-$i" 2>&1; } ) 2> "$out/cpu-$n-$rep-$i" &
      pids+=($!)
    done
    for p in "${pids[@]}"; do wait "$p"; done
    "$out/reel" report "$res" --json > "$out/rep.json"
    json "$out/rep.json" "s['requests']" | grep -qx "$N" || { echo "shards $n: not every request replayed" >&2; exit 1; }
    json "$out/rep.json" "s['request_rate']" >> "$out/rates"
    json "$out/rep.json" "s['lag']['p99_ns']/1e6" >> "$out/lags"
    json "$out/rep.json" "s['errors']" >> "$out/errs"
    cat "$out"/cpu-$n-$rep-* | awk -v n="$N" '{c += $1 + $2} END {print n / c}' >> "$out/eff"
    rm -rf "$res"
  done
  r=$(median < "$out/rates"); l=$(median < "$out/lags"); e=$(median < "$out/errs"); c=$(median < "$out/eff")
  base=${base:-$r}
  printf '%-7s %12.0f %8.2f %14.0f %10.0f %8s\n' "$n" "$r" "$(python3 -c "print($r/$base)")" "$c" "$l" "$e"
done
