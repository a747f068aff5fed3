"""The engine's seeded randomness: parameter initialisation, dropout seeds and the stochastic
rounding stream all start from :func:`manual_seed`.

Imports numpy, softfloat (its seed mixer) and the engine's _backend only.
"""

from __future__ import annotations

import numpy as np

from softfloat import derive_seed

from . import _backend as B

__all__ = ["default_generator", "derive_seed", "draw_seed", "manual_seed"]

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
