"""Reader for simgpu's ground-truth log (SIMGPU_TRUTH=path); format in README.md.

    import simgpu_truth
    ops = simgpu_truth.read("truth.log")          # list of dicts, file order
    kernels = [o for o in ops if o["op"] == "kernel" and o["gpu"]]

Integer columns are ints ('-' becomes None), grid/block become 3-tuples.
"""
import sys

COLUMNS = ["pid", "seq", "tid", "op", "api", "device", "stream", "stream_handle", "start", "end",
           "host_start", "host_end", "name", "bytes", "copy_kind", "hostmem", "src_mem", "dst_mem",
           "sync_kind", "async", "gpu", "captured", "result", "corr", "ext_kind", "ext_id", "grid",
           "block", "shmem", "ptr", "ptr2", "event", "domain", "api_corr"]
INT_COLUMNS = {"pid", "seq", "tid", "device", "stream", "start", "end", "host_start", "host_end", "bytes",
               "async", "gpu", "captured", "result", "corr", "ext_kind", "ext_id", "shmem", "event",
               "api_corr"}
HEX_COLUMNS = {"stream_handle", "ptr", "ptr2"}


class TruthError(ValueError):
    pass


def parse_line(line, where="?"):
    fields = line.rstrip("\n").split("\t")
    if len(fields) < len(COLUMNS):
        raise TruthError(f"{where}: {len(fields)} columns, expected {len(COLUMNS)}")
    rec = {}
    for name, value in zip(COLUMNS, fields):
        if value == "-":
            rec[name] = None
        elif name in INT_COLUMNS:
            rec[name] = int(value)
        elif name in HEX_COLUMNS:
            rec[name] = int(value, 16)
        elif name in ("grid", "block"):
            rec[name] = tuple(int(v) for v in value.split(","))
        else:
            rec[name] = value
    return rec


def read(path):
    ops = []
    with open(path) as f:
        for n, line in enumerate(f, 1):
            if line.startswith("#") or not line.strip():
                continue
            ops.append(parse_line(line, f"{path}:{n}"))
    return ops


def counts(ops):
    """Number of lines per op kind (filter first, e.g. on gpu or result, for other counts)."""
    out = {}
    for o in ops:
        out[o["op"]] = out.get(o["op"], 0) + 1
    return out


if __name__ == "__main__":
    for p in sys.argv[1:]:
        ops = read(p)
        print(p, counts(ops))
