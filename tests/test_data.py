"""models.idx / models.data / models.corpus: the IDX loader on files written here byte by byte,
clear errors for missing and corrupt files, built-in datasets, seeded batching and its resume."""

from __future__ import annotations

import gzip
import struct

import numpy as np
import pytest

from models.corpus import CharVocab, python_corpus, synthetic_text
from models.data import BatchSampler, eval_batches, load_dataset
from models.idx import load_mnist_dir, read_idx, write_idx


def _idx_bytes(code, dims, payload):
    """An IDX file built by hand (independent of models.idx.write_idx)."""
    return struct.pack(">HBB", 0, code, len(dims)) + struct.pack(f">{len(dims)}I", *dims) + payload


def _write_mnist(tmp_path, n_train=6, n_test=4, gz=False, rows=5, cols=4):
    rng = np.random.default_rng(0)
    suffix = ".gz" if gz else ""
    files = {}
    for split, n in (("train", n_train), ("t10k", n_test)):
        img = rng.integers(0, 256, size=(n, rows, cols), dtype=np.uint8)
        lab = rng.integers(0, 10, size=n, dtype=np.uint8)
        for kind, arr, code in (("images-idx3", img, 0x08), ("labels-idx1", lab, 0x08)):
            raw = _idx_bytes(code, arr.shape, arr.tobytes())
            path = tmp_path / f"{split}-{kind}-ubyte{suffix}"
            path.write_bytes(gzip.compress(raw) if gz else raw)
        files[split] = (img, lab)
    return files


@pytest.mark.parametrize("gz", [False, True])
def test_mnist_dir_roundtrip(tmp_path, gz):
    files = _write_mnist(tmp_path, gz=gz)
    xtr, ytr, xte, yte = load_mnist_dir(tmp_path)
    img, lab = files["train"]
    assert xtr.dtype == np.float32 and xtr.shape == (6, 5, 4)
    np.testing.assert_array_equal(xtr, img.astype(np.float32) / np.float32(255))
    np.testing.assert_array_equal(ytr, lab)
    np.testing.assert_array_equal(yte, files["t10k"][1])
    assert xte.shape == (4, 5, 4)


def test_read_idx_big_endian_types(tmp_path):
    vals = np.array([[1.5, -2.0], [3.25, 1e30]], dtype=">f4")
    p = tmp_path / "f.idx"
    p.write_bytes(_idx_bytes(0x0D, (2, 2), vals.tobytes()))
    np.testing.assert_array_equal(read_idx(p), vals.astype(np.float32))
    ints = np.array([-3, 70000, 5], dtype=">i4")
    p.write_bytes(_idx_bytes(0x0C, (3,), ints.tobytes()))
    assert read_idx(p).tolist() == [-3, 70000, 5]
    # our writer produces the same bytes as the hand-built file
    write_idx(tmp_path / "w.idx", np.array([-3, 70000, 5], dtype=np.int32))
    assert (tmp_path / "w.idx").read_bytes() == p.read_bytes()


@pytest.mark.parametrize("mutate, message", [
    (lambda b: b"\x01" + b[1:], "magic"),
    (lambda b: b[:2] + b"\x07" + b[3:], "unknown IDX element type 0x07"),
    (lambda b: b[:-1], "truncated"),
    (lambda b: b + b"\x00", "trailing bytes"),
    (lambda b: b[:3], "too short"),
    (lambda b: b[:6], "truncated IDX header"),
])
def test_corrupt_idx_errors_name_the_file(tmp_path, mutate, message):
    good = _idx_bytes(0x08, (2, 3), bytes(range(6)))
    p = tmp_path / "bad-file.idx"
    p.write_bytes(mutate(good))
    with pytest.raises(ValueError, match=message) as info:
        read_idx(p)
    assert "bad-file.idx" in str(info.value)


def test_corrupt_gzip(tmp_path):
    p = tmp_path / "x.gz"
    p.write_bytes(gzip.compress(_idx_bytes(0x08, (4,), bytes(4)))[:-6])
    with pytest.raises(ValueError, match="x.gz"):
        read_idx(p)


def test_missing_files_are_named(tmp_path):
    with pytest.raises(FileNotFoundError, match="data directory not found"):
        load_mnist_dir(tmp_path / "nope")
    _write_mnist(tmp_path)
    (tmp_path / "t10k-labels-idx1-ubyte").unlink()
    with pytest.raises(FileNotFoundError, match="t10k-labels-idx1-ubyte"):
        load_mnist_dir(tmp_path)
    with pytest.raises(FileNotFoundError, match="IDX file not found"):
        read_idx(tmp_path / "absent")


