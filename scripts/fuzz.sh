#!/bin/sh
# Runs every libFuzzer target in BUILD/fuzz for SECONDS each, starting from its seed corpus
# (fuzz/corpus/<target>/) and a scratch copy, so the committed corpus never changes here.
# Exits non-zero on the first crash, leak or timeout, leaving the reproducer in BUILD/fuzz/.
set -eu
build=$1
seconds=$2
dir="$build/fuzz"
[ -d "$dir" ] || { echo "gpuctl: fuzz: no fuzz targets in '$dir'" >&2; exit 1; }
n=0
for t in "$dir"/fuzz-*; do
	[ -x "$t" ] || continue
	name=$(basename "$t")
	work="$dir/corpus-$name"
	mkdir -p "$work"
	seeds=""
	[ -d "fuzz/corpus/$name" ] && seeds="$(pwd)/fuzz/corpus/$name"
	echo "fuzz: $name for ${seconds}s"
	(cd "$dir" && "./$name" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 \
		-print_final_stats=0 "$(basename "$work")" ${seeds:+"$seeds"} \
		>"$name.log" 2>&1) || { tail -n 40 "$dir/$name.log" >&2; exit 1; }
	n=$((n + 1))
done
[ "$n" -gt 0 ] || { echo "gpuctl: fuzz: no fuzz targets built in '$dir'" >&2; exit 1; }
echo "fuzz: $n targets ran ${seconds}s each without a crash"
