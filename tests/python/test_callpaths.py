"""Each call into the test library is attributed to the exact file:line:function
of the Python code that made it, with the GIL released (ctypes.CDLL) or held
(ctypes.PyDLL), from threads, recursion, generators and coroutines.  Expected
lines come from '# site:' comments in this file, not from constants."""
import asyncio
import sys
import threading

import tpyshim
from tpyshim import cdll, pydll, describe, check

FILE = __file__
SITE = tpyshim.site_lines(FILE)
pydll.tpy_setup(1, 32, 0)  # spans off: only call paths here


def qual(name):
    """co_qualname on 3.11+; 3.10 code objects only have co_name."""
    return name if sys.version_info >= (3, 11) else name.rsplit(".", 1)[-1]


def frames(path, n):
    """Innermost n frames of a path, as (line, function) with this file checked."""
    out = []
    for file, line, func in describe(path)[:n]:
        out.append((line, func) if file == FILE else (file, line, func))
    return out


def leaf(lib):
    return lib.tpy_callpath()  # site:leaf


def caller(lib):
    return leaf(lib)  # site:caller


for name, lib in (("CDLL (GIL released)", cdll), ("PyDLL (GIL held)", pydll)):
    p = caller(lib)  # site:top
    check(name + ": leaf, caller, module", frames(p, 3),
          [(SITE["leaf"], "leaf"), (SITE["caller"], "caller"), (SITE["top"], "<module>")])
    check(name + ": path ends at the module", len(describe(p)), 3)


class Model:
    def forward(self):
        def inner():
            return cdll.tpy_callpath()  # site:inner
        return inner()  # site:forward


p = Model().forward()
check("qualified names", frames(p, 2),
      [(SITE["inner"], qual("Model.forward.<locals>.inner")), (SITE["forward"], qual("Model.forward"))])

# The same path again gives the same id and costs no new definitions.
def many():
    return {caller(cdll) for _ in range(1000)}  # site:many


rounds = []
for _ in range(3):
    rounds.append((many(), pydll.tpy_ndefs()))  # site:rounds
check("repeated path: one id", [len(ids) for ids, _ in rounds], [1, 1, 1])
check("repeated path: same id each round", rounds[0][0] == rounds[1][0] == rounds[2][0], True)
check("repeated path: no new defs after the first round", rounds[2][1], rounds[0][1])
comprehension = [(SITE["many"], qual("many.<locals>.<setcomp>"))] if sys.version_info < (3, 12) else []
check("repeated path: line of the comprehension", frames(next(iter(rounds[0][0])), 3 + len(comprehension)),
      [(SITE["leaf"], "leaf"), (SITE["caller"], "caller")] + comprehension + [(SITE["many"], "many")])


def recurse(n):
    if n == 0:
        return cdll.tpy_callpath()  # site:rec_leaf
    return recurse(n - 1)  # site:rec_step


p = recurse(5)  # site:rec_top
check("recursion", frames(p, 7),
      [(SITE["rec_leaf"], "recurse")] + [(SITE["rec_step"], "recurse")] * 5
      + [(SITE["rec_top"], "<module>")])

pydll.tpy_set_depth(3)
p = recurse(10)  # site:rec_deep
check("depth bound keeps the innermost frames", frames(p, 10),
      [(SITE["rec_leaf"], "recurse"), (SITE["rec_step"], "recurse"), (SITE["rec_step"], "recurse")])
pydll.tpy_set_depth(32)


def generator():
    yield cdll.tpy_callpath()  # site:gen1
    yield pydll.tpy_callpath()  # site:gen2


def consume():
    g = generator()
    a = next(g)  # site:consume1
    b = next(g)  # site:consume2
    return a, b


a, b = consume()
check("generator, first resume", frames(a, 2), [(SITE["gen1"], "generator"), (SITE["consume1"], "consume")])
check("generator, second resume", frames(b, 2), [(SITE["gen2"], "generator"), (SITE["consume2"], "consume")])


async def coroutine():
    await asyncio.sleep(0)
    return cdll.tpy_callpath()  # site:coro


async def main_coroutine():
    return await coroutine()  # site:await


p = asyncio.run(main_coroutine())
check("coroutine after a suspension", frames(p, 2),
      [(SITE["coro"], "coroutine"), (SITE["await"], "main_coroutine")])

# Python called back from C (libc qsort -> ctypes callback): the path goes
# through the C frames to the Python line that called qsort.
import ctypes  # noqa: E402
libc = ctypes.CDLL(None)
CMP = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.POINTER(ctypes.c_int), ctypes.POINTER(ctypes.c_int))
seen = []


def compare(a, b):
    if not seen:
        seen.append(cdll.tpy_callpath())  # site:callback
    return a[0] - b[0]


def sort_in_c():
    values = (ctypes.c_int * 5)(5, 3, 4, 1, 2)
    libc.qsort(values, 5, ctypes.sizeof(ctypes.c_int), CMP(compare))  # site:qsort
    return list(values)


check("qsort result", sort_in_c(), [1, 2, 3, 4, 5])
check("callback from C: callback, then the qsort line", frames(seen[0], 2),
      [(SITE["callback"], "compare"), (SITE["qsort"], "sort_in_c")])

results = {}


def worker(index):
    results[index] = (recurse(index), cdll.tpy_callpath())  # site:worker


threads = [threading.Thread(target=worker, args=(i,)) for i in range(4)]
for t in threads:
    t.start()
for t in threads:
    t.join()
for i in range(4):
    rec, direct = results[i]
    check("thread %d: recursion" % i, frames(rec, i + 2),
          [(SITE["rec_leaf"], "recurse")] + [(SITE["rec_step"], "recurse")] * i
          + [(SITE["worker"], "worker")])
    check("thread %d: direct" % i, frames(direct, 1), [(SITE["worker"], "worker")])
    check("thread %d: below worker is threading.py" % i,
          describe(direct)[1][0].endswith("threading.py"), True)

# Many threads at once, each with its own distinct line, many times: the
# lock-free tables must give every thread its own correct path.
barrier = threading.Barrier(8)
mismatch = []


def hammer(index):
    barrier.wait()
    for _ in range(300):
        p = recurse(index % 4)
        got = frames(p, 1)
        if got != [(SITE["rec_leaf"], "recurse")] or len(describe(p)) < index % 4 + 2:
            mismatch.append(got)


threads = [threading.Thread(target=hammer, args=(i,)) for i in range(8)]
for t in threads:
    t.start()
for t in threads:
    t.join()
check("8 threads x 300 concurrent paths", mismatch[:3], [])

# A native thread has no Python frames and nothing to borrow yet.
check("native thread, nobody waiting", cdll.tpy_callpath_in_thread(), 0)

# Disabled: no paths at all.
pydll.tpy_setup(0, 32, 0)
check("TBPROF_PYTHON=0", cdll.tpy_callpath(), 0)
tpyshim.finish()
