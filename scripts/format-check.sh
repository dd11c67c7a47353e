#!/bin/sh
# Fails when any tracked or new C file differs from what clang-format (the repo's .clang-format)
# would write, and names each such file.
set -eu
bad=0
files=$(git ls-files --cached --others --exclude-standard '*.c' '*.h')
for f in $files; do
	[ -f "$f" ] || continue
	if ! clang-format --dry-run --Werror "$f" >/dev/null 2>&1; then
		echo "gpuctl: format: '$f' is not clang-formatted (run: make format)" >&2
		bad=1
	fi
done
[ "$bad" -eq 0 ] && echo "format-check: $(echo "$files" | wc -w) files clang-formatted"
exit "$bad"
