#!/usr/bin/env bash
# Replay fidelity and rate on loopback, reel against wrk and vegeta in the same
# run, all against one trivial Go server in its own process.
#
#   bench/replay/run.sh            # full run (about 4 minutes)
#   REPS=1 DUR=2s bench/replay/run.sh   # quick look
#   SESSIONS_ONLY=1 bench/replay/run.sh  # lag at 5k req/s and the sessions table, no max-rate search
#
# Needs wrk (apt-get install -y wrk) and vegeta
# (GOBIN=/tmp/vegeta-bin go install github.com/tsenart/vegeta/v12@latest;
# put it on PATH or set VEGETA). A missing peer is reported and skipped.
set -euo pipefail
cd "$(dirname "$0")/../.."
REPS=${REPS:-3}
DUR=${DUR:-4s}
ADDR=${ADDR:-127.0.0.1:18080}
VEGETA=${VEGETA:-$(command -v vegeta || echo /tmp/vegeta-bin/vegeta)}
out=$(mktemp -d)
trap 'kill $srv 2>/dev/null || true; rm -rf "$out"' EXIT

go build -o "$out/replay-bench" ./bench/replay
"$out/replay-bench" server -addr "$ADDR" & srv=$!
sleep 0.5
echo "# machine: $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg), $(go version | cut -d' ' -f3)"

median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
field() { python3 -c "import sys,json; print(json.loads(sys.stdin.read())['$1'])"; }

echo "## lag (median of $REPS runs of $DUR; µs)"
printf '%-8s %-10s %10s %10s %10s %10s %12s\n' rate sender lag_p50 lag_p99 lag_max achieved cpu_us/req
rates_lag="1000 5000 20000"
[ -n "${SESSIONS_ONLY:-}" ] && rates_lag=5000
for rate in $rates_lag; do
  for workers in 0 256; do
    name=$([ "$workers" = 0 ] && echo elastic || echo "fixed$workers")
    : > "$out/runs"
    for _ in $(seq "$REPS"); do
      "$out/replay-bench" lag -target "http://$ADDR" -rate "$rate" -duration "$DUR" -workers "$workers" >> "$out/runs"
    done
    p50=$(while read -r l; do echo "$l" | field lag_p50_us; done < "$out/runs" | median)
    p99=$(while read -r l; do echo "$l" | field lag_p99_us; done < "$out/runs" | median)
    mx=$(while read -r l; do echo "$l" | field lag_max_us; done < "$out/runs" | median)
    ach=$(while read -r l; do echo "$l" | field achieved; done < "$out/runs" | median)
    cpu=$(while read -r l; do echo "$l" | field cpu_us_per_req; done < "$out/runs" | median)
    printf '%-8s %-10s %10.0f %10.0f %10.0f %10.0f %12.1f\n' "$rate" "$name" "$p50" "$p99" "$mx" "$ach" "$cpu"
  done
done

echo "## sessions at 5000 req/s (median of $REPS runs of $DUR; µs): single-turn vs 10k concurrent sessions"
echo "## against a shadow that takes 5 ms where the recording took 1 ms, so every later turn waits (session delay) and is sent by the releaser"
printf '%-10s %-12s %10s %10s %10s %10s %10s %12s\n' sessions shadow lag_p50 lag_p99 lag_max delayed delay_p50 cpu_us/req
for cfg in "0 0" "0 5ms" "10000 5ms"; do
  set -- $cfg
  : > "$out/runs"
  for _ in $(seq "$REPS"); do
    "$out/replay-bench" lag -target "http://$ADDR" -rate 5000 -duration "$DUR" -sessions "$1" -shadow-delay "$2" >> "$out/runs"
  done
  p50=$(while read -r l; do echo "$l" | field lag_p50_us; done < "$out/runs" | median)
  p99=$(while read -r l; do echo "$l" | field lag_p99_us; done < "$out/runs" | median)
  mx=$(while read -r l; do echo "$l" | field lag_max_us; done < "$out/runs" | median)
  dl=$(while read -r l; do echo "$l" | field delayed; done < "$out/runs" | median)
  dp=$(while read -r l; do echo "$l" | field session_delay_p50_us; done < "$out/runs" | median)
  cpu=$(while read -r l; do echo "$l" | field cpu_us_per_req; done < "$out/runs" | median)
  printf '%-10s %-12s %10.0f %10.0f %10.0f %10.0f %10.0f %12.1f\n' "$1" "$2" "$p50" "$p99" "$mx" "$dl" "$dp" "$cpu"
done
[ -n "${SESSIONS_ONLY:-}" ] && exit 0

echo "## maximum sustained rate (achieved ≥ 95 % of offered, ≤ 1 % errors)"
rates="5000 10000 15000 20000 25000 30000 35000 40000 45000 50000 55000 60000 70000"
# a search stops after two offered rates in a row that were not sustained
# reel twice: its default elastic senders (never delay a send), and a fixed
# pool of 64 (--workers 64), like for like with vegeta's -max-workers 64.
maxrate() { # workers → prints the best sustained rate last
  local best=0 r miss=0
  for rate in $rates; do
    [ "$miss" -ge 2 ] && break
    r=$("$out/replay-bench" lag -target "http://$ADDR" -rate "$rate" -duration "$DUR" -workers "$1")
    if [ "$(echo "$r" | field sustained)" = True ]; then best=$rate; miss=0; else miss=$((miss + 1)); fi
    echo "reel   workers=$1 offered $rate achieved $(echo "$r" | field achieved | cut -d. -f1) lag_p99_us $(echo "$r" | field lag_p99_us | cut -d. -f1) cpu_us/req $(echo "$r" | field cpu_us_per_req | cut -d. -f1)" >&2
  done
  echo "$best"
}
best=$(maxrate 0)
echo "reel   max sustained: $best req/s (elastic senders, the default)"
best64=$(maxrate 64)
echo "reel   max sustained: $best64 req/s (--workers 64)"
vbest=0
if [ -x "$VEGETA" ]; then
  miss=0
  for rate in $rates; do
    [ "$miss" -ge 2 ] && break
    rep=$(echo "GET http://$ADDR/" | "$VEGETA" attack -rate "$rate" -duration "$DUR" -max-workers 64 | "$VEGETA" report -type json)
    thr=$(echo "$rep" | python3 -c "import sys,json; r=json.load(sys.stdin); print(int(r['throughput']))")
    ok=$(echo "$rep" | python3 -c "import sys,json; r=json.load(sys.stdin); print(r['success'])")
    echo "vegeta offered $rate achieved $thr success $ok"
    if python3 -c "import sys; sys.exit(0 if $thr >= 0.95*$rate and $ok >= 0.99 else 1)"; then vbest=$rate; miss=0; else miss=$((miss + 1)); fi
  done
  echo "vegeta max sustained: $vbest req/s (-max-workers 64)"
else
  echo "vegeta: not installed, skipped"
fi
if command -v wrk >/dev/null; then
  w=$(wrk -t2 -c64 -d"$DUR" "http://$ADDR/" | awk '/Requests\/sec/ {print int($2)}')
  echo "wrk    closed-loop max: $w req/s (-t2 -c64)"
  python3 -c "print(f'reel/wrk = {$best/$w:.2f} (--workers 64: {$best64/$w:.2f}), reel/vegeta = {($best/$vbest if $vbest else float(\"nan\")):.2f} (--workers 64: {($best64/$vbest if $vbest else float(\"nan\")):.2f})')"
else
  echo "wrk: not installed, skipped"
fi
