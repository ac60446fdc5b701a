"""Child of test_preload.py: launches and copies on simgpu's libcudart through
ctypes.CDLL (GIL released) and ctypes.PyDLL (GIL held), from plain calls,
recursion, generators, a coroutine and threads.  Writes what it did (native
thread id, API, line, function) as JSON lines to argv[1]; the lines come from
'# site:' comments in this file."""
import asyncio
import ctypes
import json
import os
import sys
import tempfile
import threading

import tpyshim_sites

SITE = tpyshim_sites.site_lines(__file__)


class Dim3(ctypes.Structure):
    _fields_ = [("x", ctypes.c_uint), ("y", ctypes.c_uint), ("z", ctypes.c_uint)]


def load(kind):
    rt = kind("libcudart.so.13")
    rt.__cudaRegisterFatBinary.restype = ctypes.c_void_p
    rt.__cudaRegisterFatBinary.argtypes = [ctypes.c_void_p]
    rt.__cudaRegisterFunction.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_char_p, ctypes.c_char_p,
                                          ctypes.c_int] + [ctypes.c_void_p] * 5
    rt.__cudaRegisterFatBinaryEnd.argtypes = [ctypes.c_void_p]
    rt.cudaLaunchKernel.argtypes = [ctypes.c_void_p, Dim3, Dim3, ctypes.POINTER(ctypes.c_void_p),
                                    ctypes.c_size_t, ctypes.c_void_p]
    rt.cudaMalloc.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_size_t]
    rt.cudaMemcpy.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    rt.cudaMemsetAsync.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_size_t, ctypes.c_void_p]
    return rt


released = load(ctypes.CDLL)
held = load(ctypes.PyDLL)
fatbin = ctypes.create_string_buffer(64)
handle = released.__cudaRegisterFatBinary(ctypes.addressof(fatbin))
stub = ctypes.create_string_buffer(16)
released.__cudaRegisterFunction(handle, ctypes.addressof(stub), b"_Z4stepPfi", b"_Z4stepPfi", -1,
                                None, None, None, None, None)
released.__cudaRegisterFatBinaryEnd(handle)
device = ctypes.c_void_p()
assert released.cudaMalloc(ctypes.byref(device), 4096) == 0
host = ctypes.create_string_buffer(4096)
args = (ctypes.c_void_p * 2)(ctypes.cast(ctypes.byref(device), ctypes.c_void_p), None)

done = []
lock = threading.Lock()


def note(api, site, function):
    with lock:
        done.append({"tid": threading.get_native_id(), "api": api, "line": SITE[site], "function": function})


def launch(rt):
    err = rt.cudaLaunchKernel(stub, Dim3(1, 1, 1), Dim3(32, 1, 1), args, 0, None)  # site:launch
    assert err == 0, err
    note("cudaLaunchKernel", "launch", "launch")


def copy_in(rt):
    assert rt.cudaMemcpy(device, host, 256, 1) == 0  # site:copy
    note("cudaMemcpy", "copy", "copy_in")


def step(rt):
    copy_in(rt)
    launch(rt)
    assert rt.cudaMemsetAsync(device, 0, 64, None) == 0  # site:memset
    note("cudaMemsetAsync", "memset", "step")


def recurse(rt, n):
    if n == 0:
        assert rt.cudaMemcpy(host, device, 128, 2) == 0  # site:rec
        note("cudaMemcpy", "rec", "recurse")
        return
    recurse(rt, n - 1)


def generator(rt):
    for _ in range(2):
        launch(rt)
        yield
        assert rt.cudaMemcpy(device, host, 16, 1) == 0  # site:gen
        note("cudaMemcpy", "gen", "generator")


async def coroutine(rt):
    await asyncio.sleep(0)
    assert rt.cudaMemcpy(device, host, 32, 1) == 0  # site:coro
    note("cudaMemcpy", "coro", "coroutine")


class Trainer:
    def run(self, rt):
        for _ in range(3):
            step(rt)
        recurse(rt, 6)
        for _ in generator(rt):
            pass
        asyncio.run(coroutine(rt))
        assert rt.cudaMemcpy(device, host, 8, 1) == 0  # site:method
        note("cudaMemcpy", "method", "Trainer.run" if sys.version_info >= (3, 11) else "run")


for rt in (released, held):
    Trainer().run(rt)
threads = [threading.Thread(target=Trainer().run, args=(released if i % 2 else held,)) for i in range(4)]
for t in threads:
    t.start()
for t in threads:
    t.join()
# A native thread (no Python frames) syncing while the main thread is inside
# torch.autograd.backward (a stand-in module with the real one's file name):
# its record borrows the path of the line that called backward().
root = tempfile.mkdtemp()
os.makedirs(os.path.join(root, "torch", "autograd"))
open(os.path.join(root, "torch", "__init__.py"), "w").close()
with open(os.path.join(root, "torch", "autograd", "__init__.py"), "w") as f:
    f.write("def backward(work):\n    return work()\n")
sys.path.insert(0, root)
import torch.autograd  # noqa: E402  (the stand-in)

libc = ctypes.CDLL(None)
libc.pthread_create.argtypes = [ctypes.POINTER(ctypes.c_ulong), ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p]
libc.pthread_join.argtypes = [ctypes.c_ulong, ctypes.c_void_p]


def native_thread_sync():
    # cudaDeviceSynchronize as the thread's start routine: it takes no
    # argument and its int result is ignored by pthread_join(NULL).
    thread = ctypes.c_ulong()
    start = ctypes.cast(released.cudaDeviceSynchronize, ctypes.c_void_p)
    assert libc.pthread_create(ctypes.byref(thread), None, start, None) == 0
    assert libc.pthread_join(thread.value, None) == 0


def native_backward():
    torch.autograd.backward(native_thread_sync)  # site:backward


native_backward()
released.cudaDeviceSynchronize()
with open(sys.argv[1], "w") as f:
    for row in done:
        f.write(json.dumps(row) + "\n")
