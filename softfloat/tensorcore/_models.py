"""Tensor Core model records and the published presets (docs/tensorcore-models.md, sections 2-3).

Provides :class:`TCModel`, the parameter record of the block-FMA algorithm (block size ``K``,
fraction bits ``F`` kept at alignment, output rounding and fraction bits, input and accumulator
formats), the preset table ``PRESETS`` keyed by (device, input format, accumulator format),
:func:`get_model` and :func:`list_models`.

The output rounding is a softfloat.Mode (RTZ or RNE, the two the hardware shows); the names
"rz" and "rne" (and every alias softfloat.parse_mode accepts) are accepted.
A model is data only; the kernels that evaluate it live in ``_tile.py``, ``_certify.py`` and
``_superacc.py``.  Imports the standard library and softfloat.formats / modes only (no numba,
no kernels).
"""

from __future__ import annotations

from dataclasses import dataclass

from ..formats import Format, get_format
from ..modes import Mode, parse_mode

__all__ = ["TCModel", "PRESETS", "DEVICES", "UNRESOLVED", "get_model", "list_models",
           "IDEAL_INPUTS"]

#: Output roundings a model may use: the two the hardware shows (RZ for fp32 output, RNE for
#: fp16 output; spec section 3).
OUT_ROUNDINGS = (Mode.RTZ, Mode.RNE)

#: Largest significand product that is still exact in a float64 (53 bits): two inputs of
#: precision p give at most 2p bits, so p <= 26.
_MAX_IN_PRECISION = 26


@dataclass(frozen=True)
class TCModel:
    """One block-FMA model: D = chained BLOCK_STEP over k (spec section 2).

    Parameters
    ----------
    name : str
        Display name ("a100", "h100", or anything for a custom record).
    block : int or None
        K, the number of products fused in one step.  None: the whole dot product is one step.
    frac_bits : int or None
        F, the fraction bits kept below the largest alignment exponent; every aligned addend is
        truncated toward zero at F bits.  None: no truncation (exact alignment).
    out_round : softfloat.Mode RTZ or RNE (or a name: "rz", "rtz", "rne", ...)
        Rounding of the block result into the accumulator format; stored as the Mode.
    in_format, acc_format : Format or preset name
        Input format of A and B, and format of C, D and of the running accumulator.
    out_frac : int or None
        Fraction bits of each block result (None: acc_format.man_bits).  The fp8 paths use 13
        ("e8m13": an fp32 word whose 10 low mantissa bits are zero).
    """

    name: str
    block: int | None
    frac_bits: int | None
    out_round: Mode
    in_format: Format
    acc_format: Format
    out_frac: int | None = None

    def __post_init__(self):
        object.__setattr__(self, "in_format", get_format(self.in_format))
        object.__setattr__(self, "acc_format", get_format(self.acc_format))
        inf, acc = self.in_format, self.acc_format
        for attr in ("block", "frac_bits", "out_frac"):
            v = getattr(self, attr)
            if v is not None and (isinstance(v, bool) or not isinstance(v, int)):
                raise TypeError(f"TCModel {attr} must be an int or None, got {v!r}")
        if self.block is not None and self.block < 1:
            raise ValueError(f"TCModel block must be >= 1 or None, got {self.block}")
        if self.frac_bits is not None and not 0 <= self.frac_bits <= 50:
            raise ValueError(f"TCModel frac_bits must be in 0..50 or None, got {self.frac_bits}")
        try:
            rnd = parse_mode(self.out_round)
        except ValueError:
            rnd = None
        if rnd not in OUT_ROUNDINGS:
            raise ValueError(f"TCModel out_round must be Mode.RTZ ('rz') or Mode.RNE ('rne'), "
                             f"got {self.out_round!r}")
        object.__setattr__(self, "out_round", rnd)
        if self.out_frac is None:
            object.__setattr__(self, "out_frac", acc.man_bits)
        if not 0 <= self.out_frac <= acc.man_bits:
            raise ValueError(f"TCModel out_frac must be in 0..{acc.man_bits} "
                             f"(the accumulator's fraction bits), got {self.out_frac}")
        # The kernels carry every value in float32 carriers and every product exactly in a
        # float64; the accumulator needs Inf and subnormals (the hardware has both).
        if inf.carrier_dtype.itemsize != 4 or inf.precision > _MAX_IN_PRECISION:
            raise ValueError(f"TCModel in_format {inf.name} must fit a float32 carrier "
                             "(fp32, tf32, fp16, bf16, fp8 and smaller custom formats)")
        if acc.carrier_dtype.itemsize != 4 or acc.inf_nan != "ieee" or not acc.subnormals:
            raise ValueError(f"TCModel acc_format {acc.name} must be an IEEE-style format with "
                             "subnormals and a float32 carrier (fp32, fp16, bf16, ...)")
        if self.frac_bits is not None and self.block is not None:
            # Exactness of the float64 fixed-point sum: an aligned product is < 2^(F+2), c is
            # < 2^(F+1), so K products plus c stay below (K+1) 2^(F+2) <= 2^53.
            if (self.block + 1) << (self.frac_bits + 2) > 1 << 53:
                raise ValueError(f"TCModel: block {self.block} with frac_bits {self.frac_bits} "
                                 "exceeds the exact 53-bit fixed-point sum; need "
                                 "(block + 1) * 2^(frac_bits + 2) <= 2^53")

    @property
    def rne(self) -> bool:
        """True for RNE output rounding, False for RTZ."""
        return self.out_round == Mode.RNE

    @property
    def is_exact(self) -> bool:
        """True when no alignment truncation happens (frac_bits None)."""
        return self.frac_bits is None

    def __repr__(self):
        return (f"TCModel(name={self.name!r}, block={self.block}, frac_bits={self.frac_bits}, "
                f"out_round=Mode.{self.out_round.name}, in_format={self.in_format.name!r}, "
                f"acc_format={self.acc_format.name!r}, out_frac={self.out_frac})")

    def describe(self) -> str:
        k = "inf" if self.block is None else str(self.block)
        f = "inf" if self.frac_bits is None else str(self.frac_bits)
        return (f"{self.name}: {self.in_format.name} -> {self.acc_format.name}, K={k}, F={f}, "
                f"{self.out_round.short.upper()} to {self.out_frac} fraction bits")


