"""Execute the teaching notebooks in notebooks/ top to bottom, as CI and `make notebooks` do.

    python -m tests.run_notebooks [--budget full|small] [--timeout SECONDS] [names...]
    python -m tests.run_notebooks --strip [names...]     # clear outputs before committing

Each notebook runs in a fresh "python3" kernel (nbclient) that must be THIS interpreter (the
project's virtual environment): if the python3 kernelspec found on the Jupyter path would start
another Python, a kernelspec pointing at ``sys.executable`` is written to a temporary directory
and put first on ``JUPYTER_PATH`` for the run; nothing is registered globally.  The kernel's
environment gets ``MPLBACKEND=Agg`` (no display needed), ``NUMBA_NUM_THREADS=1`` unless the
caller set it (see kernel_environment for why), and ``MPEMU_NB_BUDGET`` ("small" keeps
CI fast, "full" is the default for `make notebooks`); every notebook reads the budget in its
first code cell.  The repository root is put first on the kernel's ``PYTHONPATH``, so the
notebooks always exercise this checkout.  A cell that raises, or runs past the per-cell timeout,
stops its notebook and is reported with the cell's number, its source and the error.
Notebooks are executed in memory; the committed files (outputs stripped) are never rewritten.

Also used by tests/test_notebooks.py (loaded by path, so it works whether or not tests/ is a
package).  Imports only the standard library, nbformat, nbclient and jupyter_client.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import re
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOK_DIR = ROOT / "notebooks"
BUDGET_VAR = "MPEMU_NB_BUDGET"
BUDGETS = ("small", "full")
#: Per-cell limits in seconds: generous enough for a first Numba compile, or for a machine whose
#: cores are shared with other jobs (parallel kernels then slow down many times over).
DEFAULT_TIMEOUT = {"small": 600, "full": 1800}
KERNEL_NAME = "python3"
_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")


class NotebookError(RuntimeError):
    """A notebook cell failed (error or timeout), or the kernel was not the expected Python."""


@dataclass
class Result:
    name: str
    seconds: float          # wall clock, kernel start and shutdown included
    cells: int
    cpu_seconds: float      # user + system CPU time of the kernel process (nan if unknown)


def _children_cpu() -> float:
    """CPU seconds used so far by reaped child processes (the kernels), or nan."""
    try:
        import resource
    except ImportError:          # not on POSIX
        return math.nan
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def list_notebooks(names=()) -> list[Path]:
    """The numbered notebooks (``NN-*.ipynb``), sorted; ``names`` selects by file name, stem or
    number prefix ("01", "01-anatomy-of-a-float", "01-anatomy-of-a-float.ipynb")."""
    found = sorted(NOTEBOOK_DIR.glob("[0-9][0-9]-*.ipynb"))
    if not names:
        return found
    chosen = []
    for name in names:
        hits = [p for p in found if name in (p.name, p.stem) or p.name.startswith(f"{name}-")]
        if len(hits) != 1:
            known = ", ".join(p.stem for p in found) or "(none)"
            raise SystemExit(f"notebook {name!r} matches {len(hits)} notebooks; known: {known}")
        chosen.extend(hits)
    return chosen


def _resolved_kernel_argv0() -> str | None:
    """The executable the python3 kernelspec would launch, as jupyter_client resolves it (a bare
    "python"/"python3"/"python3.X" means the current interpreter), or None if there is none."""
    from jupyter_client.kernelspec import KernelSpecManager, NoSuchKernel

    try:
        spec = KernelSpecManager().get_kernel_spec(KERNEL_NAME)
    except NoSuchKernel:
        return None
    argv0 = spec.argv[0] if spec.argv else ""
    major, minor = sys.version_info[:2]
    if argv0 in {"python", f"python{major}", f"python{major}.{minor}"}:
        return sys.executable
    return argv0


def _same_path(a: str, b: str) -> bool:
    # Not os.path.samefile: a virtual environment's python is a symlink to the base interpreter,
    # and the base interpreter must NOT count as this one (it lacks the venv's packages).
    return os.path.normcase(os.path.abspath(a)) == os.path.normcase(os.path.abspath(b))


@contextlib.contextmanager
def kernel_environment(budget: str):
    """Environment for the kernels: budget, Agg backend, and a python3 kernelspec that starts
    this interpreter (via a temporary JUPYTER_PATH entry when the default one would not)."""
    saved = {k: os.environ.get(k) for k in (BUDGET_VAR, "MPLBACKEND", "JUPYTER_PATH",
                                             "PYDEVD_DISABLE_FILE_VALIDATION", "PYTHONPATH",
                                             "NUMBA_NUM_THREADS")}
    tmp = None
    try:
        os.environ[BUDGET_VAR] = budget
        os.environ["MPLBACKEND"] = "Agg"
        # ipykernel under a debugger-capable Python warns about frozen modules on every start.
        os.environ["PYDEVD_DISABLE_FILE_VALIDATION"] = "1"
        # One Numba thread unless the caller chose otherwise: the notebooks make thousands of
        # calls on small arrays, where starting a parallel region costs more than the work, and
        # on a machine whose cores are busy with other jobs every parallel region waits for a
        # time slice on each core (measured here: 02-rounding-modes 76 s with 2 threads against
        # 12 s with 1 while another job kept both cores busy).
        os.environ.setdefault("NUMBA_NUM_THREADS", "1")
        # The kernel runs in notebooks/; put this checkout first so the notebooks exercise the
        # working tree even when an (editable) install is stale or points elsewhere.
        old_path = os.environ.get("PYTHONPATH")
        os.environ["PYTHONPATH"] = str(ROOT) + (os.pathsep + old_path if old_path else "")
        argv0 = _resolved_kernel_argv0()
        if argv0 is None or not _same_path(argv0, sys.executable):
            tmp = tempfile.TemporaryDirectory(prefix="mpemu-kernels-")
            spec_dir = Path(tmp.name) / "kernels" / KERNEL_NAME
            spec_dir.mkdir(parents=True)
            (spec_dir / "kernel.json").write_text(json.dumps({
                "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
                "display_name": "Python 3 (mpemu)", "language": "python"}))
            old = os.environ.get("JUPYTER_PATH")
            os.environ["JUPYTER_PATH"] = tmp.name + (os.pathsep + old if old else "")
        yield
    finally:
        for key, val in saved.items():
            if val is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = val
        if tmp is not None:
            tmp.cleanup()


def _cell_error_text(exc, source: str) -> str:
    """The error without nbclient's copy of the cell source (printed once, above it)."""
    text = _ANSI.sub("", str(exc))
    sep = "------------------"
    head = f"An error occurred while executing the following cell:\n{sep}\n{source}\n{sep}\n"
    return text.replace(head, "", 1).strip()


