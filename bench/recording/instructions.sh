#!/bin/sh
# Instructions per operation of the recording benchmarks, this tree next to
# an older commit, counted by cachegrind: a figure the machine's load does
# not move, for deciding between two versions on a shared box. Each count is
# (Ir(N2) - Ir(N1)) / (N2 - N1) of one benchmark run at two lengths, so the
# test binary's start-up drops out; GOGC=off (the default here, GOGC=100 to
# count the collector too) because how often the collector runs depends on
# timing, and GOMAXPROCS=1 because an idle P's spinning and sysmon are
# counted too and grow with the run's wall time: either moves the count by
# 5-20 % between runs of one binary on a loaded machine; so set, repeated
# runs agree within about 0.2 %.
#
#   bench/recording/instructions.sh [OLD_REF]    # default 8b2ef75 (before session 7)
# Needs valgrind. About two minutes.
set -eu
old=${1:-8b2ef75}
gogc=${GOGC:-off}
. "$(dirname "$0")/build-old-new.sh"
# ir VERSION PKG BENCH N: instructions of one run of BENCH for N iterations
ir() {
	dir="$root/$2"; [ "$1" = old ] && dir="$tmp/old/$2"
	name=$(echo "$2" | tr / _)
	(cd "$dir" && GOMAXPROCS=1 GOGC=$gogc GODEBUG=asyncpreemptoff=1 valgrind --tool=cachegrind --cache-sim=no --cachegrind-out-file=/dev/null \
		"$tmp/$1-$name.test" -test.run '^$' -test.bench "$3\$" -test.benchtime "${4}x" 2>&1 | awk '/I *refs:/{gsub(",","",$NF); print $NF}')
}
# count PKG BENCH N1 N2
count() {
	for v in old new; do
		a=$(ir $v "$1" "$2" "$3"); b=$(ir $v "$1" "$2" "$4")
		echo "$2 $v $(( (b - a) / ($4 - $3) )) instructions/op"
	done
}
echo "# GOGC=$gogc, old $old"
count recorder/proxy ProxySSERecorded 500 2500
count redact RedactSSE 50 250
count redact LinkTurns 200 1200
count sse ScanClassify 500 2500
