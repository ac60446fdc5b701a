#!/bin/bash
# Regenerates the golden traces, their expected `tbanalyze info` output and
# the fuzz seed corpus after an intended format change (bump
# TBP_FORMAT_VERSION first).  Usage: tests/trace/regen-golden.sh BUILD_DIR
set -eu
build=$(cd "${1:?usage: regen-golden.sh BUILD_DIR}" && pwd)
here=$(cd "$(dirname "$0")" && pwd)
ninja -C "$build" tests/trace/gen_golden analyze/tbanalyze
"$build/tests/trace/gen_golden" write "$here/golden"
cd "$here/golden"
for name in basic no-end truncated; do
	"$build/analyze/tbanalyze" info "$name.zst" >"$name.info" 2>/dev/null
	"$build/analyze/tbanalyze" info --json "$name.zst" >"$name.info.json" 2>/dev/null
done
# Seed corpus: regenerated; inputs found by fuzzing (fz-*) are kept.
find "$here/corpus/reader" "$here/corpus/header" -type f ! -name 'fz-*' -delete
"$build/tests/trace/gen_golden" corpus "$here/corpus"
echo "regenerated; review with git diff and commit"
