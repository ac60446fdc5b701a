#!/usr/bin/env python3
"""A planted workload driven through ctypes on simgpu's libcudart.

Each planted pattern sits on a line marked `# PLANT: <finding>`; the test
(check_real.py) finds those lines by scanning this file and expects tbanalyze
to report exactly these findings there.  Kernel durations come from the
environment the test sets (SIMGPU_KERNEL_NS: "big" 300 us, "tiny" 2 us).

Usage: planted_workload.py STEPS
Env PLANTED_PAUSE=STEP:AFTER:MS: in step STEP (from 0) the host sleeps MS ms after the burst loop's
AFTER-th launch, as a descheduled thread would (check_real.py: a burst cut by a host pause).
"""
import ctypes
import os
import sys
import time


class Dim3(ctypes.Structure):
    _fields_ = [("x", ctypes.c_uint), ("y", ctypes.c_uint), ("z", ctypes.c_uint)]


H2D = 1
rt = ctypes.CDLL("libcudart.so.13")


def check(name, err):
    if err != 0:
        print(f"FAIL {name}: {err}")
        sys.exit(1)


def register(names):
    rt.__cudaRegisterFatBinary.restype = ctypes.c_void_p
    rt.__cudaRegisterFatBinary.argtypes = [ctypes.c_void_p]
    rt.__cudaRegisterFunction.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_char_p, ctypes.c_char_p,
                                          ctypes.c_int] + [ctypes.c_void_p] * 5
    rt.__cudaRegisterFatBinaryEnd.argtypes = [ctypes.c_void_p]
    fatbin = ctypes.create_string_buffer(64)
    handle = rt.__cudaRegisterFatBinary(ctypes.addressof(fatbin))
    stubs = {"fatbin": fatbin}
    for name in names:
        stub = ctypes.create_string_buffer(16)
        rt.__cudaRegisterFunction(handle, ctypes.addressof(stub), name, name, -1, None, None, None, None, None)
        stubs[name] = stub
    rt.__cudaRegisterFatBinaryEnd(handle)
    return stubs


rt.cudaLaunchKernel.argtypes = [ctypes.c_void_p, Dim3, Dim3, ctypes.POINTER(ctypes.c_void_p), ctypes.c_size_t,
                                ctypes.c_void_p]
rt.cudaMalloc.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_size_t]
rt.cudaFree.argtypes = [ctypes.c_void_p]
rt.cudaMemcpyAsync.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_void_p]
rt.cudaStreamSynchronize.argtypes = [ctypes.c_void_p]

STUBS = register([b"_Z10big_matmulPfi", b"_Z9tiny_zeroPfi"])
BIG, TINY = STUBS[b"_Z10big_matmulPfi"], STUBS[b"_Z9tiny_zeroPfi"]
N_ARG = ctypes.c_int(16)
BUF = ctypes.c_void_p()
check("cudaMalloc", rt.cudaMalloc(ctypes.byref(BUF), 1 << 20))
ARGS = (ctypes.c_void_p * 2)(ctypes.addressof(BUF), ctypes.addressof(N_ARG))
ONE = Dim3(1, 1, 1)


def launch(stub):
    check("cudaLaunchKernel", rt.cudaLaunchKernel(ctypes.addressof(stub), ONE, ONE, ARGS, 0, None))


def forward():
    for _ in range(4):
        launch(BIG)


def preprocess():
    # Host-side Python work while the GPU has nothing queued.
    end = time.perf_counter() + 0.025
    x = 0
    while time.perf_counter() < end:
        x += 1
    return x


PAUSE = [int(v) for v in os.environ["PLANTED_PAUSE"].split(":")] if os.environ.get("PLANTED_PAUSE") else None


def zero_grad(step_no):
    for i in range(20):
        launch(TINY)  # PLANT: kernel_burst
        if PAUSE and step_no == PAUSE[0] and i + 1 == PAUSE[1]:
            time.sleep(PAUSE[2] / 1000)


def step(step_no, scale):
    forward()
    s = ctypes.c_float(scale)
    check("cudaMemcpyAsync", rt.cudaMemcpyAsync(BUF, ctypes.byref(s), 4, H2D, None))  # PLANT: scalar_copy
    check("cudaStreamSynchronize", rt.cudaStreamSynchronize(None))  # PLANT: sync_hotspot
    preprocess()  # PLANT: idle_gap python
    zero_grad(step_no)
    forward()
    check("cudaStreamSynchronize", rt.cudaStreamSynchronize(None))  # PLANT: sync_hotspot


def main():
    steps = int(sys.argv[1]) if len(sys.argv) > 1 else 6
    for i in range(steps):
        step(i, 0.5 * i)
    check("cudaFree", rt.cudaFree(BUF))
    print(f"planted workload done: {steps} steps")
    return 0


if __name__ == "__main__":
    sys.exit(main())
