"""bench.timing.best_interleaved: the calls alternate, and each function gets its own best."""

from __future__ import annotations

import pytest

import bench.timing as timing
from bench.timing import best_interleaved


def test_calls_alternate_after_one_warm_up_each():
    calls = []
    fns = [lambda i=i: calls.append(i) for i in range(3)]
    best = best_interleaved(fns, 4)
    assert calls == [0, 1, 2] * 5                     # the warm-up round, then 4 rounds
    assert len(best) == 3 and all(b >= 0.0 for b in best)


def test_each_function_gets_its_own_best(monkeypatch):
    """A fake clock that each call advances by its own duration: the bests are exact."""
    now = [0.0]
    monkeypatch.setattr(timing.time, "perf_counter", lambda: now[0])
    varying = iter([9.0, 5.0, 7.0, 2.0, 4.0, 3.0])    # warm-up, then five timed calls
    steady = iter([1.0] * 6)

    def tick(durations):
        def fn():
            now[0] += next(durations)
        return fn

    assert best_interleaved([tick(varying), tick(steady)], 5) == [2.0, 1.0]


def test_repeats_must_be_positive():
    with pytest.raises(ValueError, match="repeats must be >= 1"):
        best_interleaved([lambda: None], 0)
