"""Atomic, checksummed checkpoints: write to a temporary file in the same directory, fsync, then
rename; on load, verify a SHA-256 checksum before anything is unpickled.

Provides :func:`save_checkpoint` and :func:`load_checkpoint`.  A checkpoint is a nested structure
of dicts, lists, tuples, str, int, float, bool, None, numpy arrays and numpy scalars (weights,
master weights, optimizer moments, scaler state, random generator states, step counters).  It is
stored with :mod:`pickle` and read back with an unpickler that only admits those types, so a
checkpoint file cannot run code when loaded.

File format, version 2 (written since checksums were added): one ASCII header line, then the
payload (the pickled state)::

    mpemu-checkpoint v2 sha256=<64 hex digits of SHA-256(payload)> bytes=<payload length>\n

The loader checks, in this order, the header's shape, that the payload has exactly the length
the header states (a truncated or extended file is refused with both numbers), and that its
SHA-256 equals the header's (any bit flip in the payload changes the digest; one in the header
breaks its shape, its length or its digest).  Every failure is a :class:`CheckpointError` whose
message starts with the file's path, so a damaged checkpoint is never trained on.

Version 1 (before checksums) is a bare pickle of ``{"magic", "version": 1, "state"}``.  Such
files still load -- the restricted unpickler makes that safe against code, and resuming old runs
matters more than refusing them -- but their integrity cannot be verified: the loader logs a
warning saying so, and the next save of the run writes version 2.

Why this is safe against Ctrl-C and crashes: ``os.replace`` is atomic on POSIX and Windows, so the
checkpoint path always names either the previous complete file or the new complete file; the data
is fsync'ed before the rename (and the directory after it) so a power loss cannot leave a renamed
but empty file.  An interrupted save removes its ``.tmp-*`` file.  The writing is
models.atomic's, the one atomic writer of the project (history.json, config.json, sweep and
reproduce results use it too).

Imports the standard library, numpy and models.atomic only.
"""

from __future__ import annotations

import hashlib
import io
import logging
import os
import pickle
import re

import numpy as np

from .atomic import write_atomic

__all__ = ["FORMAT_VERSION", "CheckpointError", "arrays_equal", "load_checkpoint",
           "save_checkpoint"]

FORMAT_VERSION = 2
_MAGIC = "mpemu-checkpoint"
#: The header line of version 2; the digest is lower-case hex, the length a decimal integer.
_HEADER = re.compile(rb"mpemu-checkpoint v2 sha256=([0-9a-f]{64}) bytes=(0|[1-9][0-9]{0,18})\n")
#: Longest possible header: the fixed text plus 64 hex digits and up to 19 length digits.
_HEADER_MAX = len(b"mpemu-checkpoint v2 sha256= bytes=\n") + 64 + 19
_PICKLE_PROTO = b"\x80"      # the first byte of a pickle of protocol >= 2: a version-1 file

log = logging.getLogger("models.checkpoint")

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
    """A checkpoint file is truncated, corrupted (checksum mismatch), of another format or
    version, or holds disallowed types.  The message starts with the file's path."""


class _SafeUnpickler(pickle.Unpickler):
    def find_class(self, module, name):
        if (module, name) in _ALLOWED or (module == "numpy.dtypes" and name.endswith("DType")):
            return super().find_class(module, name)
        raise CheckpointError(f"checkpoint refers to {module}.{name}, which is not an allowed "
                              "type (arrays, numbers, strings and plain containers only)")


def save_checkpoint(path, state):
    """Atomically write ``state`` (a dict) to ``path`` in format version 2; returns the path."""
    if not isinstance(state, dict):
        raise TypeError(f"checkpoint state must be a dict, got {type(state).__name__}")
    buf = io.BytesIO()
    pickle.dump(state, buf, protocol=4)
    payload = buf.getvalue()
    digest = hashlib.sha256(payload).hexdigest()
    header = f"{_MAGIC} v2 sha256={digest} bytes={len(payload)}\n".encode("ascii")
    return write_atomic(path, header + payload)


def _unpickle(path, raw):
    try:
        return _SafeUnpickler(io.BytesIO(raw)).load()
    except CheckpointError as exc:
        raise CheckpointError(f"{path}: {exc}") from None
    except Exception as exc:  # noqa: BLE001 (truncated, or not a pickle at all: any error)
        raise CheckpointError(f"{path}: not a readable checkpoint ({type(exc).__name__}: "
                              f"{exc})") from None


def _verified_payload(path, raw):
    """The payload of a version-2 file after its header, length and checksum were checked."""
    end = raw.find(b"\n", 0, _HEADER_MAX)
    match = _HEADER.fullmatch(raw[:end + 1]) if end >= 0 else None
    if match is None:
        version = re.match(rb"mpemu-checkpoint v([0-9]+) ", raw[:_HEADER_MAX])
        if version and int(version.group(1)) > FORMAT_VERSION:
            raise CheckpointError(f"{path}: checkpoint format version {int(version.group(1))} "
                                  f"was written by a newer mpemu; this code reads versions 1 "
                                  f"and {FORMAT_VERSION}")
        raise CheckpointError(f"{path}: not a readable checkpoint (damaged header: expected "
                              f"'{_MAGIC} v2 sha256=<64 hex digits> bytes=<length>' on the "
                              "first line)")
    digest, length = match.group(1).decode("ascii"), int(match.group(2))
    payload = raw[end + 1:]
    if len(payload) != length:
        what = "truncated" if len(payload) < length else "extended"
        raise CheckpointError(f"{path}: not a readable checkpoint ({what}: the header states "
                              f"{length} payload bytes, the file holds {len(payload)})")
    actual = hashlib.sha256(payload).hexdigest()
    if actual != digest:
        raise CheckpointError(f"{path}: not a readable checkpoint (checksum mismatch: the "
                              f"payload's SHA-256 is {actual}, the header states {digest}); "
                              "the file is corrupted, refusing to load it")
    return payload


def load_checkpoint(path):
    """Read a checkpoint written by :func:`save_checkpoint` (format version 2, checksum
    verified; or the unchecked version 1, see the module docstring); returns its state dict."""
    path = os.fspath(path)
    if not os.path.isfile(path):
        raise FileNotFoundError(f"checkpoint not found: {path}")
    with open(path, "rb") as fh:
        raw = fh.read()
    if raw.startswith(_MAGIC.encode("ascii") + b" v"):
        state = _unpickle(path, _verified_payload(path, raw))
        if not isinstance(state, dict):
            raise CheckpointError(f"{path}: the checkpoint's payload is a "
                                  f"{type(state).__name__}, not a state dict")
        return state
    if not raw.startswith(_PICKLE_PROTO):
        raise CheckpointError(f"{path}: not an mpemu checkpoint (it starts with neither "
                              f"'{_MAGIC} v2' nor a pickle of format version 1)")
    payload = _unpickle(path, raw)
    if not isinstance(payload, dict) or payload.get("magic") != _MAGIC:
        raise CheckpointError(f"{path}: not an mpemu checkpoint (missing magic {_MAGIC!r})")
    if payload.get("version") != 1:
        raise CheckpointError(f"{path}: checkpoint format version {payload.get('version')!r} "
                              f"in a version-1 layout; this code reads versions 1 and "
                              f"{FORMAT_VERSION}")
    log.warning("%s: checkpoint format version 1 has no checksum: loaded without an integrity "
                "check (the next save writes version %d, with one)", path, FORMAT_VERSION)
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
