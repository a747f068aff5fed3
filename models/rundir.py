"""Run directories: what ``mpemu train --out RUN_DIR`` may write into, and what ``--overwrite``
may delete.

Provides :func:`plan_run_dir` (the checks, no side effects), :func:`prepare_run_dir` (the checks,
then the deletion ``--overwrite`` asks for) and :func:`run_files`.  A run directory holds the
files a run writes and nothing else of ours: ``config.json``, ``history.json`` and
``checkpoint.ckpt`` (written by ``train``), ``hist_*.png`` (written there by ``mpemu histogram
RUN_DIR``) and, after a crash in the middle of a save, a ``.tmp-*.ckpt`` leftover.  The rules:

* ``--out`` naming an existing file (not a directory) is an error;
* an existing directory that already holds a run (any of the three run files) is refused unless
  ``--resume`` continues it or ``--overwrite`` starts afresh;
* ``--overwrite`` deletes the run files listed above, and only those (other files are left);
  a non-empty directory that does not look like a run directory (none of the three run files)
  is refused rather than touched;
* an empty or new directory is always fine.

Errors are :class:`RunDirError` (a ValueError: the CLI exits with code 2) naming the directory
and the ways out.  Imports the standard library only.
"""

from __future__ import annotations

import fnmatch
import os

__all__ = ["MARKERS", "RUN_FILE_PATTERNS", "RunDirError", "plan_run_dir", "prepare_run_dir",
           "run_files"]

#: Files whose presence makes a directory a run directory (written by every ``train``).
MARKERS = ("config.json", "history.json", "checkpoint.ckpt")
#: Everything a run writes into its directory: what ``--overwrite`` deletes.
RUN_FILE_PATTERNS = MARKERS + ("hist_*.png", ".tmp-*.ckpt")


class RunDirError(ValueError):
    """A run directory cannot be used as asked; the message names it and the ways out."""


def run_files(path):
    """The files in directory ``path`` that a run writes (sorted names; sub-directories and
    other files are never included)."""
    return sorted(name for name in os.listdir(path)
                  if os.path.isfile(os.path.join(path, name))
                  and any(fnmatch.fnmatchcase(name, pat) for pat in RUN_FILE_PATTERNS))


def plan_run_dir(path, *, resume=False, overwrite=False):
    """Check ``path`` before a run writes into it, without touching it; returns the names of
    the files ``--overwrite`` will delete (empty otherwise).  See the module docstring."""
    path = os.fspath(path)
    if resume and overwrite:
        raise RunDirError("--resume continues the run in the directory and --overwrite deletes "
                          "it: give one or the other")
    if not os.path.exists(path):
        return []
    if not os.path.isdir(path):
        raise RunDirError(f"--out {path} is a file, not a directory; name a directory for the "
                          "run (it is created if missing)")
    if resume:
        return []       # Trainer.resume reads the checkpoint and says if it is missing
    markers = [m for m in MARKERS if os.path.isfile(os.path.join(path, m))]
    if not overwrite:
        if markers:
            raise RunDirError(
                f"run directory {path} already holds a run ({', '.join(markers)}); continue it "
                f"with --resume, or start afresh with --overwrite (deletes its checkpoint, "
                f"history and figures)")
        return []
    if not markers:
        if os.listdir(path):
            raise RunDirError(
                f"--overwrite: {path} does not look like a run directory (it has none of "
                f"{', '.join(MARKERS)}), so nothing in it is deleted; name a new or empty "
                "directory, or a run directory")
        return []
    return run_files(path)


def prepare_run_dir(path, *, resume=False, overwrite=False):
    """:func:`plan_run_dir`, then delete the files it names; returns their names."""
    doomed = plan_run_dir(path, resume=resume, overwrite=overwrite)
    for name in doomed:
        os.unlink(os.path.join(os.fspath(path), name))
    return doomed