def test_mismatched_counts_and_bad_labels(tmp_path):
    _write_mnist(tmp_path)
    (tmp_path / "train-labels-idx1-ubyte").write_bytes(_idx_bytes(0x08, (5,), bytes(5)))
    with pytest.raises(ValueError, match="6 images but .* 5 labels"):
        load_mnist_dir(tmp_path)
    bad = _idx_bytes(0x08, (6,), bytes([1] * 5 + [12]))
    (tmp_path / "train-labels-idx1-ubyte").write_bytes(bad)
    with pytest.raises(ValueError, match="0..9"):
        load_mnist_dir(tmp_path)


def test_load_dataset_mnist_and_digits(tmp_path):
    _write_mnist(tmp_path)
    ds = load_dataset("mnist", path=str(tmp_path), image=True)
    assert ds.x_train.shape == (6, 1, 5, 4) and ds.n_classes == 10
    flat = load_dataset("fashion_mnist", path=str(tmp_path))
    assert flat.x_train.shape == (6, 20)
    with pytest.raises(ValueError, match="data.path"):
        load_dataset("mnist")
    d = load_dataset("digits", seed=3)
    assert d.x_train.shape[1] == 64 and d.x_train.dtype == np.float32
    assert d.x_train.max() == 1.0 and len(d.y_train) + len(d.y_test) == 1797
    d2 = load_dataset("digits", seed=3, image=True)
    np.testing.assert_array_equal(d2.x_train.reshape(len(d2.x_train), -1), d.x_train)
    with pytest.raises(ValueError, match="accepted: digits"):
        load_dataset("cifar")


def test_corpus_is_deterministic_text():
    a, b = python_corpus(20_000), python_corpus(20_000)
    assert a == b and len(a) == 20_000
    assert "Beautiful is better than ugly." in python_corpus()
    assert all(c == "\n" or 32 <= ord(c) < 127 for c in a)
    v = CharVocab(a)
    assert v.decode(v.encode(a[:500])) == a[:500]
    with pytest.raises(ValueError, match="vocabulary"):
        v.encode("\u00e9")
    with pytest.raises(FileNotFoundError, match="10,000"):
        python_corpus(stdlib_dir="/nonexistent-dir")


def test_synthetic_sets_seeded():
    assert synthetic_text(300, seed=1) == synthetic_text(300, seed=1)
    assert synthetic_text(300, seed=1) != synthetic_text(300, seed=2)
    b1, b2 = load_dataset("blobs", seed=4), load_dataset("blobs", seed=4)
    np.testing.assert_array_equal(b1.x_train, b2.x_train)
    assert not np.array_equal(b1.x_train, load_dataset("blobs", seed=5).x_train)


@pytest.mark.parametrize("name", ["digits", "synthetic_text"])
def test_sampler_resume_is_identical(name):
    ds = load_dataset(name, seed=0, max_chars=5000)
    kw = {"batch_size": 64, "seed": 11, "seq_len": 16}
    a = BatchSampler(ds, **kw)
    for _ in range(25):  # crosses an epoch boundary for digits (1347 train / 64 = 21 batches)
        a.next()
    state = a.state_dict()
    want = [a.next() for _ in range(10)]
    b = BatchSampler(ds, **kw)
    b.load_state_dict(state)
    got = [b.next() for _ in range(10)]
    for (x1, y1), (x2, y2) in zip(want, got):
        np.testing.assert_array_equal(x1, x2)
        np.testing.assert_array_equal(y1, y2)
    if name == "digits":
        assert a.epoch == 1


def test_lm_batches_are_shifted_windows():
    ds = load_dataset("synthetic_text", seed=0, max_chars=3000)
    x, y = BatchSampler(ds, batch_size=4, seed=0, seq_len=10).next()
    assert x.shape == y.shape == (4, 10)
    np.testing.assert_array_equal(x[:, 1:], y[:, :-1])
    ev = list(eval_batches(ds, batch_size=8, seq_len=10))
    assert sum(len(e[0]) for e in ev) == (len(ds.test) - 1) // 10
    ex, ey = ev[0]
    np.testing.assert_array_equal(ex[0], ds.test[:10])
    np.testing.assert_array_equal(ey[0], ds.test[1:11])
