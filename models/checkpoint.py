"""Atomic checkpoints: write to a temporary file in the same directory, fsync, then rename.

Provides :func:`save_checkpoint` and :func:`load_checkpoint`.  A checkpoint is a nested structure
of dicts, lists, tuples, str, int, float, bool, None, numpy arrays and numpy scalars (weights,
master weights, optimizer moments, scaler state, random generator states, step counters).  It is
stored with :mod:`pickle` and read back with an unpickler that only admits those types, so a
checkpoint file cannot run code when loaded.

Why this is safe against Ctrl-C and crashes: ``os.replace`` is atomic on POSIX and Windows, so the
checkpoint path always names either the previous complete file or the new complete file; the data
is fsync'ed before the rename (and the directory after it) so a power loss cannot leave a renamed
but empty file.  An interrupted save leaves only a ``.tmp-*`` file, which is removed.

Imports the standard library and numpy only.
"""

from __future__ import annotations

import io
import os
import pickle
import tempfile

import numpy as np

__all__ = ["FORMAT_VERSION", "CheckpointError", "arrays_equal", "load_checkpoint",
           "save_checkpoint"]

FORMAT_VERSION = 1
_MAGIC = "mpemu-checkpoint"

# (module, name) pairs the loader accepts: arrays, dtypes, scalars, plain containers.
_ALLOWED = {
    ("numpy", "ndarray"), ("numpy", "dtype"),
    ("numpy.core.multiarray", "_reconstruct"), ("numpy.core.multiarray", "scalar"),
    ("numpy._core.multiarray", "_reconstruct"), ("numpy._core.multiarray", "scalar"),
    ("numpy.core.numeric", "_frombuffer"), ("numpy._core.numeric", "_frombuffer"),
    ("builtins", "dict"), ("builtins", "list"), ("builtins", "tuple"), ("builtins", "set"),
    ("builtins", "frozenset"), ("builtins", "complex"), ("builtins", "bytearray"),
    ("collections", "OrderedDict"), ("_codecs", "encode"),
}


class CheckpointError(ValueError):
    """A checkpoint file is missing, truncated, of another format or holds disallowed types."""


class _SafeUnpickler(pickle.Unpickler):
    def find_class(self, module, name):
        if (module, name) in _ALLOWED or (module == "numpy.dtypes" and name.endswith("DType")):
            return super().find_class(module, name)
        raise CheckpointError(f"checkpoint refers to {module}.{name}, which is not an allowed "
                              "type (arrays, numbers, strings and plain containers only)")


def save_checkpoint(path, state):
    """Atomically write ``state`` (a dict) to ``path``; returns the path."""
    if not isinstance(state, dict):
        raise TypeError(f"checkpoint state must be a dict, got {type(state).__name__}")
    path = os.fspath(path)
    directory = os.path.dirname(os.path.abspath(path))
    os.makedirs(directory, exist_ok=True)
    payload = {"magic": _MAGIC, "version": FORMAT_VERSION, "state": state}
    fd, tmp = tempfile.mkstemp(prefix=".tmp-", suffix=".ckpt", dir=directory)
    try:
        with os.fdopen(fd, "wb") as fh:
            pickle.dump(payload, fh, protocol=4)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:  # including KeyboardInterrupt: never leave the temp file behind
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise
    try:  # make the rename itself durable; not every platform can open a directory
        dfd = os.open(directory, os.O_RDONLY)
    except OSError:
        return path
    try:
        os.fsync(dfd)
    except OSError:
        pass
    finally:
        os.close(dfd)
    return path


def load_checkpoint(path):
    """Read a checkpoint written by :func:`save_checkpoint`; returns its state dict."""
    path = os.fspath(path)
    if not os.path.isfile(path):
        raise FileNotFoundError(f"checkpoint not found: {path}")
    with open(path, "rb") as fh:
        raw = fh.read()
    try:
        payload = _SafeUnpickler(io.BytesIO(raw)).load()
    except CheckpointError as exc:
        raise CheckpointError(f"{path}: {exc}") from None
    except Exception as exc:  # noqa: BLE001 (truncated, or not a pickle at all: any error)
        raise CheckpointError(f"{path}: not a readable checkpoint ({type(exc).__name__}: "
                              f"{exc})") from None
    if not isinstance(payload, dict) or payload.get("magic") != _MAGIC:
        raise CheckpointError(f"{path}: not an mpemu checkpoint (missing magic {_MAGIC!r})")
    if payload.get("version") != FORMAT_VERSION:
        raise CheckpointError(f"{path}: checkpoint format version {payload.get('version')}, "
                              f"this code reads version {FORMAT_VERSION}")
    return payload["state"]


def arrays_equal(a, b):
    """Bitwise equality of two checkpoint structures (arrays compared by their bytes)."""
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(arrays_equal(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(arrays_equal(x, y) for x, y in zip(a, b))
    if isinstance(a, (np.ndarray, np.generic)) or isinstance(b, (np.ndarray, np.generic)):
        a, b = np.asarray(a), np.asarray(b)
        return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()
    if isinstance(a, float) and isinstance(b, float):
        return np.float64(a).tobytes() == np.float64(b).tobytes()
    return type(a) is type(b) and a == b