def execute_notebook(path: Path, *, budget: str = "full", timeout: int | None = None) -> Result:
    """Run one notebook top to bottom in a fresh kernel; raise NotebookError on the first failing
    cell (with the cell's number, its source and the error) or on a wrong kernel."""
    import nbformat
    from nbclient import NotebookClient
    from nbclient.exceptions import CellExecutionError, CellTimeoutError, DeadKernelError

    if budget not in BUDGETS:
        raise ValueError(f"budget must be one of {BUDGETS}, got {budget!r}")
    timeout = DEFAULT_TIMEOUT[budget] if timeout is None else timeout
    nb = nbformat.read(path, as_version=4)
    client = NotebookClient(nb, timeout=timeout, kernel_name=KERNEL_NAME, allow_errors=False,
                            resources={"metadata": {"path": str(path.parent)}})
    start, cpu0 = time.perf_counter(), _children_cpu()
    with kernel_environment(budget), client.setup_kernel():
        # The kernel must be this interpreter in this environment (same sys.prefix: the venv,
        # not the base Python it links to) and must see the budget.
        probe = nbformat.v4.new_code_cell(
            "import os, sys\nprint(sys.executable)\nprint(sys.prefix)\n"
            "print(os.environ.get(%r))" % BUDGET_VAR)
        client.execute_cell(probe, 0, store_history=False)
        lines = "".join(o.get("text", "") for o in probe.outputs).splitlines()
        if len(lines) != 3 or lines[1:] != [sys.prefix, budget]:
            raise NotebookError(
                f"{path.name}: the kernel reports (executable, prefix, {BUDGET_VAR}) = {lines}; "
                f"expected ({sys.executable}, {sys.prefix}, {budget})")
        count = 0
        for index, cell in enumerate(nb.cells):
            if cell.cell_type != "code":
                continue
            count += 1
            try:
                client.execute_cell(cell, index, execution_count=count)
            except (CellExecutionError, CellTimeoutError, DeadKernelError) as exc:
                kind = "timed out" if isinstance(exc, CellTimeoutError) else "failed"
                raise NotebookError(
                    f"{path.name}: code cell {count} (cell {index}) {kind}\n"
                    f"----- source -----\n{cell.source}\n"
                    f"----- error -----\n{_cell_error_text(exc, cell.source)}") from None
    # Leaving setup_kernel() shut the kernel down and reaped it, so its CPU time is counted.
    return Result(path.name, time.perf_counter() - start, count, _children_cpu() - cpu0)


