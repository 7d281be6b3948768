# Sourced by the scripts beside it, with $old set to a commit: builds the
# recording benchmarks' test binaries of that commit and of this tree into
# $tmp ($tmp/old-PKG.test and $tmp/new-PKG.test, PKG with / as _), the old
# sources unpacked under $tmp/old, and removes $tmp on exit.
root=$(git rev-parse --show-toplevel)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir "$tmp/old"
git -C "$root" archive "$old" | tar -x -C "$tmp/old"
for pkg in recorder/proxy redact sse; do
	name=$(echo "$pkg" | tr / _)
	(cd "$tmp/old" && CGO_ENABLED=0 go test -c -o "$tmp/old-$name.test" "./$pkg/")
	(cd "$root" && CGO_ENABLED=0 go test -c -o "$tmp/new-$name.test" "./$pkg/")
done
