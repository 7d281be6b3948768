#!/usr/bin/env bash
# CPU per exchange of every way to record the same streaming traffic, in one
# run: tcpdump -w (the floor), reel record --iface, a bare
# httputil.ReverseProxy, and the reel record sidecar (issue: "recording that
# costs production nothing"). Needs tcpdump (apt-get install -y tcpdump) and
# root (CAP_NET_RAW) for the two captures.
#
#   bench/capture/run.sh                          # 4000 exchanges at 500 req/s, 3 repetitions
#   PREVIOUS=/tmp/reel-old bench/capture/run.sh   # also earlier reel builds (comma-separated), same traffic
#   bench/capture/run.sh -only tcpdump,iface      # the passive-capture rows alone
#   N=2000 REPS=1 bench/capture/run.sh            # quick look
set -euo pipefail
cd "$(dirname "$0")/../.."
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
CGO_ENABLED=0 go build -o "$out/reel" ./cmd/reel
go build -o "$out/capture-bench" ./bench/capture
args=(-reel "$out/reel" -n "${N:-4000}" -rate "${RATE:-500}" -reps "${REPS:-3}")
if [ -n "${PREVIOUS:-}" ]; then args+=(-reel-previous "$PREVIOUS"); fi
exec "$out/capture-bench" "${args[@]}" "$@"
