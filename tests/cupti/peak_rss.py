"""Peak resident memory of a child process, shared by tests/cupti/memory_bound.py and
bench/interpose/bench_cupti_memory.py.

The peak is the process's own VmHWM (/proc/PID/status), read every 20 ms while it runs: ru_maxrss of
a child forked from this Python starts at Python's resident size (the high-water mark survives exec),
which made a plain run look ~10 MiB bigger than it is and what libtbprof adds that much smaller.
"""
import re
import subprocess
import tempfile
import time

POLL_S = 0.02


def run_peak(cmd, env, capture=False):
    """(exit status, stdout as text if capture else None, peak RSS in bytes) of one child; its stderr
    goes where ours does when capturing, else nowhere."""
    with tempfile.TemporaryFile() as out:
        p = subprocess.Popen(cmd, env=env, stdout=out if capture else subprocess.DEVNULL,
                             stderr=None if capture else subprocess.DEVNULL)
        hwm_kib = 0
        while p.poll() is None:
            try:
                with open(f"/proc/{p.pid}/status") as f:
                    m = re.search(r"^VmHWM:\s+(\d+) kB", f.read(), re.M)
                if m:
                    hwm_kib = max(hwm_kib, int(m.group(1)))
            except OSError:   # (it exited between poll and open)
                pass
            time.sleep(POLL_S)
        text = None
        if capture:
            out.seek(0)
            text = out.read().decode()
        return p.returncode, text, hwm_kib * 1024
