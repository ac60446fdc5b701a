"""A Python program using HIP through ctypes (CDLL loads libamdhip64 with
RTLD_LOCAL, as torch does): a burst of tiny kernels launched from
zero_grad(), scalar host-to-device copies from step(), then one sync.

The test (test_ctypes.sh) checks that tbanalyze names these Python
functions and lines for the findings.  HIPWL_CALLS=file logs each call.
"""
import ctypes
import os

hip = ctypes.CDLL("libamdhip64.so.5")
calls_path = os.environ.get("HIPWL_CALLS")
calls = open(calls_path, "w") if calls_path else None


class Dim3(ctypes.Structure):
    _fields_ = [("x", ctypes.c_uint), ("y", ctypes.c_uint), ("z", ctypes.c_uint)]


def log(name, result):
    if calls:
        calls.write(f"{name} {result}\n")
    return result


def call(name, *args):
    return log(name, getattr(hip, name)(*args))


# What hipcc's registration code does, with a stand-in host stub address.
stub = ctypes.create_string_buffer(16)
wrapper = ctypes.create_string_buffer(b"FPIH\x01\x00\x00\x00", 32)
hip.__hipRegisterFatBinary.restype = ctypes.c_void_p
modules = hip.__hipRegisterFatBinary(wrapper)
hip.__hipRegisterFunction(ctypes.c_void_p(modules), stub, b"_Z9zero_gradPf", b"_Z9zero_gradPf",
                          ctypes.c_int(-1), None, None, None, None, None)
hip.hipLaunchKernel.argtypes = [ctypes.c_void_p, Dim3, Dim3, ctypes.c_void_p, ctypes.c_size_t,
                                ctypes.c_void_p]
hip.hipMemcpy.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]


# The HIP calls findings should point at are made right here (not through
# call()), so these functions are the innermost Python frames.
def zero_grad(params):
    for _ in range(params):
        r = hip.hipLaunchKernel(ctypes.addressof(stub), Dim3(1, 1, 1), Dim3(32, 1, 1), None, 0, None)
        log("hipLaunchKernel", r)


def step(dev, i):
    scalar = ctypes.c_float(i)
    log("hipMemcpy", hip.hipMemcpy(dev, ctypes.addressof(scalar), 4, 1))


def main():
    dev = ctypes.c_void_p()
    call("hipMalloc", ctypes.byref(dev), ctypes.c_size_t(4096))
    for i in range(3):
        zero_grad(40)
        for j in range(8):
            step(dev, i * 8 + j)
    call("hipDeviceSynchronize")
    call("hipFree", dev)
    print("ctypes HIP program done")


main()
if calls:
    calls.close()
