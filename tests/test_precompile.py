"""softfloat.precompile: its chains cover its groups, bad arguments are refused, and a group
compiles the drivers of its kernels."""

from __future__ import annotations

import json
import pathlib
import subprocess
import sys

import numpy as np
import pytest

import softfloat as sf
from softfloat import precompile


def test_every_group_is_in_exactly_one_chain_and_listed(capsys):
    in_chains = [g for chain in precompile.CHAINS for g in chain]
    assert sorted(in_chains) == sorted(precompile.GROUPS)
    assert precompile.main(["--list"]) == 0
    out = capsys.readouterr().out
    for g in precompile.GROUPS:
        assert f"  {g}: " in out


def test_unknown_group_and_bad_jobs_are_refused():
    with pytest.raises(ValueError, match="unknown precompile group 'nope'.*round-float32"):
        precompile.run_group("nope")
    with pytest.raises(SystemExit) as e:
        precompile.main(["--jobs", "0"])
    assert e.value.code == 2
    with pytest.raises(SystemExit):
        precompile.main(["--chain", str(len(precompile.CHAINS))])


_PROBE = """
import json
from softfloat import _driver, _kernels_arith_f32 as K, precompile
before = {op: len(getattr(K, f"Arith{op}B").drive.signatures) for op in %r}
precompile.run_group("arith-fp32-rne")
print(json.dumps([before, {op: [len(sig[-1]) for sig in getattr(K, f"Arith{op}B").drive.signatures]
                           for op in before}]))
"""

_OPS = ("Add", "Sub", "Mul", "Div", "Sqrt", "Fma")


def test_a_group_compiles_the_drivers_of_its_kernels():
    # in a fresh process: this one's drivers may hold signatures from other tests
    out = subprocess.run([sys.executable, "-c", _PROBE % (_OPS,)], capture_output=True,
                         text=True, check=True).stdout
    before, after = json.loads(out.splitlines()[-1])
    assert before == {op: 0 for op in _OPS}
    for op in _OPS:
        assert len(after[op]) == 1, (op, after)   # one compiled driver per operation
    # and the results are the arithmetic's: fp32 rne of float32 operands is numpy's float32
    x = np.linspace(0.5, 3.0, 1000).astype(np.float32)
    assert np.array_equal(sf.div(x, x[::-1], "fp32").view(np.uint32),
                          (x / x[::-1]).view(np.uint32))


def test_test_families_are_one_work_unit_each_and_other_files_their_own():
    """tests/conftest.py's xdist scheduling: the mx and dfp test files form one unit each (so
    one test process compiles their kernels); every other file is its own unit, as under
    --dist loadfile; each family still names several existing files."""
    from conftest import FAMILIES, work_unit

    here = pathlib.Path(__file__).parent
    for prefix, unit in FAMILIES.items():
        files = sorted(p.name for p in here.glob(prefix + "*.py"))
        assert len(files) >= 2, (prefix, files)
        assert {work_unit(f"tests/{f}") for f in files} == {unit}
    assert work_unit("tests/test_driver.py") == "tests/test_driver.py"
    assert work_unit("tests/test_mixed.py") == "tests/test_mixed.py"
