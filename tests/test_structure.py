"""The layering of docs/design.md, enforced on the source tree.

* softfloat imports only the standard library, numpy and numba (and itself; llvmlite, numba's
  own code generator, for the intrinsic layer softfloat/_intrinsics.py);
* nothing imports Numba's internals (numba.core, numba.np, ...): only its public modules;
* scalers imports only the standard library and numpy;
* autograd imports only the standard library, numpy and softfloat;
* models may import autograd, softfloat, scalers, and its own third-party tools;
* matplotlib is imported only inside functions (lazily), and only in models/;
* no kernel uses ``fastmath``.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
STDLIB = set(sys.stdlib_module_names) | {"__future__"}

ALLOWED = {
    "softfloat": {"numpy", "numba", "llvmlite", "softfloat"},
    "scalers": {"numpy", "scalers"},
    "autograd": {"numpy", "softfloat", "autograd"},
    "models": {"numpy", "softfloat", "autograd", "scalers", "models", "matplotlib", "tqdm",
               "sklearn", "dask", "distributed"},
}


def _modules(package: str):
    return sorted((ROOT / package).rglob("*.py"))


def _imports(path: Path):
    """(top-level module name, lineno, is_lazy) for every import in the file; relative imports
    resolve to the file's own package."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    own = path.relative_to(ROOT).parts[0]
    out = []

    def visit(node, depth):
        for child in ast.iter_child_nodes(node):
            lazy = depth > 0
            if isinstance(child, ast.Import):
                for alias in child.names:
                    out.append((alias.name.split(".")[0], child.lineno, lazy))
            elif isinstance(child, ast.ImportFrom):
                name = own if child.level else (child.module or "").split(".")[0]
                out.append((name, child.lineno, lazy))
            inner = depth + isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef))
            visit(child, inner)

    visit(tree, 0)
    return out


@pytest.mark.parametrize("package", sorted(ALLOWED))
def test_layering(package):
    files = _modules(package)
    assert files, f"package {package}/ has no modules"
    bad = []
    for path in files:
        for name, lineno, _lazy in _imports(path):
            if name in STDLIB:
                continue
            if name not in ALLOWED[package]:
                bad.append(f"{path.relative_to(ROOT)}:{lineno} imports {name}")
    assert not bad, "imports against the layering in DESIGN.md:\n" + "\n".join(bad)


def test_matplotlib_only_lazily_in_models():
    bad = []
    for package in ALLOWED:
        for path in _modules(package):
            for name, lineno, lazy in _imports(path):
                if name == "matplotlib" and (package != "models" or not lazy):
                    bad.append(f"{path.relative_to(ROOT)}:{lineno}")
    assert not bad, "matplotlib must be imported lazily and only in models/: " + ", ".join(bad)


#: Numba's public modules (its extension API included); everything else under numba. (numba.core,
#: numba.np, numba.misc, ...) is internal and may change in any release.
NUMBA_PUBLIC = {"numba", "numba.extending", "numba.types", "numba.typed"}


def _numba_modules(path: Path):
    """(dotted module, lineno) of every numba module imported by the file."""
    out = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            out += [(a.name, node.lineno) for a in node.names if a.name.split(".")[0] == "numba"]
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module \
                and node.module.split(".")[0] == "numba":
            out.append((node.module, node.lineno))
    return out


def test_no_numba_internals():
    bad = [f"{path.relative_to(ROOT)}:{line} imports {mod}"
           for package in ALLOWED for path in _modules(package)
           for mod, line in _numba_modules(path) if mod not in NUMBA_PUBLIC]
    assert not bad, "Numba internals imported (use numba.extending / llvmlite.ir):\n" + \
        "\n".join(bad)


def test_no_fastmath():
    bad = []
    for package in ALLOWED:
        for path in _modules(package):
            tree = ast.parse(path.read_text(encoding="utf-8"))
            for node in ast.walk(tree):
                if isinstance(node, ast.keyword) and node.arg == "fastmath":
                    bad.append(f"{path.relative_to(ROOT)}:{node.value.lineno}")
                if isinstance(node, ast.Constant) and node.value == "fastmath":
                    bad.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert not bad, "fastmath is forbidden in kernels: " + ", ".join(bad)


def test_checker_detects_violations(tmp_path, monkeypatch):
    """The checker itself must flag a bad import (so the tests above can fail)."""
    pkg = tmp_path / "softfloat"
    pkg.mkdir()
    (pkg / "bad.py").write_text("import autograd\nfrom scalers import x\n"
                                "def f():\n    import matplotlib\n"
                                "from numba.core import cgutils\nimport numba.np.ufunc\n"
                                "from numba.extending import intrinsic\n")
    monkeypatch.setattr(sys.modules[__name__], "ROOT", tmp_path)
    found = _imports(pkg / "bad.py")
    assert ("autograd", 1, False) in found
    assert ("scalers", 2, False) in found
    assert ("matplotlib", 4, True) in found
    numba_mods = _numba_modules(pkg / "bad.py")
    assert [m for m, _ in numba_mods if m not in NUMBA_PUBLIC] == ["numba.core", "numba.np.ufunc"]
