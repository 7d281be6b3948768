#!/bin/sh
# BenchmarkRedactChat of this tree next to the same benchmark at an older
# commit (default: the last one with the redact/1 block chain), alternating,
# as MB per CPU-second of each benchmark process (user+sys, one core).
#   bench/redact/old-vs-new.sh [OLD_REF] [ROUNDS]
set -eu
old=${1:-7c4c14c}
rounds=${2:-5}
n=30000
root=$(git rev-parse --show-toplevel)
tmp=$(mktemp -d)
trap 'git -C "$root" worktree remove --force "$tmp/old" >/dev/null 2>&1 || true; rm -rf "$tmp"' EXIT
git -C "$root" worktree add --detach "$tmp/old" "$old" >/dev/null 2>&1
(cd "$tmp/old" && CGO_ENABLED=0 go test -c -o "$tmp/old.test" ./redact/)
(cd "$root" && CGO_ENABLED=0 go test -c -o "$tmp/new.test" ./redact/)
bytes=3685 # len(benchBody): the same testdata at both commits
for i in $(seq "$rounds"); do
	for v in old new; do
		dir="$root/redact"; [ "$v" = old ] && dir="$tmp/old/redact"
		(cd "$dir" && /usr/bin/time -f "%U %S" "$tmp/$v.test" -test.run XXX -test.bench 'RedactChat$' \
			-test.benchtime ${n}x -test.cpu 1 >/dev/null) 2>&1 | awk -v v=$v -v n=$n -v b=$bytes \
			'{printf "%s %.1f MB/cpu-s\n", v, n*b/($1+$2)/1e6}'
	done
done
