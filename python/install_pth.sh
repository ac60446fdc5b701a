#!/bin/sh
# meson install step: install_pth.py run by the python3 on PATH (meson would run a .py install
# script with the Python that runs meson itself, often the system's, not the one users run).
command -v python3 >/dev/null 2>&1 || { echo "tbprof: no python3 on PATH: no tbprof.pth written"; exit 0; }
exec python3 "$(dirname "$0")/install_pth.py" "$@"
