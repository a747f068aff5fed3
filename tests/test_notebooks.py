"""The teaching notebooks: committed clean, structured as the issue asks, and executable.

Every numbered notebook in notebooks/ is checked for
* a clean commit: no outputs, no execution counts, no cell metadata, notebook metadata limited
  to the kernelspec and the language name (no widget state, no timing, no editor noise);
* structure: a "# N. Title" first cell with a **Goal.** paragraph, numbered sections, a
  "## Summary" and a "## Exercises" section, and a first code cell that reads MPEMU_NB_BUDGET;
* execution top to bottom in a fresh kernel with the small budget (MPLBACKEND=Agg), through
  tests/run_notebooks.py, which reports the failing cell's source and error.
"""

from __future__ import annotations

import importlib.util
import json
import re
import sys
from pathlib import Path

import pytest

_HERE = Path(__file__).resolve().parent
_spec = importlib.util.spec_from_file_location("_mpemu_run_notebooks", _HERE / "run_notebooks.py")
runner = importlib.util.module_from_spec(_spec)
sys.modules[_spec.name] = runner
_spec.loader.exec_module(runner)

#: The notebooks the issue asks for, in teaching order.
EXPECTED = [
    "01-anatomy-of-a-float",
    "02-rounding-modes",
    "03-fp32-master-weights",
    "04-loss-scaling-histograms",
    "05-dynamic-loss-scaling",
    "06-tensor-cores",
    "07-dfp16",
    "08-automatic-mixed-precision",
    "09-microscaling",
]

NOTEBOOKS = runner.list_notebooks()
IDS = [p.stem for p in NOTEBOOKS]


def _load(path: Path) -> dict:
    return json.loads(path.read_text(encoding="utf-8"))


def _source(cell) -> str:
    src = cell.get("source", "")
    return "".join(src) if isinstance(src, list) else src


def test_every_expected_notebook_is_present():
    present = [p.stem for p in NOTEBOOKS]
    assert present == EXPECTED, f"notebooks/ holds {present}, expected {EXPECTED}"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=IDS)
def test_committed_with_outputs_stripped(path):
    nb = _load(path)
    assert nb["nbformat"] == 4
    extra = set(nb.get("metadata", {})) - {"kernelspec", "language_info"}
    assert not extra, f"{path.name}: notebook metadata noise {sorted(extra)}"
    assert nb["metadata"].get("kernelspec", {}).get("name") == runner.KERNEL_NAME
    assert set(nb["metadata"].get("language_info", {})) <= {"name"}, \
        f"{path.name}: language_info should hold only the language name"
    for i, cell in enumerate(nb["cells"]):
        assert cell.get("metadata", {}) == {}, f"{path.name} cell {i}: metadata {cell['metadata']}"
        if cell["cell_type"] == "code":
            assert cell.get("outputs") == [], f"{path.name} cell {i}: outputs not stripped"
            assert cell.get("execution_count") is None, f"{path.name} cell {i}: execution_count"
        assert "attachments" not in cell, f"{path.name} cell {i}: attachments"
        assert _source(cell).strip(), f"{path.name} cell {i}: empty cell"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=IDS)
def test_has_required_sections(path):
    cells = _load(path)["cells"]
    first = _source(cells[0])
    number = int(path.name[:2])
    assert cells[0]["cell_type"] == "markdown"
    assert re.match(rf"# {number}\. \S", first), \
        f"{path.name}: first cell must be '# {number}. Title'"
    goal = re.search(r"^\*\*Goal\.\*\*\s+(.+)", first, re.M | re.S)
    assert goal and len(goal.group(1).split()) >= 30, \
        f"{path.name}: the first cell needs a '**Goal.**' paragraph (30 words or more)"
    headings = [line for c in cells if c["cell_type"] == "markdown"
                for line in _source(c).splitlines() if line.startswith("## ")]
    numbered = [h for h in headings if re.match(r"## \d+\. ", h)]
    assert len(numbered) >= 3, f"{path.name}: needs at least 3 numbered sections, has {numbered}"
    assert headings[-2:] == ["## Summary", "## Exercises"], \
        f"{path.name}: must end with '## Summary' then '## Exercises', ends with {headings[-2:]}"
    exercises = _source([c for c in cells if "## Exercises" in _source(c)][-1])
    assert len(re.findall(r"^\d+\. ", exercises, re.M)) >= 3, f"{path.name}: at least 3 exercises"
    code = [c for c in cells if c["cell_type"] == "code"]
    assert code and runner.BUDGET_VAR in _source(code[0]), \
        f"{path.name}: the first code cell must read {runner.BUDGET_VAR}"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=IDS)
def test_executes_with_small_budget(path):
    try:
        runner.execute_notebook(path, budget="small")
    except runner.NotebookError as exc:
        pytest.fail(str(exc), pytrace=False)
