"""bench.timing.best_interleaved: the calls alternate, and each function gets its own best."""

from __future__ import annotations

import time

import pytest

from bench.timing import best_interleaved


def test_calls_alternate_after_one_warm_up_each():
    calls = []
    fns = [lambda i=i: calls.append(i) for i in range(3)]
    best = best_interleaved(fns, 4)
    assert calls == [0, 1, 2] * 5                     # the warm-up round, then 4 rounds
    assert len(best) == 3 and all(b >= 0.0 for b in best)


def test_each_function_gets_its_own_best():
    slow_first = iter([0.0] + [0.02] * 2 + [0.0] * 10)  # warm-up, two slow calls, then fast

    def varying():
        time.sleep(next(slow_first))

    def steady():
        time.sleep(0.01)

    t_var, t_steady = best_interleaved([varying, steady], 5)
    assert t_var < 0.009                                # its fast calls count, not its slow ones
    assert 0.009 <= t_steady < 0.5


def test_repeats_must_be_positive():
    with pytest.raises(ValueError, match="repeats must be >= 1"):
        best_interleaved([lambda: None], 0)
