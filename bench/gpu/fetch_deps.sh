#!/usr/bin/env bash
# Here, before a device run: the Debian packages the GPU machine lacks for a build (it has nvcc, CUPTI's
# headers, PyTorch, meson and ninja; it cannot fetch anything) into .deps/ (ignored by git), for
# bench/gpu/device_check.sh to unpack there.  Call the device tool with carry [".deps"].
set -euo pipefail
cd "$(dirname "$0")/../.."
grep -qx '/.deps/' .git/info/exclude 2>/dev/null || echo '/.deps/' >> .git/info/exclude
mkdir -p .deps /tmp/tbp-apt-amd64/partial
o='-oAPT::Architecture=amd64 -oAPT::Architectures=amd64 -oDir::State::Lists=/tmp/tbp-apt-amd64'
apt-get $o update -qq
(cd .deps && apt-get $o download libzstd-dev libzstd1)
ls -l .deps
