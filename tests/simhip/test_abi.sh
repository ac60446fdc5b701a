#!/bin/bash
# simhip presents the real library's ABI: soname libamdhip64.so.5, and each
# symbol it defines carries the same version as in Debian's libamdhip64.
set -eu
soname=$(readelf -d "$SIMHIP_LIB" | sed -n 's/.*Library soname: \[\(.*\)\]/\1/p')
[ "$soname" = libamdhip64.so.5 ] || { echo "soname is '$soname'" >&2; exit 1; }
ours=$(nm -D --defined-only "$SIMHIP_LIB" | awk '$3 ~ /@@hip_/ {print $3}' | sort)
[ -n "$ours" ] || { echo "no versioned hip symbols exported" >&2; exit 1; }
# Nothing but HIP API symbols leaks out.
extra=$(nm -D --defined-only "$SIMHIP_LIB" | awk '$2 ~ /[TDB]/ && $3 !~ /^(__)?hip/ && $3 !~ /^hip_/' )
[ -z "$extra" ] || { echo "unexpected exports: $extra" >&2; exit 1; }
real=/usr/lib/x86_64-linux-gnu/libamdhip64.so.5
if [ -e "$real" ]; then
	theirs=$(nm -D --defined-only "$real" | awk '{print $3}' | sort)
	missing=$(comm -23 <(echo "$ours") <(echo "$theirs"))
	[ -z "$missing" ] || { echo "not in the real library with this version: $missing" >&2; exit 1; }
fi
echo "simhip ABI: $(echo "$ours" | wc -l) versioned symbols"
