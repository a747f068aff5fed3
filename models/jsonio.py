"""JSON output that strict readers accept: :func:`json_safe` turns numpy scalars and arrays into
Python values and non-finite floats into the strings "nan", "inf", "-inf" (json.dump would write
the non-standard NaN/Infinity tokens).

Imports the standard library and numpy only.
"""

from __future__ import annotations

import math

import numpy as np

__all__ = ["json_safe"]


def json_safe(obj):
    """A copy of ``obj`` that json.dump accepts without NaN/Infinity extensions."""
    if isinstance(obj, dict):
        return {str(k): json_safe(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [json_safe(v) for v in obj]
    if isinstance(obj, np.ndarray):
        return json_safe(obj.tolist())
    if isinstance(obj, (np.bool_, bool)):
        return bool(obj)
    if isinstance(obj, (np.integer,)):
        return int(obj)
    if isinstance(obj, (float, np.floating)):
        v = float(obj)
        if math.isnan(v):
            return "nan"
        if math.isinf(v):
            return "inf" if v > 0 else "-inf"
        return v
    return obj
