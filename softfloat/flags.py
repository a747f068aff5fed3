"""IEEE exception flags of emulated operations, reported as counts.

Kernels never raise: every element's inexact / underflow / overflow / invalid / divide-by-zero
condition is counted, and a :class:`Flags` object passed as ``flags=`` to any softfloat operation
accumulates the counts of that call.  Loss scalers read ``overflow``/``invalid`` as "found inf";
the underflow histograms read ``underflow``.  Imports numpy only.
"""

from __future__ import annotations

import numpy as np

__all__ = ["Flags", "FLAG_NAMES"]

FLAG_NAMES = ("inexact", "underflow", "overflow", "invalid", "divbyzero")


class Flags:
    """Accumulated counts of elements that raised each IEEE flag.

    >>> f = Flags(); y = softfloat.round([1e-9, 7e4], "fp16", flags=f)   # doctest: +SKIP
    >>> f.underflow, f.overflow                                          # doctest: +SKIP
    (1, 1)
    """

    __slots__ = ("inexact", "underflow", "overflow", "invalid", "divbyzero", "elements")

    def __init__(self):
        self.reset()

    def reset(self):
        for name in FLAG_NAMES:
            setattr(self, name, 0)
        self.elements = 0

    def _add_counts(self, counts: np.ndarray, n: int):
        tot = counts.sum(axis=0) if counts.ndim == 2 else counts
        for k, name in enumerate(FLAG_NAMES):
            setattr(self, name, getattr(self, name) + int(tot[k]))
        self.elements += int(n)

    def any(self, *names: str) -> bool:
        """True if any of the named flags (all flags when none named) was raised."""
        for name in names or FLAG_NAMES:
            if name not in FLAG_NAMES:
                raise ValueError(f"unknown flag {name!r}; accepted: {', '.join(FLAG_NAMES)}")
            if getattr(self, name):
                return True
        return False

    @property
    def found_inf(self) -> bool:
        """Overflow or invalid was raised: what a loss scaler treats as a non-finite gradient."""
        return bool(self.overflow or self.invalid or self.divbyzero)

    def as_dict(self) -> dict:
        d = {name: getattr(self, name) for name in FLAG_NAMES}
        d["elements"] = self.elements
        return d

    def __repr__(self):
        inner = ", ".join(f"{k}={v}" for k, v in self.as_dict().items())
        return f"Flags({inner})"
