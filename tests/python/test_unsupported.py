"""An unsupported CPython version: no call paths, no spans, exactly one
NOTICE and one stderr line, and the program runs on unharmed."""
import subprocess
import sys

import tpyshim
from tpyshim import cdll, pydll, check

if len(sys.argv) > 1:  # the child
    pydll.tpy_override_minor(9)
    pydll.tpy_setup(1, 32, 1000)
    paths = [cdll.tpy_callpath() for _ in range(3)]

    def work():
        return sum(range(100000))
    work()
    print("paths %s spans %d notices %d result %d" % (paths, pydll.tpy_nspans(), pydll.tpy_nnotices(), work()))
    sys.exit(0)

out = subprocess.run([sys.executable, __file__, "child"], capture_output=True, text=True, timeout=60)
check("child exit code", out.returncode, 0)
check("child output", out.stdout.strip(), "paths [0, 0, 0] spans 0 notices 1 result 4999950000")
check("one stderr line", [line for line in out.stderr.splitlines() if "tbprof" in line],
      ["tbprof: no Python call paths: unsupported CPython version 3.9"])
tpyshim.finish()