# ----- presets (spec section 3) -------------------------------------------------------------
# F = 23 + neab (extra alignment bits): V100 0, Turing/Ampere/Ada 1, Hopper/Blackwell 2; the fp8
# paths keep 13 = 23 - 10 bits (KM neab = -10, MMA-Sim f32_e8m13).
_FP8 = ("e4m3fn", "e5m2")
IDEAL_INPUTS = ("fp16", "bf16", "tf32", "e4m3fn", "e5m2", "fp32")

DEVICES = ("ideal-fp32", "ideal-fp16", "v100", "t4", "a100", "ada", "h100", "b200")


def _table():
    rows = {}

    def add(dev, ins, acc, K, F, rnd, out_frac=None):
        for i in ins:
            rows[(dev, i, acc)] = TCModel(dev, K, F, rnd, i, acc, out_frac)

    add("ideal-fp32", IDEAL_INPUTS, "fp32", None, None, "rne")
    add("ideal-fp16", IDEAL_INPUTS, "fp16", None, None, "rne")
    add("v100", ("fp16",), "fp32", 4, 23, "rz")
    add("v100", ("fp16",), "fp16", 4, 23, "rne")
    add("t4", ("fp16",), "fp32", 8, 24, "rz")          # K = 8 rests on MMA-Sim alone (8.4)
    add("t4", ("fp16",), "fp16", 8, 24, "rne")
    for dev in ("a100", "ada"):
        add(dev, ("fp16", "bf16"), "fp32", 8, 24, "rz")
        add(dev, ("fp16",), "fp16", 8, 24, "rne")
        add(dev, ("tf32",), "fp32", 4, 24, "rz")
    add("ada", _FP8, "fp32", 16, 13, "rz", out_frac=13)
    add("ada", _FP8, "fp16", 16, 13, "rne")
    for dev in ("h100", "b200"):
        add(dev, ("fp16", "bf16"), "fp32", 16, 25, "rz")
        add(dev, ("fp16",), "fp16", 16, 25, "rne")
        add(dev, ("tf32",), "fp32", 8, 25, "rz")
    add("h100", _FP8, "fp32", 32, 13, "rz", out_frac=13)
    return rows


