"""Atomic file writes: the one way every file of a run, a sweep or a report is written.

Provides :func:`atomic_path` (a context manager yielding a temporary path beside the target,
renamed onto it on success) and :func:`write_atomic` (text).  Readers see the old file or the
new one, never a part of either, whatever stops the writer (Ctrl-C, a killed worker, a full
disk): the data go to a temporary file in the same directory, which is flushed to disk
(fsync) and then renamed onto the target with ``os.replace`` -- atomic on POSIX and Windows
when both names are on one file system, which the same directory guarantees.  The directory
is fsynced after the rename where the platform allows it, so that the rename itself survives
a crash.  On any exception (KeyboardInterrupt included) the temporary file is removed and the
target is left as it was.

The new file gets the mode a plain ``open(path, "w")`` would give it (0666 less the umask):
``tempfile.mkstemp`` creates 0600 files, which would make results unreadable to a group that
shares a results directory.  Temporary names start with ``.tmp-`` (callers that clean up after
a killed writer look for them).

Imports the standard library only.
"""

from __future__ import annotations

import contextlib
import os
import tempfile

__all__ = ["TMP_PREFIX", "atomic_path", "write_atomic"]

#: Prefix of the temporary files (a writer killed by SIGKILL can leave one behind).
TMP_PREFIX = ".tmp-"

_UMASK = os.umask(0o022)    # read it (the only way) and put it back at once
os.umask(_UMASK)


def _fsync_dir(directory):
    """Make a rename in ``directory`` durable; not every platform can open a directory."""
    try:
        dfd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(dfd)
    except OSError:
        pass
    finally:
        os.close(dfd)


@contextlib.contextmanager
def atomic_path(path):
    """Yield a temporary path beside ``path``; when the block ends without an exception, fsync
    the file and rename it onto ``path``.  The caller writes the temporary path (by name: any
    library that writes files, matplotlib included, can)."""
    path = os.fspath(path)
    directory = os.path.dirname(os.path.abspath(path))
    os.makedirs(directory, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=TMP_PREFIX, suffix=os.path.splitext(path)[1],
                               dir=directory)
    os.close(fd)
    try:
        yield tmp
        with open(tmp, "rb+") as fh:
            os.fsync(fh.fileno())
        os.chmod(tmp, 0o666 & ~_UMASK)      # mkstemp makes 0600; give what open() would
        os.replace(tmp, path)
    except BaseException:   # KeyboardInterrupt included: never leave the temporary file
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
    _fsync_dir(directory)


def write_atomic(path, data):
    """Write ``data`` to ``path`` atomically: a str as UTF-8 with its "\\n" line ends kept, bytes
    as they are.  Returns the path (a str)."""
    if isinstance(data, str):
        with atomic_path(path) as tmp, open(tmp, "w", encoding="utf-8", newline="") as fh:
            fh.write(data)
    elif isinstance(data, (bytes, bytearray, memoryview)):
        with atomic_path(path) as tmp, open(tmp, "wb") as fh:
            fh.write(data)
    else:
        raise TypeError(f"write_atomic writes str or bytes, got {type(data).__name__}")
    return os.fspath(path)
