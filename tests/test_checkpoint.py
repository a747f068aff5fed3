"""models.checkpoint, format version 2: a SHA-256 checksum of the payload in a small header;
every bit flip, truncation and extension of a checkpoint is refused with an error naming the
file; version-1 checkpoints (no checksum) still load, with a warning."""

from __future__ import annotations

import pickle

import numpy as np
import pytest

from models import checkpoint as ckpt


def _small_state():
    return {"step": 3, "w": np.arange(6, dtype=np.float32).reshape(2, 3), "scale": 1024.0}


def test_checkpoint_header_holds_the_payload_checksum(tmp_path):
    import hashlib

    path = ckpt.save_checkpoint(tmp_path / "c.ckpt", _small_state())
    raw = open(path, "rb").read()
    head, payload = raw.split(b"\n", 1)
    assert head == (f"mpemu-checkpoint v2 sha256={hashlib.sha256(payload).hexdigest()} "
                    f"bytes={len(payload)}").encode()
    assert ckpt.arrays_equal(ckpt.load_checkpoint(path), _small_state())


def test_every_bit_flip_and_every_truncation_is_refused(tmp_path):
    path = tmp_path / "c.ckpt"
    ckpt.save_checkpoint(path, _small_state())
    good = path.read_bytes()
    bad = tmp_path / "bad.ckpt"
    for i in range(len(good)):
        for bit in range(8):
            flipped = bytearray(good)
            flipped[i] ^= 1 << bit
            bad.write_bytes(bytes(flipped))
            with pytest.raises(ckpt.CheckpointError, match="^.*bad.ckpt: "):
                ckpt.load_checkpoint(bad)
    for n in range(len(good)):
        bad.write_bytes(good[:n])
        with pytest.raises(ckpt.CheckpointError, match="bad.ckpt: not"):
            ckpt.load_checkpoint(bad)
    bad.write_bytes(good + b"\0")
    with pytest.raises(ckpt.CheckpointError, match=r"extended: the header states \d+ payload "
                                                   r"bytes, the file holds \d+"):
        ckpt.load_checkpoint(bad)


def test_corrupted_payload_names_the_file_and_the_checksums(tmp_path):
    path = tmp_path / "c.ckpt"
    ckpt.save_checkpoint(path, _small_state())
    raw = bytearray(path.read_bytes())
    raw[-20] ^= 0x10
    path.write_bytes(bytes(raw))
    with pytest.raises(ckpt.CheckpointError, match=r"c.ckpt: not a readable checkpoint "
                                                   r"\(checksum mismatch: the payload's SHA-256 "
                                                   r"is [0-9a-f]{64}, the header states"):
        ckpt.load_checkpoint(path)


def test_version_1_checkpoints_still_load_without_a_check(tmp_path, caplog):
    """The previous format, a bare pickle with no checksum, still loads (and says so); a bit
    flip in it can go unnoticed, which is what version 2 fixes."""
    path = tmp_path / "old.ckpt"
    path.write_bytes(pickle.dumps({"magic": "mpemu-checkpoint", "version": 1,
                                   "state": _small_state()}, protocol=4))
    with caplog.at_level("WARNING", logger="models.checkpoint"):
        state = ckpt.load_checkpoint(path)
    assert ckpt.arrays_equal(state, _small_state())
    assert "format version 1 has no checksum" in caplog.text
    raw = bytearray(path.read_bytes())
    i = raw.index(np.float32(5.0).tobytes())          # the last weight, 5.0
    raw[i + 3] ^= 0x01
    path.write_bytes(bytes(raw))
    assert ckpt.load_checkpoint(path)["w"][1, 2] != 5.0     # undetected in version 1
    newer = tmp_path / "new.ckpt"
    newer.write_bytes(b"mpemu-checkpoint v3 sha256=00 bytes=0\n")
    with pytest.raises(ckpt.CheckpointError, match="format version 3 was written by a newer"):
        ckpt.load_checkpoint(newer)
