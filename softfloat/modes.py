"""Rounding modes: a small enum with stable integer codes, and name parsing.

Kernels receive the plain integer code; the Python API accepts the enum, its short name or a
readable alias ("nearest", "toward_zero", "stochastic", ...).  Imports only the standard library.
"""

from __future__ import annotations

from enum import IntEnum

__all__ = ["Mode", "parse_mode", "MODE_ALIASES", "DETERMINISTIC_MODES"]


class Mode(IntEnum):
    """Rounding modes.  The codes are stable: kernels and saved configs rely on them."""

    RNE = 0  #: round to nearest, ties to even (IEEE default)
    RNA = 1  #: round to nearest, ties away from zero
    RTZ = 2  #: toward zero (truncation of the magnitude)
    RUP = 3  #: toward +infinity
    RDN = 4  #: toward -infinity
    RTO = 5  #: round to odd: truncate, then set the last bit if anything was lost
    SR = 6   #: stochastic: up with probability (distance to the lower neighbour) / ulp
    RHU = 7  #: round to nearest, ties toward +infinity ("round half up"; DFP-16's "biased")

    @property
    def short(self) -> str:
        return self.name.lower()


DETERMINISTIC_MODES = (Mode.RNE, Mode.RNA, Mode.RTZ, Mode.RUP, Mode.RDN, Mode.RTO, Mode.RHU)

MODE_ALIASES = {
    Mode.RNE: ("rne", "nearest", "nearest_even", "ties_to_even", "round_to_nearest_even", "rn"),
    Mode.RNA: ("rna", "nearest_away", "ties_away", "ties_to_away", "round_to_nearest_away"),
    Mode.RTZ: ("rtz", "rz", "toward_zero", "towards_zero", "truncate", "trunc", "chop"),
    Mode.RUP: ("rup", "ru", "up", "toward_positive", "towards_positive", "ceil", "upward"),
    Mode.RDN: ("rdn", "rd", "down", "toward_negative", "towards_negative", "floor", "downward"),
    Mode.RTO: ("rto", "ro", "odd", "round_to_odd", "von_neumann"),
    Mode.SR: ("sr", "stochastic", "stochastic_rounding"),
    # Ties toward +inf: the cheap hardware rounding (x + 2^(s-1)) >> s on two's complement
    # integers, which DFP-16 calls "biased" (docs/dfp16.md).
    Mode.RHU: ("rhu", "half_up", "round_half_up", "ties_up", "ties_toward_positive", "biased"),
}
_LOOKUP = {alias: mode for mode, names in MODE_ALIASES.items() for alias in names}


def parse_mode(mode) -> Mode:
    """Return the :class:`Mode` for an enum, an int code or a (case-insensitive) name."""
    if isinstance(mode, Mode):
        return mode
    if isinstance(mode, str):
        key = mode.strip().lower().replace("-", "_").replace(" ", "_")
        if key in _LOOKUP:
            return _LOOKUP[key]
    elif isinstance(mode, int) and not isinstance(mode, bool) and 0 <= mode <= 7:
        return Mode(mode)
    accepted = "; ".join(f"{m.short}: {', '.join(a[1:])}" for m, a in MODE_ALIASES.items())
    raise ValueError(f"unknown rounding mode {mode!r}; accepted names (with aliases): {accepted}")
