"""models.atomic: a write that is interrupted leaves the old file and no temporary file; the new
file gets the umask's mode; checkpoints, history.json and config.json go through it."""

from __future__ import annotations

import os
import stat

import pytest

from models import atomic
from models.atomic import TMP_PREFIX, atomic_path, write_atomic


def test_text_and_bytes_round_trip(tmp_path):
    p = tmp_path / "sub" / "a.txt"
    assert write_atomic(p, "x\ny\n") == str(p)
    assert p.read_bytes() == b"x\ny\n"              # "\n" kept, UTF-8, directory created
    write_atomic(p, b"\x00\xff")
    assert p.read_bytes() == b"\x00\xff"
    with pytest.raises(TypeError, match="str or bytes"):
        write_atomic(p, 3)
    assert p.read_bytes() == b"\x00\xff"


def test_an_interrupted_write_keeps_the_old_file_and_leaves_no_temporary(tmp_path):
    p = tmp_path / "r.json"
    write_atomic(p, "old")
    for exc in (KeyboardInterrupt, OSError):
        with pytest.raises(exc):
            with atomic_path(p) as tmp:
                with open(tmp, "w") as fh:
                    fh.write("half of the new")
                raise exc()
        assert p.read_text() == "old"
        assert not [n for n in os.listdir(tmp_path) if n.startswith(TMP_PREFIX)]


def test_mode_follows_the_umask_not_mkstemp(tmp_path):
    p = tmp_path / "m.txt"
    write_atomic(p, "x")
    want = 0o666 & ~atomic._UMASK
    assert stat.S_IMODE(os.stat(p).st_mode) == want
    assert want != 0o600                           # what mkstemp alone would have given


def test_run_files_are_written_through_it(tmp_path, monkeypatch):
    """Checkpoint, config.json and history.json of a trainer run all pass through write_atomic
    (a failure injected there reaches the caller and leaves nothing half-written)."""
    from models import checkpoint, trainer

    seen = []
    real = atomic.write_atomic

    def spy(path, data):
        seen.append(os.path.basename(path))
        return real(path, data)

    monkeypatch.setattr(checkpoint, "write_atomic", spy)
    monkeypatch.setattr(trainer, "write_atomic", spy)
    cfg = {"model": {"type": "mlp", "hidden": [8]}, "data": {"name": "blobs"},
           "budget": {"steps": 3, "eval_every": 3, "log_every": 3}, "seed": 0}
    trainer.Trainer(cfg, run_dir=str(tmp_path / "run"), progress=False).fit()
    assert {"config.json", "history.json", "checkpoint.ckpt"} <= set(seen)
