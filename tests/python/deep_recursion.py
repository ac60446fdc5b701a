"""Workload for test_deep_recursion.py: recursion deep enough that CPython
runs it without overflowing the C stack only because Python-to-Python calls
run inline (3.11+), in a thread with a small stack or in the main thread
with a raised recursion limit.  Prints what it computed; `after` then spends
a few ms in a function so a traced run shows whether the span hook is back."""
import ctypes
import os
import sys
import threading
import time


def recurse(n):
    return 0 if n == 0 else recurse(n - 1) + 1


class Node:
    """Recursion through type.__call__ and __init__ (C frames in between)."""

    def __init__(self, n):
        self.depth = 0 if n == 0 else Node(n - 1).depth + 1


def after():
    time.sleep(0.003)
    return "after"


def in_thread(stack_kib, work):
    threading.stack_size(stack_kib * 1024)
    out = []
    t = threading.Thread(target=lambda: out.append(work()))
    t.start()
    t.join()
    return out


def hook_installed():
    """Is a PEP 523 evaluator other than CPython's own in place?"""
    api = ctypes.pythonapi
    api.PyInterpreterState_Main.restype = ctypes.c_void_p
    api._PyInterpreterState_GetEvalFrameFunc.restype = ctypes.c_void_p
    api._PyInterpreterState_GetEvalFrameFunc.argtypes = [ctypes.c_void_p]
    current = api._PyInterpreterState_GetEvalFrameFunc(api.PyInterpreterState_Main())
    return current != ctypes.cast(api._PyEval_EvalFrameDefault, ctypes.c_void_p).value


def main():
    mode, depth = sys.argv[1], int(sys.argv[2])
    if os.environ.get("DEEP_WAIT_FOR_HOOK"):
        # tbprof installs its hook from a pending call shortly after start:
        # recurse only once it is in, or the run would not test it.
        deadline = time.monotonic() + 30
        while not hook_installed() and time.monotonic() < deadline:
            time.sleep(0.001)
        if not hook_installed():
            sys.exit("the span hook was never installed")
    if mode == "thread":  # 256 KiB stack, under the default recursion limit
        print("thread", in_thread(256, lambda: recurse(depth)))
    elif mode == "thread-init":
        print("thread-init", in_thread(256, lambda: Node(depth).depth))
    elif mode == "main":
        sys.setrecursionlimit(200000)
        print("main", recurse(depth))
    print(after())


if __name__ == "__main__":
    main()
