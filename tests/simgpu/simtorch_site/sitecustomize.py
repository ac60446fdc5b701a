"""simtorch: PyTorch on simgpu (see tests/simgpu/README.md, "PyTorch on simgpu").

simgpu has no cuDNN stand-in, so once `torch` is imported this turns cuDNN off
(torch.backends.cudnn.enabled = False): convolutions, batch norm and RNNs then
take PyTorch's native CUDA kernels (im2col + cuBLAS GEMMs for convolutions),
which simgpu runs.  It also pauses 50 ms at exit when CUDA was used (below).  Nothing is imported before the program imports torch, and
a sitecustomize found later on sys.path still runs.
"""
import atexit
import importlib.abc
import importlib.machinery
import os
import sys


def _let_autograd_threads_settle(torch):
    """PyTorch's exit race (pytorch/pytorch#38228): an autograd device thread still releasing a finished
    graph takes the GIL after the interpreter began finalizing, CPython ends it with pthread_exit, and the
    unwind through a noexcept frame aborts the process ("terminate called without an active exception").
    A loaded test machine widens the window; a short pause before finalization closes it."""
    try:
        if torch.cuda.is_initialized():
            import time
            time.sleep(0.05)
    except Exception:
        pass


class _TorchImportHook(importlib.abc.MetaPathFinder):
    """Wraps torch's loader so that cuDNN is disabled right after torch loads."""

    def find_spec(self, name, path=None, target=None):
        if name != "torch":
            return None
        sys.meta_path.remove(self)
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        if spec is None or spec.loader is None:
            return spec
        loader = spec.loader
        exec_module = loader.exec_module

        def exec_and_disable_cudnn(module):
            exec_module(module)
            module.backends.cudnn.enabled = False
            atexit.register(_let_autograd_threads_settle, module)

        loader.exec_module = exec_and_disable_cudnn
        return spec


if os.environ.get("SIMTORCH_CUDNN", "0") != "1":
    sys.meta_path.insert(0, _TorchImportHook())

# Chain to the next sitecustomize on the path (if any), as Python would have run it.
_here = os.path.dirname(os.path.abspath(__file__))
for _dir in sys.path:
    if not _dir or os.path.abspath(_dir) == _here:
        continue
    _candidate = os.path.join(_dir, "sitecustomize.py")
    if os.path.isfile(_candidate):
        with open(_candidate) as _f:
            exec(compile(_f.read(), _candidate, "exec"), {"__name__": "sitecustomize", "__file__": _candidate})
        break
