#!/bin/bash
# tbanalyze info/dump against the checked-in golden traces: expected output,
# the pinned error-line format and exit codes for bad input, usage errors.
set -u
T=${TBANALYZE:?TBANALYZE not set}
G=${TBP_SOURCE_ROOT:?}/tests/trace/golden
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }

cd "$G" || exit 1
# Expected output (relative names, so the path printed is stable).
for name in basic no-end truncated; do
	"$T" info "$name.zst" >"$tmp/out" 2>"$tmp/err"; rc=$?
	[ $rc = 0 ] || fail "info $name.zst: exit $rc"
	diff -u "$name.info" "$tmp/out" || fail "info $name.zst: output differs from $name.info"
	"$T" info --json "$name.zst" >"$tmp/out" 2>/dev/null
	diff -u "$name.info.json" "$tmp/out" || fail "info --json $name.zst differs"
done
# A version 1 trace (the per-record varint columns, before runs): still read,
# with the same records as the version 2 golden written from the same input.
"$T" info v1-basic.zst >"$tmp/out" 2>"$tmp/err"; rc=$?
[ $rc = 0 ] || fail "info v1-basic.zst: exit $rc"
diff -u v1-basic.info "$tmp/out" || fail "info v1-basic.zst: output differs from v1-basic.info"
"$T" dump v1-basic.zst >"$tmp/v1" 2>&1 || fail "dump v1-basic.zst: exit $?"
"$T" dump basic.zst >"$tmp/v2" 2>&1
cmp -s "$tmp/v1" "$tmp/v2" || fail "dump v1-basic.zst differs from dump basic.zst (version 2)"
# Truncated: one warning line naming file and offset, still exit 0.
"$T" info truncated.zst >/dev/null 2>"$tmp/err"
grep -qxE 'tbanalyze: truncated\.zst: warning: trace truncated at offset [0-9]+ \(last frame incomplete\)' "$tmp/err" ||
	fail "truncation warning: $(cat "$tmp/err")"
[ "$(wc -l <"$tmp/err")" = 1 ] || fail "truncation: more than one stderr line"
"$T" dump truncated.zst >/dev/null 2>"$tmp/err"; rc=$?
[ $rc = 0 ] || fail "dump truncated.zst: exit $rc"

# dump: one line per record (the count info reports), strings resolved.
records=$(sed -n 's/^records: *//p' basic.info)
lines=$("$T" dump basic.zst | wc -l)
[ "$lines" = "$records" ] || fail "dump basic.zst: $lines lines, info says $records records"
jlines=$("$T" dump --json basic.zst | grep -c '^{"kind":"[a-z_]*",.*}$')
[ "$jlines" = "$records" ] || fail "dump --json basic.zst: $jlines JSON lines, want $records"
"$T" dump basic.zst | grep -q '^[0-9]* thread:4242 launch .* api=cudaLaunchKernel .* name="ampere_sgemm_128x64_tn" ' ||
	fail "dump: launch line without resolved api/name"
n=$("$T" dump --kind launch,sync basic.zst | grep -vc ' launch \| sync ')
[ "$n" = 0 ] || fail "dump --kind: $n other records"

# Bad input: exactly one line "tbanalyze: FILE: offset N: REASON", exit 2.
: >"$tmp/empty.zst"
check_bad() { # file reason-regex
	for verb in info dump; do
		"$T" $verb "$1" >/dev/null 2>"$tmp/err"; rc=$?
		[ $rc = 2 ] || fail "$verb $1: exit $rc, want 2"
		[ "$(wc -l <"$tmp/err")" = 1 ] || fail "$verb $1: stderr not one line: $(cat "$tmp/err")"
		grep -qE "^tbanalyze: $(printf '%s' "$1" | sed 's/[.[\*^$/]/\\&/g'): offset [0-9]+: $2" "$tmp/err" ||
			fail "$verb $1: message: $(cat "$tmp/err")"
	done
}
check_bad "$tmp/empty.zst" "empty file"
check_bad "$tmp" "is a directory"
check_bad "$tmp/missing.zst" "no such file"
check_bad not-a-trace.zst "not a tbprof trace"
check_bad too-new.zst "trace written for a newer reader"
check_bad corrupt-frame.zst "(checksum mismatch|corrupt data)"
check_bad bad-header.zst "checksum mismatch"
# Cut before its first event (right after the header frame, whose size is at
# byte 4; at 1000 bytes, inside the frame after the definitions): nothing to
# report on is an error too, at the offset where the events should start.
header_end=$((8 + $(od -An -t u4 -j4 -N4 basic.zst)))
head -c "$header_end" basic.zst >"$tmp/header-only.zst"
check_bad "$tmp/header-only.zst" "no events: the file ends right after its header"
grep -q "offset $header_end: " "$tmp/err" || fail "header-only: offset is not $header_end: $(cat "$tmp/err")"
head -c 1000 basic.zst >"$tmp/cut1000.zst"
check_bad "$tmp/cut1000.zst" "no events: the file ends inside the frame after its definitions"

# Usage errors: exit 3.
for args in "info" "dump" "info --bogus basic.zst" "dump --kind nosuchkind basic.zst" "info basic.zst no-end.zst"; do
	"$T" $args >/dev/null 2>&1; rc=$?
	[ $rc = 3 ] || fail "tbanalyze $args: exit $rc, want 3"
done

# The zstd tool itself accepts a complete trace.
if command -v zstd >/dev/null; then
	zstd -q -t basic.zst || fail "zstd -t basic.zst"
fi

[ $fails = 0 ] && echo "check_cli: all passed"
exit $((fails > 0))
