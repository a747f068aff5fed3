"""The engine's seeded randomness: parameter initialisation, dropout seeds and the stochastic
rounding stream all start from :func:`manual_seed`.

Imports numpy and the engine's _backend only (softfloat's seed mixer comes through it).
"""

from __future__ import annotations

import numpy as np

from . import _backend as B
from ._backend import derive_seed

__all__ = ["default_generator", "derive_seed", "draw_seed", "get_rng_state", "manual_seed",
           "set_rng_state"]

_GEN = [np.random.Generator(np.random.PCG64(0))]


def manual_seed(seed: int) -> None:
    """Reseed initialisation and dropout (numpy PCG64) and restart the stochastic-rounding
    stream, so a run is reproducible bit for bit from this point."""
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise TypeError(f"manual_seed: seed must be a non-negative int, got {seed!r}")
    _GEN[0] = np.random.Generator(np.random.PCG64(int(seed)))
    B.reset_sr_stream()


def default_generator() -> np.random.Generator:
    """The generator modules use when no ``rng=`` is given."""
    return _GEN[0]


def draw_seed(rng: np.random.Generator | None = None) -> int:
    """A fresh 63-bit seed from rng (default: the engine's generator)."""
    return int((rng or _GEN[0]).integers(0, 2 ** 63 - 1))


def get_rng_state() -> dict:
    """The engine's whole random state, for checkpoints: ``{"generator": the PCG64 state of
    default_generator() (a dict of ints), "sr_calls": the number of stochastic-rounding calls
    made since manual_seed}``.  set_rng_state(get_rng_state()) later makes the run continue
    with the same bits (initialisation, dropout masks and SR streams) as if never stopped.
    JSON-serialisable; a copy (later draws do not change it)."""
    st = _GEN[0].bit_generator.state
    gen = {"bit_generator": st["bit_generator"], "has_uint32": int(st["has_uint32"]),
           "uinteger": int(st["uinteger"]),
           "state": {"state": int(st["state"]["state"]), "inc": int(st["state"]["inc"])}}
    return {"generator": gen, "sr_calls": int(B._SR_CALLS[0])}


def set_rng_state(state: dict) -> None:
    """Restore a state from get_rng_state() (the counterpart of manual_seed for resuming)."""
    if not isinstance(state, dict) or set(state) != {"generator", "sr_calls"}:
        got = sorted(state) if isinstance(state, dict) else type(state).__name__
        raise ValueError(f"set_rng_state needs the dict of get_rng_state() with keys "
                         f"'generator' and 'sr_calls', got {got}")
    n = state["sr_calls"]
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 0:
        raise ValueError(f"set_rng_state: sr_calls must be a non-negative int, got {n!r}")
    gen = state["generator"]
    if not isinstance(gen, dict) or gen.get("bit_generator") != "PCG64":
        raise ValueError("set_rng_state: generator must be a PCG64 state dict (from "
                         f"get_rng_state()), got {gen!r}")
    g = np.random.Generator(np.random.PCG64(0))
    try:
        g.bit_generator.state = gen
    except (TypeError, ValueError, KeyError) as exc:
        raise ValueError(f"set_rng_state: invalid PCG64 state ({exc})") from None
    _GEN[0] = g
    B._SR_CALLS[0] = int(n)
