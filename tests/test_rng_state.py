"""autograd.get_rng_state / set_rng_state: a saved state resumes initialisation, dropout masks
and the stochastic-rounding streams with the same bits; bad states are refused by name."""

from __future__ import annotations

import json

import numpy as np
import pytest

import autograd as ag
from autograd import F, nn, tensor, use_policy


def _draws(pol, x):
    """A layer initialised from the engine's generator, a dropout mask from a drawn seed and
    two SR-rounded ops: everything that consumes the engine's randomness."""
    lin = nn.Linear(6, 4)
    with use_policy(pol):
        y = F.exp(tensor(x))
        z = F.tanh(y * tensor(x))
    drop = nn.Dropout(0.5)
    m = drop(tensor(np.ones((8, 8), np.float32)))
    return [lin.weight.data.copy(), y.data.copy(), z.data.copy(), m.data.copy()]


def test_state_round_trip_resumes_the_same_bits():
    pol = ag.get_policy("O3", rounding="sr", seed=9)
    x = np.linspace(-2, 2, 257).astype(np.float32)
    ag.manual_seed(4)
    _draws(pol, x)                               # advance both streams
    st = json.loads(json.dumps(ag.get_rng_state()))     # what a checkpoint stores
    assert st["sr_calls"] > 0
    first = _draws(pol, x)
    second = _draws(pol, x)                      # differs from first (streams moved on)
    assert any(not np.array_equal(a, b) for a, b in zip(first, second))
    ag.set_rng_state(st)
    again = _draws(pol, x)
    for a, b in zip(first, again):
        assert a.dtype == b.dtype and np.array_equal(a.view(np.uint8), b.view(np.uint8))
    # get_rng_state returns a copy: drawing afterwards does not change a saved state.
    saved = ag.get_rng_state()
    _draws(pol, x)
    assert saved != ag.get_rng_state()


@pytest.mark.parametrize("bad, msg", [
    (None, "keys 'generator' and 'sr_calls'"),
    ({"generator": {}}, "keys 'generator' and 'sr_calls'"),
    ({"generator": {"bit_generator": "MT19937"}, "sr_calls": 0}, "PCG64"),
    ({"generator": {"bit_generator": "PCG64"}, "sr_calls": 0}, "invalid PCG64 state"),
    ({"generator": None, "sr_calls": -1}, "non-negative int"),
    ({"generator": None, "sr_calls": True}, "non-negative int"),
])
def test_bad_state_is_refused(bad, msg):
    before = ag.get_rng_state()
    with pytest.raises(ValueError, match=msg):
        ag.set_rng_state(bad)
    assert ag.get_rng_state() == before          # nothing half-applied
