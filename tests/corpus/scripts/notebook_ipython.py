# Runs notebook/train_cells.py cell by cell in IPython's own shell (InteractiveShell.run_cell: each cell compiled
# under <ipython-input-N-HASH> and executed statement by statement), as a terminal IPython or a notebook on a
# kernel built on it runs them.  Without IPython installed, the same by hand: compile and exec under the name
# IPython gives (its execution count, the SHA-1 of the cell's text).
import ast
import hashlib
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from notebook_ipykernel import cells  # noqa: E402  (one way to cut the cells)


def by_hand(sources):
    user_ns = {"__name__": "__main__", "__builtins__": __builtins__}
    for n, src in enumerate(sources, 1):
        name = f"<ipython-input-{n}-{hashlib.sha1(src.encode()).hexdigest()[:12]}>"
        for node in ast.parse(src, filename=name).body:
            exec(compile(ast.Module([node], type_ignores=[]), name, "exec"), user_ns)


if __name__ == "__main__":
    sources = cells(os.path.join(HERE, "notebook", "train_cells.py"))
    try:
        from IPython.core.interactiveshell import InteractiveShell
    except ImportError:
        by_hand(sources)
        sys.exit(0)
    shell = InteractiveShell.instance()
    for src in sources:
        result = shell.run_cell(src, store_history=True)
        if not result.success:
            sys.exit(1)
