# Runs notebook/train_cells.py cell by cell the way Jupyter's ipykernel does: each cell compiled under its
# cell file name (TMP/ipykernel_PID/HASH.py, a file that is never written) and executed statement by statement
# in the kernel's one namespace, as IPython's run_cell does.
import ast
import hashlib
import os
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))


def cells(path):
    out, cur = [], []
    for line in open(path).read().splitlines(keepends=True):
        if line.startswith("# %%"):
            if "".join(cur).strip():
                out.append("".join(cur))
            cur = []
        else:
            cur.append(line)
    if "".join(cur).strip():
        out.append("".join(cur))
    return out[1:]  # the text before the first cell marker is the file's own comment


def cell_file(src):
    return os.path.join(tempfile.gettempdir(), f"ipykernel_{os.getpid()}",
                        hashlib.sha1(src.encode()).hexdigest()[:12] + ".py")


def run_cell(src, user_ns):
    name = cell_file(src)
    for node in ast.parse(src, filename=name).body:
        exec(compile(ast.Module([node], type_ignores=[]), name, "exec"), user_ns)


if __name__ == "__main__":
    user_ns = {"__name__": "__main__", "__builtins__": __builtins__}
    for src in cells(os.path.join(HERE, "notebook", "train_cells.py")):
        run_cell(src, user_ns)
