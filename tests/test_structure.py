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


# ----- inside a package: no import circle; autograd's one door to softfloat -------------------
def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _resolve(module: str, base: str) -> str | None:
    """The module of the source tree that ``module`` (dotted, absolute) names, or None."""
    path = ROOT.joinpath(*module.split("."))
    if path.with_suffix(".py").is_file() or (path / "__init__.py").is_file():
        return module
    return None


def _eager_edges(path: Path, package: str) -> set[str]:
    """Modules of ``package`` that ``path`` imports when it is imported (module level, not
    inside functions).  ``from X import name`` counts as importing X.name when that is a module
    of the tree, else X; a package's own __init__ being run first is not an edge."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    me = _module_name(path)
    pkg_of_me = me if path.name == "__init__.py" else me.rpartition(".")[0]
    edges = set()

    def visit(node):
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
                continue
            if isinstance(child, ast.Import):
                targets = [a.name for a in child.names]
            elif isinstance(child, ast.ImportFrom):
                if child.level:
                    base = pkg_of_me.split(".")
                    base = base[:len(base) - (child.level - 1)]
                    mod = ".".join(base + ([child.module] if child.module else []))
                else:
                    mod = child.module or ""
                targets = []
                for a in child.names:
                    sub = _resolve(f"{mod}.{a.name}", me)
                    targets.append(sub if sub else mod)
            else:
                visit(child)
                continue
            for t in targets:
                if t.split(".")[0] == package and _resolve(t, me) and t != me:
                    edges.add(t)
            visit(child)

    visit(tree)
    return edges


def _cycles(graph: dict) -> list[list[str]]:
    """Every strongly connected component with more than one module (Tarjan, iterative)."""
    index, low, on, stack, out, counter = {}, {}, set(), [], [], [0]
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph.get(root, ()))))]
        index[root] = low[root] = counter[0]
        counter[0] += 1
        stack.append(root)
        on.add(root)
        while work:
            v, it = work[-1]
            w = next(it, None)
            if w is None:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[v])
                if low[v] == index[v]:
                    comp = []
                    while True:
                        x = stack.pop()
                        on.discard(x)
                        comp.append(x)
                        if x == v:
                            break
                    if len(comp) > 1:
                        out.append(sorted(comp))
            elif w not in index:
                index[w] = low[w] = counter[0]
                counter[0] += 1
                stack.append(w)
                on.add(w)
                work.append((w, iter(sorted(graph.get(w, ())))))
            elif w in on:
                low[v] = min(low[v], index[w])
    return out


def _import_graph(package: str) -> dict:
    return {_module_name(p): _eager_edges(p, package) for p in _modules(package)}


@pytest.mark.parametrize("package", sorted(ALLOWED))
def test_no_import_circle_inside_a_package(package):
    """Importing any module of a package must not come back to a module still being imported:
    such a circle holds only while some import stays at the bottom of a file (issue #19)."""
    cycles = _cycles(_import_graph(package))
    assert not cycles, f"import circles in {package}/: {cycles}"


def test_cycle_finder_detects_a_circle(tmp_path, monkeypatch):
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []
    # The shape issue #19 found: tensor.py imports the ops at its bottom, the ops import tensor.
    pkg = tmp_path / "autograd"
    (pkg / "ops").mkdir(parents=True)
    (pkg / "__init__.py").write_text("from .tensor import Tensor\n")
    (pkg / "ops" / "__init__.py").write_text("")
    (pkg / "ops" / "add.py").write_text("from ..tensor import Tensor\n")
    (pkg / "tensor.py").write_text("class Tensor: pass\n\n"
                                   "def f():\n    from .ops import lazy  # not at import time\n\n"
                                   "from .ops import add as _add\n")
    monkeypatch.setattr(sys.modules[__name__], "ROOT", tmp_path)
    assert _import_graph("autograd")["autograd.tensor"] == {"autograd.ops.add"}
    assert _cycles(_import_graph("autograd")) == [["autograd.ops.add", "autograd.tensor"]]


def test_tensor_module_imports_no_op_and_ops_attach_themselves():
    """The Tensor class knows no op: the op modules import it and attach the operators."""
    g = _import_graph("autograd")
    assert not {m for m in g["autograd._tensor"] if m.startswith("autograd.ops")}
    assert "autograd._tensor" in g["autograd.ops.elementwise"]
    assert not (ROOT / "autograd" / "tensor.py").exists()   # the `tensor` function shadowed it


def test_autograd_reaches_softfloat_through_backend_only():
    bad = []
    for path in _modules("autograd"):
        if path.name == "_backend.py":
            continue
        for name, lineno, _lazy in _imports(path):
            if name == "softfloat":
                bad.append(f"{path.relative_to(ROOT)}:{lineno}")
    assert not bad, "only autograd/_backend.py may import softfloat: " + ", ".join(bad)


def test_engine_polls_no_global_recorder():
    """Instrumentation is passed in (hooks), not read from a module-level switch."""
    import autograd.instrument as ins
    assert not hasattr(ins, "ACTIVE")
    g = _import_graph("autograd")
    for mod in ("autograd._tensor", "autograd.nn.module"):
        assert "autograd.instrument" not in g[mod], mod


# ----- the bit constants of the carriers are named once (softfloat/_primitives.py) ------------
#: The masks and patterns _primitives names; a module-level constant elsewhere in softfloat with
#: one of these values is a second definition (issue #19: _EXPMASK meant 0x7FF in four modules).
BIT_CONSTANTS = ("F64_SIGN", "F64_ABS", "F64_EXP_FIELD", "F64_EXP_ALL_ONES", "F64_FRAC",
                 "F64_HIDDEN", "F64_ONE", "F64_NOT_EXP", "F32_SIGN", "F32_ABS", "F32_INF",
                 "F32_QNAN", "F32_FRAC", "F32_HIDDEN")
_OPS = {ast.LShift: lambda a, b: a << b, ast.RShift: lambda a, b: a >> b,
        ast.Add: lambda a, b: a + b, ast.Sub: lambda a, b: a - b, ast.Mult: lambda a, b: a * b,
        ast.BitAnd: lambda a, b: a & b, ast.BitOr: lambda a, b: a | b,
        ast.BitXor: lambda a, b: a ^ b}


_NP_INTS = {"uint32", "uint64", "int32", "int64"}   # typed kernel constants, as _primitives has


def _int_value(node):
    """The value of an integer literal expression (constants, + - * << >> & | ^ ~), or None."""
    if isinstance(node, ast.Constant) and type(node.value) is int:
        return node.value
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.Invert, ast.USub)):
        v = _int_value(node.operand)
        return None if v is None else (~v if isinstance(node.op, ast.Invert) else -v)
    if isinstance(node, ast.BinOp) and type(node.op) in _OPS:
        a, b = _int_value(node.left), _int_value(node.right)
        return None if a is None or b is None else _OPS[type(node.op)](a, b)
    if isinstance(node, ast.Call) and len(node.args) == 1 and not node.keywords:
        return _int_value(node.args[0])               # np.uint32(...), np.uint64(...), int(...)
    return None