def strip_notebook(path: Path) -> bool:
    """Rewrite ``path`` as it must be committed: no outputs, no execution counts, no cell
    metadata, notebook metadata reduced to the kernelspec and the language name.  Returns
    whether the file changed."""
    import nbformat

    before = path.read_text(encoding="utf-8")
    nb = nbformat.reads(before, as_version=4)
    for cell in nb.cells:
        cell.metadata = {}
        cell.pop("attachments", None)
        if cell.cell_type == "code":
            cell.outputs, cell.execution_count = [], None
    nb.metadata = {"kernelspec": {"display_name": "Python 3", "language": "python",
                                  "name": KERNEL_NAME},
                   "language_info": {"name": "python"}}
    after = nbformat.writes(nb) + "\n"
    if after != before:
        path.write_text(after, encoding="utf-8")
    return after != before


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.run_notebooks",
                                     description="Execute the notebooks in notebooks/.")
    parser.add_argument("--budget", choices=BUDGETS,
                        default=os.environ.get(BUDGET_VAR, "full"),
                        help=f"problem sizes (default: ${BUDGET_VAR} or 'full')")
    parser.add_argument("--timeout", type=int, default=None,
                        help="per-cell timeout in seconds (default: %s)" % DEFAULT_TIMEOUT)
    parser.add_argument("--strip", action="store_true",
                        help="clear outputs and metadata in place instead of executing")
    parser.add_argument("names", nargs="*", help="notebooks to run (default: all)")
    args = parser.parse_args(argv)
    paths = list_notebooks(args.names)
    if not paths:
        print(f"no notebooks found in {NOTEBOOK_DIR}", file=sys.stderr)
        return 1
    if args.strip:
        for path in paths:
            print(f"{path.name:45s} {'stripped' if strip_notebook(path) else 'already clean'}")
        return 0
    failures = []
    start = time.perf_counter()
    for path in paths:
        t0 = time.perf_counter()
        try:
            res = execute_notebook(path, budget=args.budget, timeout=args.timeout)
        except NotebookError as exc:
            print(f"{path.name:45s} FAILED after {time.perf_counter() - t0:6.1f} s", flush=True)
            failures.append(str(exc))
            continue
        print(f"{path.name:45s} ok  {res.seconds:6.1f} s wall, {res.cpu_seconds:6.1f} s cpu  "
              f"({res.cells} code cells)", flush=True)
    print(f"{len(paths) - len(failures)}/{len(paths)} notebooks ran "
          f"(budget {args.budget}) in {time.perf_counter() - start:.1f} s")
    for text in failures:
        print("\n" + text, file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
