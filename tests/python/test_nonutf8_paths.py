"""A library path the file system names in bytes that are not UTF-8 (here
the user site, from PYTHONUSERBASE) leaves the program as it is: libtbprof
asks the interpreter for its library directories (py_lib records) from a
pending call, and a path with lone surrogates made the answer's UTF-8
conversion fail with the exception left set.  Under `python -X dev` the
next call CPython made (site's own isfile, when the ask came during site's
import) then died: "SystemError ... returned a result with an exception
set", a fatal error at start-up, exit 1 (2 runs in 3 here); otherwise no
library directory was recorded at all.  Now: the same stdout and exit status as without the preload, and the other
library directories still recorded."""
import os
import subprocess
import sys
import tempfile

from traceview import Trace
from checks import check, finish  # noqa: E402

LIB = os.environ.get("TBPROF_LIB", "")
if not os.path.exists(LIB):
    print("skip: needs libtbprof.so")
    sys.exit(77)

SCRIPT = r"""
import site
def work(i):
    s = 0
    for k in range(20000):
        s += k * i
    return s
t = 0
for i in range(100):
    t += work(i)
print(ascii(site.getusersitepackages()), t)
"""

tmp = tempfile.mkdtemp()
script = os.path.join(tmp, "s.py")
with open(script, "w") as f:
    f.write(SCRIPT)
userbase = os.path.join(tmp.encode(), b"user-\xff\xfe")


def run(trace_path=None):
    env = dict(os.environ)
    env.pop("LD_PRELOAD", None)
    env.pop("PYTHONPATH", None)  # (the suite's own; the program is a plain script)
    env = {k.encode(): v.encode() for k, v in env.items()}
    env[b"PYTHONUSERBASE"] = userbase
    if trace_path:
        env.update({b"LD_PRELOAD": LIB.encode(), b"TBPROF_OUT": trace_path.encode(), b"TBPROF_TRACE_ALL": b"1"})
    out = subprocess.run([sys.executable, "-X", "dev", script], env=env, capture_output=True, timeout=120)
    return out.returncode, out.stdout.decode(errors="replace")


plain = run()
check("plain run exits 0", plain[0], 0)
check("the user site has the undecodable bytes", "\\udcff\\udcfe" in plain[1], True)
trace_path = os.path.join(tmp, "t.zst")
traced = run(trace_path)
check("same exit status and stdout under the preload", traced, plain)
if traced[0] == 0:
    roles = sorted({r["role"] for r in Trace(trace_path).of_kind("py_lib")})
    check("the standard library and site-packages recorded (py_lib roles 1 and 5)",
          1 in roles and 5 in roles, True)
finish()
