#!/bin/sh
# The sidecar's recording work per streamed exchange and its parts, this
# tree next to an older commit, interleaved, medians of ROUNDS runs each:
#   BenchmarkProxySSERecorded (recorder/proxy): cpu-ns/op and allocs/op of
#     one bench/capture exchange (forwarding, SSE scan, enrichment,
#     redaction, turn links; no sockets, no Parquet)
#   BenchmarkRedactSSE (redact): 200 chat chunks redacted
#   BenchmarkScanClassify (sse): 100 chat chunks scanned and classified
#   BenchmarkLinkTurns (redact): a 17-message request and its stream
#
#   bench/recording/old-vs-new.sh [OLD_REF] [ROUNDS]    # default b3a7386 (before round 4), 5
# Take the benchmark lock on a shared machine:
#   flock /tmp/reel-bench.lock bench/recording/old-vs-new.sh
set -eu
old=${1:-b3a7386}
rounds=${2:-5}
. "$(dirname "$0")/build-old-new.sh"
echo "# $(uptime)"
# run VERSION PKG BENCH N: one benchmark line
run() {
	dir="$root/$2"; [ "$1" = old ] && dir="$tmp/old/$2"
	name=$(echo "$2" | tr / _)
	(cd "$dir" && "$tmp/$1-$name.test" -test.run XXX -test.bench "$3\$" -test.benchtime "$4" | grep '^Benchmark')
}
for i in $(seq "$rounds"); do
	for v in old new; do
		run $v recorder/proxy ProxySSERecorded 5000x | awk -v v=$v '{for(i=1;i<=NF;i++){if($i=="cpu-ns/op")c=$(i-1); if($i=="allocs/op")a=$(i-1)} print v, "ProxySSERecorded", c/1000, "us-cpu", a, "allocs"}'
		run $v redact RedactSSE 300x | awk -v v=$v '{print v, "RedactSSE", $3/1000, "us"}'
		run $v sse ScanClassify 3000x | awk -v v=$v '{print v, "ScanClassify", $3/1000, "us"}'
		run $v redact LinkTurns 3000x | awk -v v=$v '{print v, "LinkTurns", $3/1000, "us"}'
	done
done >"$tmp/all"
echo "# $(uptime)"
# medians per version and benchmark
sort -k2,2 -k1,1 -k3,3n "$tmp/all" | awk '
	{k=$2" "$1; v[k]=v[k]" "$3; n[k]++; if ($5!="") al[k]=al[k]" "$5}
	END {for (k in v) {split(v[k], a, " "); m=a[int((n[k]+1)/2)]; printf "%-24s median %8.1f  (all:%s)%s\n", k, m, v[k], (al[k]!="" ? "  allocs:"al[k] : "")}}' | sort