PRESETS: dict[tuple[str, str, str], TCModel] = _table()

#: Combinations the published data does not settle (spec section 8); asking for one raises.
UNRESOLVED = {
    **{("h100", i, "fp16"): "spec section 8.2: Hopper fp8 with fp16 accumulate matches no "
       "simple block-FMA variant of the published H100/H200 data" for i in _FP8},
    **{("b200", i, a): "spec section 8.3: B200 fp8 is unresolved (fp32 output matches one exact "
       "RNE rounding, not the KM K32/F25/RZ parameters; fp16 output is unexplained)"
       for i in _FP8 for a in ("fp32", "fp16")},
}

_DEVICE_ALIASES = {"ideal": "ideal-fp32", "ideal_fp32": "ideal-fp32", "ideal_fp16": "ideal-fp16",
                   "volta": "v100", "turing": "t4", "ampere": "a100", "a30": "a100",
                   "a2": "a100", "a40": "a100", "l40s": "ada", "rtx4090": "ada",
                   "hopper": "h100", "h200": "h100", "blackwell": "b200"}


def _device(name) -> str:
    if not isinstance(name, str):
        raise TypeError(f"model must be a preset name or a TCModel, got {type(name).__name__}")
    key = name.strip().lower()
    key = _DEVICE_ALIASES.get(key, key)
    if key not in DEVICES:
        raise ValueError(f"unknown Tensor Core model {name!r}; accepted: {', '.join(DEVICES)} "
                         f"(aliases: {', '.join(sorted(_DEVICE_ALIASES))}), or a TCModel record")
    return key


def get_model(name, in_format="fp16", acc_format=None) -> TCModel:
    """The preset for device ``name`` with the given input and accumulator formats.

    acc_format None means fp32, except for "ideal-fp16" (fp16).  Unsupported combinations raise
    ValueError listing the supported ones; the unresolved ones of spec section 8 say so.
    """
    if isinstance(name, TCModel):
        return name
    key = (name, in_format, acc_format)
    memo = all(x is None or isinstance(x, (str, Format)) for x in key)
    hit = _FOUND.get(key) if memo else None
    if hit is not None:
        return hit
    dev = _device(name)
    if acc_format is None:
        acc_format = "fp16" if dev == "ideal-fp16" else "fp32"
    fin, facc = get_format(in_format), get_format(acc_format)
    i, a = fin.name, facc.name
    if (dev, i, a) in UNRESOLVED:
        raise ValueError(f"model {dev} with {i} inputs and {a} accumulation is unresolved: "
                         f"{UNRESOLVED[(dev, i, a)]}; build a custom TCModel to experiment")
    if (dev, i, a) not in PRESETS:
        ok = ", ".join(f"{ii}->{aa}" for (d, ii, aa) in PRESETS if d == dev)
        raise ValueError(f"model {dev} has no {i} -> {a} mode; supported (inputs -> "
                         f"accumulator): {ok}")
    model = PRESETS[(dev, i, a)]
    if (fin, facc) != (model.in_format, model.acc_format):
        raise ValueError(f"model {dev}: the formats given ({fin!r}, {facc!r}) carry preset names "
                         "but differ from the presets; build a custom TCModel for them")
    if memo and len(_FOUND) < 1024:
        _FOUND[key] = model
    return model


#: get_model's answers (a call per GEMM: the lookup costs ~1-2 us, the resolution ~20 us), keyed
#: by the arguments' values (names, Format records), bounded.
_FOUND: dict = {}


def list_models() -> dict[str, list[tuple[str, str]]]:
    """Device name -> the (input format, accumulator format) pairs it supports."""
    out: dict[str, list[tuple[str, str]]] = {d: [] for d in DEVICES}
    for (d, i, a) in PRESETS:
        out[d].append((i, a))
    return out
