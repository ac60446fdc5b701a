#!/usr/bin/env bash
# The CUPTI conformance table on a machine with an NVIDIA GPU, and its difference from the H100's
# (the graph lines included; the preload lines from the program run again under libtbprof):
#   tests/cupti/conformance/run-real.sh [BUILD_DIR] [EXPECTED_FILE]
# Uses the CUDA 13 libraries of pip torch's wheel (nvidia/cu13/lib: libcudart, libcupti, libcublas)
# and the machine's driver.  Exit 0: no difference; 1: differences (printed); 77: no GPU.
set -euo pipefail
src=$(cd "$(dirname "$0")/../../.." && pwd)
build=${1:-$src/build}
expect=${2:-$src/tests/cupti/conformance/h100.txt}
ninja -C "$build" tests/cupti/cupti_conformance libtbprof/libtbprof.so analyze/tbanalyze >/dev/null
libdir=$(python3 -c '
import glob, os, site
roots = site.getsitepackages() + [site.getusersitepackages()]
found = [p for r in roots for p in sorted(glob.glob(os.path.join(r, "nvidia", "**", "libcudart.so.13"), recursive=True))]
print(os.path.dirname(found[0]) if found else "")')
if [ -z "$libdir" ]; then
	echo "run-real.sh: no libcudart.so.13 in a pip nvidia wheel; using the dynamic linker's path" >&2
fi
echo "run-real.sh: libraries from ${libdir:-the dynamic linker search path}" >&2
LD_LIBRARY_PATH="${libdir:+$libdir:}${LD_LIBRARY_PATH:-}" TBPROF_CUPTI_PATH= \
	"$build/tests/cupti/cupti_conformance" --expect "$expect" \
	--preload "$build/libtbprof/libtbprof.so" --tbanalyze "$build/analyze/tbanalyze"
