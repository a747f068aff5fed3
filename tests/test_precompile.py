"""softfloat.precompile: its chains cover its groups, bad arguments are refused, and a group
compiles both drivers of its kernels."""

from __future__ import annotations

import json
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
from softfloat import _driver, precompile
precompile.run_group("arith-fp32-rne")
print(json.dumps([sorted({sig[0].dtype.members[0][0] for sig in d.signatures})
                  for d in (_driver.drive_serial, _driver.drive_parallel)]))
"""


def test_a_group_compiles_the_serial_and_the_parallel_driver():
    # in a fresh process: this one's drivers may hold signatures from other tests
    out = subprocess.run([sys.executable, "-c", _PROBE], capture_output=True, text=True,
                         check=True).stdout
    serial, parallel = json.loads(out.splitlines()[-1])
    for names in (serial, parallel):
        for op in ("Add", "Sub", "Mul", "Div", "Sqrt", "Fma"):
            assert f"record_Arith{op}B" in names, (op, names)
    # and the results are the arithmetic's: fp32 rne of float32 operands is numpy's float32
    x = np.linspace(0.5, 3.0, 1000).astype(np.float32)
    assert np.array_equal(sf.div(x, x[::-1], "fp32").view(np.uint32),
                          (x / x[::-1]).view(np.uint32))