def _bit_constant_definitions(path: Path, values: dict) -> list[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    found = []
    for node in tree.body:
        if isinstance(node, (ast.Assign, ast.AnnAssign)) and isinstance(node.value, ast.Call) \
                and getattr(node.value.func, "attr", None) in _NP_INTS:
            v = _int_value(node.value)
            if v is not None and v in values:
                found.append(f"{path.relative_to(ROOT)}:{node.lineno} "
                             f"(= {values[v]}, {v:#x})")
    return found


def test_bit_constants_are_defined_once():
    import softfloat._primitives as P

    values = {int(getattr(P, n)): n for n in BIT_CONSTANTS}
    bad = []
    for path in _modules("softfloat"):
        if path.name != "_primitives.py":
            bad += _bit_constant_definitions(path, values)
    assert not bad, ("bit constants defined again (import them from softfloat._primitives): "
                     + ", ".join(bad))


def test_bit_constant_finder_detects_a_copy(tmp_path, monkeypatch):
    f = tmp_path / "k.py"
    f.write_text("import numpy as np\n_EXPMASK = np.uint64(0x7FF)\nX = np.uint64(0x7FF << 52)\n"
                 "OK = np.uint32(5)\nI32_MAX = (1 << 31) - 1\n"
                 "def g():\n    Y = np.uint32(0x7FFFFFFF)\n")
    values = {0x7FF: "F64_EXP_ALL_ONES", 0x7FF << 52: "F64_EXP_FIELD", 0x7FFFFFFF: "F32_ABS"}
    monkeypatch.setattr(sys.modules[__name__], "ROOT", tmp_path)
    found = _bit_constant_definitions(f, values)
    # typed constants at module level only (a plain int such as int32's max is another thing)
    assert [s.split(" ")[0] for s in found] == ["k.py:2", "k.py:3"]


# ----- one chunk driver for the elementwise kernels ---------------------------------------------
#: Parallel functions that size their work with CHUNK but are not elementwise chunk loops, and
#: why they do not run on softfloat/_driver.py.
CHUNK_LOOP_EXCEPTIONS = {
    ("softfloat/dfp/_kernels_quant.py", "block_absmax_kernel"):
        "tasks of whole blocks (strided when inner > 1), about CHUNK elements each",
}


def _chunk_loops(path: Path) -> list[tuple[str, int]]:
    """(function, lineno) of every function of the file that loops with ``prange`` and names
    CHUNK: a parallel loop over fixed chunks of elements, the driver's job."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    found = []
    for fn in ast.walk(tree):
        if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        names = {n.id for n in ast.walk(fn) if isinstance(n, ast.Name)}
        names |= {n.attr for n in ast.walk(fn) if isinstance(n, ast.Attribute)}
        if "prange" in names and "CHUNK" in names:
            found.append((fn.name, fn.lineno))
    return found


def test_elementwise_chunk_loops_only_in_the_driver():
    """softfloat's elementwise kernels are chunk functions run by softfloat/_driver.py's
    launch (one chunk size, one serial/parallel rule, per-chunk result rows): no other module
    writes its own prange loop over CHUNK-sized chunks."""
    bad = []
    for path in _modules("softfloat"):
        rel = path.relative_to(ROOT).as_posix()
        if rel == "softfloat/_driver.py":
            continue
        bad += [f"{rel}:{line} {name}" for name, line in _chunk_loops(path)
                if (rel, name) not in CHUNK_LOOP_EXCEPTIONS]
    assert not bad, ("prange loops over CHUNK outside softfloat/_driver.py (write a chunk "
                     "function and a record, and call _driver.launch): " + ", ".join(bad))
    # the exceptions still exist (a stale entry would hide nothing, but should be removed)
    for rel, name in CHUNK_LOOP_EXCEPTIONS:
        assert name in [n for n, _ in _chunk_loops(ROOT / rel)], (rel, name)


def test_chunk_loop_finder_detects_a_loop(tmp_path):
    f = tmp_path / "k.py"
    f.write_text("from numba import njit, prange\nCHUNK = 1 << 14\n"
                 "@njit(parallel=True)\ndef k(x):\n    nch = (x.size + CHUNK - 1) // CHUNK\n"
                 "    for c in prange(nch):\n        x[c] = 0\n"
                 "def serial(x):\n    for c in range(x.size // CHUNK):\n        x[c] = 0\n"
                 "def tiles(x, D):\n    for c in D.prange(x.size // D.CHUNK):\n        x[c] = 0\n")
    assert _chunk_loops(f) == [("k", 4), ("tiles", 11)]
