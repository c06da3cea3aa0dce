#!/usr/bin/env bash
# binsize.sh: what the aidgen binary links, and how big it is. Builds
# ./cmd/aidgen of a checkout and prints the file's size, its sections, the
# modules it links (go version -m) and the modules and packages whose
# symbols (go tool nm -size) weigh most. Rerun it before and after a change
# that adds or drops a dependency of the CLI (issue 36 took aidgen from 141
# MB to 101 MB; cmd/aidgen's TestAidgenLinksOnlyTheSDKServicesItCalls
# keeps the cut).
#
#   scripts/binsize.sh                 # this checkout
#   scripts/binsize.sh /work/main 40   # another checkout, the top 40
set -euo pipefail

here=$(cd "$(dirname "$0")/.." && pwd)
checkout=$(cd "${1:-$here}" && pwd)
top=${2:-25}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

(cd "$checkout" && go build -o "$out/aidgen" ./cmd/aidgen)
echo "binary: $(stat -c %s "$out/aidgen") bytes"
echo
echo "== sections (bytes)"
readelf -SW "$out/aidgen" | sed 's/^ *\[ *[0-9]*\] *//' | while read -r name type addr off size rest; do
	if [[ $name == .* && $size =~ ^[0-9a-f]+$ ]]; then
		printf '%12d %s %s\n' $((16#$size)) "$name" "$type"
	fi
done | sort -rn | sed -n 1,12p
# Where the bss begins: what lies beyond takes no room in the file
# (crypto/internal/fips140/drbg's 32 MB buffer is there).
bss=$(readelf -SW "$out/aidgen" | awk '$2 == ".bss" {print $4}')
echo
echo "== modules linked: $(go version -m "$out/aidgen" | awk '$1 == "dep"' | wc -l)"
go tool nm -size "$out/aidgen" >"$out/nm.txt"
# Sum symbol sizes by package (the import path before the first dot after
# its last slash) and by module (the first three path elements of a
# dotted host, else the first).
awk -v top="$top" -v bss="$bss" '
function pad(a) { a = sprintf("%16s", a); gsub(/ /, "0", a); return tolower(a) }
NF >= 4 && pad($1) < pad(bss) {
	name = $4
	for (i = 5; i <= NF; i++) name = name " " $i
	pkg = name
	if (match(pkg, /^([^\/]*\/)*[^.\/]*/)) pkg = substr(pkg, 1, RLENGTH)
	n = split(pkg, seg, "/")
	mod = seg[1]
	if (seg[1] ~ /\./ && n >= 3) mod = seg[1] "/" seg[2] "/" seg[3]
	bypkg[pkg] += $2; bymod[mod] += $2; total += $2
}
END {
	printf "symbols in the file: %d bytes\n", total
	for (m in bymod) printf "mod %12d %s\n", bymod[m], m | "sort -k2 -rn | head -" top
	close("sort -k2 -rn | head -" top)
	for (p in bypkg) printf "pkg %12d %s\n", bypkg[p], p | "sort -k2 -rn | head -" top
}' "$out/nm.txt"
