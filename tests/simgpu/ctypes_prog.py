#!/usr/bin/env python3
"""A CUDA workload driven from Python through ctypes, the way a framework's
runtime calls look from the outside: allocations, pageable and pinned copies,
memsets, kernel launches through cudaLaunchKernel on two streams, syncs, frees.

Kernels are registered the way nvcc's generated code does it
(__cudaRegisterFatBinary + __cudaRegisterFunction with a host stub address);
the stub here is a ctypes buffer, so this program needs simgpu's runtime
(on a real runtime the registration of a fake fat binary would fail).

With SIMGPU_KERNELS_LIB=path/libsimgpu_kernels.so (built by nvcc from
progs/kernels_lib.cu), each iteration also launches two kernels through that
library, whose kernels nvcc's code registers when ctypes loads it (the way
PyTorch's CUDA library is loaded).  The output is the same either way.

Usage: ctypes_prog.py [iterations]      (LD_LIBRARY_PATH must reach simgpu)
Prints deterministic lines and exits 0; exits 1 on the first failing call.
"""
import os
import ctypes
import sys


class Dim3(ctypes.Structure):
    _fields_ = [("x", ctypes.c_uint), ("y", ctypes.c_uint), ("z", ctypes.c_uint)]


H2D, D2H, D2D = 1, 2, 3


def main():
    iterations = int(sys.argv[1]) if len(sys.argv) > 1 else 5
    rt = ctypes.CDLL("libcudart.so.13")
    rt.cudaGetErrorName.restype = ctypes.c_char_p
    rt.__cudaRegisterFatBinary.restype = ctypes.c_void_p
    rt.__cudaRegisterFatBinary.argtypes = [ctypes.c_void_p]
    rt.__cudaRegisterFunction.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_char_p, ctypes.c_char_p,
                                          ctypes.c_int] + [ctypes.c_void_p] * 5
    rt.__cudaRegisterFatBinaryEnd.argtypes = [ctypes.c_void_p]
    rt.cudaLaunchKernel.argtypes = [ctypes.c_void_p, Dim3, Dim3, ctypes.POINTER(ctypes.c_void_p),
                                    ctypes.c_size_t, ctypes.c_void_p]
    rt.cudaMalloc.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_size_t]
    rt.cudaMallocHost.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_size_t]
    rt.cudaFree.argtypes = [ctypes.c_void_p]
    rt.cudaFreeHost.argtypes = [ctypes.c_void_p]
    rt.cudaMemcpy.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    rt.cudaMemcpyAsync.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_void_p]
    rt.cudaMemset.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_size_t]
    rt.cudaMemsetAsync.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_size_t, ctypes.c_void_p]
    rt.cudaStreamCreate.argtypes = [ctypes.POINTER(ctypes.c_void_p)]
    rt.cudaStreamSynchronize.argtypes = [ctypes.c_void_p]
    rt.cudaStreamDestroy.argtypes = [ctypes.c_void_p]

    def check(name, err):
        if err != 0:
            print(f"FAIL {name}: {rt.cudaGetErrorName(err).decode()}")
            sys.exit(1)

    # Register two "kernels": the stubs only need stable, distinct addresses.
    fatbin = ctypes.create_string_buffer(64)
    handle = rt.__cudaRegisterFatBinary(ctypes.addressof(fatbin))
    stubs = {}
    for name in (b"_Z10fill_onesPfi", b"_Z4axpyfPKfPfi"):
        stub = ctypes.create_string_buffer(16)
        rt.__cudaRegisterFunction(handle, ctypes.addressof(stub), name, name, -1, None, None, None, None, None)
        stubs[name] = stub
    rt.__cudaRegisterFatBinaryEnd(handle)

    count = ctypes.c_int(0)
    check("cudaGetDeviceCount", rt.cudaGetDeviceCount(ctypes.byref(count)))
    print(f"devices: {count.value}")

    n = 4096
    nbytes = n * 4
    dx, dy = ctypes.c_void_p(), ctypes.c_void_p()
    check("cudaMalloc", rt.cudaMalloc(ctypes.byref(dx), nbytes))
    check("cudaMalloc", rt.cudaMalloc(ctypes.byref(dy), nbytes))
    pinned = ctypes.c_void_p()
    check("cudaMallocHost", rt.cudaMallocHost(ctypes.byref(pinned), nbytes))

    host = (ctypes.c_float * n)(*[float(i % 10) for i in range(n)])
    check("cudaMemcpy", rt.cudaMemcpy(dx, host, nbytes, H2D))
    check("cudaMemset", rt.cudaMemset(dy, 0, nbytes))

    stream = ctypes.c_void_p()
    check("cudaStreamCreate", rt.cudaStreamCreate(ctypes.byref(stream)))

    n_arg = ctypes.c_int(n)
    alpha = ctypes.c_float(2.0)
    args_fill = (ctypes.c_void_p * 2)(ctypes.addressof(dy), ctypes.addressof(n_arg))
    args_axpy = (ctypes.c_void_p * 4)(ctypes.addressof(alpha), ctypes.addressof(dx), ctypes.addressof(dy),
                                      ctypes.addressof(n_arg))
    grid, block = Dim3(n // 256, 1, 1), Dim3(256, 1, 1)
    scalar = ctypes.c_float(0.5)
    kernels_lib = None
    if os.environ.get("SIMGPU_KERNELS_LIB"):
        kernels_lib = ctypes.CDLL(os.environ["SIMGPU_KERNELS_LIB"])
        for fn in (kernels_lib.simgpu_kernels_scale, kernels_lib.simgpu_kernels_add):
            fn.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_float, ctypes.c_void_p]
    for _ in range(iterations):
        if kernels_lib:
            check("simgpu_kernels_scale", kernels_lib.simgpu_kernels_scale(dy, n, 1.0, stream))
            check("simgpu_kernels_add", kernels_lib.simgpu_kernels_add(dy, n, 0.0, None))
        check("cudaLaunchKernel", rt.cudaLaunchKernel(ctypes.addressof(stubs[b"_Z10fill_onesPfi"]), grid, block,
                                                      args_fill, 0, stream))
        check("cudaLaunchKernel", rt.cudaLaunchKernel(ctypes.addressof(stubs[b"_Z4axpyfPKfPfi"]), grid, block,
                                                      args_axpy, 0, None))
        # A scalar from pageable memory: synchronous even though it is Async.
        check("cudaMemcpyAsync", rt.cudaMemcpyAsync(dy, ctypes.byref(scalar), 4, H2D, stream))
    check("cudaMemsetAsync", rt.cudaMemsetAsync(dx, 0, 16, stream))
    check("cudaMemcpyAsync", rt.cudaMemcpyAsync(pinned, dx, nbytes, D2H, stream))
    check("cudaStreamSynchronize", rt.cudaStreamSynchronize(stream))
    check("cudaDeviceSynchronize", rt.cudaDeviceSynchronize())

    back = ctypes.cast(pinned, ctypes.POINTER(ctypes.c_float))
    print(f"first values: {back[0]:.1f} {back[3]:.1f} {back[4]:.1f} {back[5]:.1f}")
    print(f"sum: {sum(back[i] for i in range(n)):.1f}")
    y0 = ctypes.c_float()
    check("cudaMemcpy", rt.cudaMemcpy(ctypes.byref(y0), dy, 4, D2H))
    print(f"scalar round trip: {y0.value:.2f}")

    # An invalid call: the error is returned and kept as the last error.
    err = rt.cudaMemcpy(ctypes.c_void_p(0x10), host, nbytes, H2D)
    print(f"bad copy: {rt.cudaGetErrorName(err).decode()}, last error: "
          f"{rt.cudaGetErrorName(rt.cudaGetLastError()).decode()}, then: "
          f"{rt.cudaGetErrorName(rt.cudaGetLastError()).decode()}")

    check("cudaStreamDestroy", rt.cudaStreamDestroy(stream))
    check("cudaFree", rt.cudaFree(dx))
    check("cudaFree", rt.cudaFree(dy))
    check("cudaFreeHost", rt.cudaFreeHost(pinned))
    print(f"ctypes_prog done: {iterations} iterations")
    return 0


if __name__ == "__main__":
    sys.exit(main())
