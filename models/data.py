"""Datasets that need no download, the MNIST/Fashion-MNIST IDX loader, and seeded batching.

Provides :func:`load_dataset` (by name: ``digits`` = scikit-learn's bundled 8x8 handwritten
digits; ``mnist`` / ``fashion_mnist`` = IDX files in a directory the user names; ``blobs`` =
seeded synthetic Gaussian classes; ``python_text`` = character corpus from the Python standard
library; ``synthetic_text`` = seeded Markov-chain text), the :class:`Dataset` record, and
:class:`BatchSampler`, whose whole random state is a plain dict that checkpoints save and restore,
so a resumed run sees exactly the batches the uninterrupted run would have seen.

Imports numpy, scikit-learn (lazily), and models.idx / models.corpus; nothing from autograd.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .corpus import CharVocab, corpus_digest, python_corpus, synthetic_text
from .idx import load_mnist_dir

__all__ = ["DATASETS", "BatchSampler", "Dataset", "eval_batches", "load_dataset"]

DATASETS = ("digits", "mnist", "fashion_mnist", "blobs", "python_text", "synthetic_text")


@dataclass
class Dataset:
    """A split dataset.  ``kind`` is "classification" (x: float32 images/features, y: int64
    labels) or "lm" (``train``/``test``: int64 token streams, ``vocab`` a CharVocab)."""

    name: str
    kind: str
    x_train: np.ndarray | None = None
    y_train: np.ndarray | None = None
    x_test: np.ndarray | None = None
    y_test: np.ndarray | None = None
    n_classes: int = 0
    train: np.ndarray | None = None
    test: np.ndarray | None = None
    vocab: CharVocab | None = None
    info: dict = field(default_factory=dict)

    @property
    def input_shape(self):
        return tuple(self.x_train.shape[1:]) if self.kind == "classification" else ()

    @property
    def n_train(self):
        return len(self.y_train) if self.kind == "classification" else len(self.train)


def _split(x, y, test_fraction, seed):
    order = np.random.default_rng(seed).permutation(len(y))
    n_test = max(1, round(len(y) * test_fraction))
    te, tr = order[:n_test], order[n_test:]
    return x[tr], y[tr], x[te], y[te]


def _digits(seed, test_fraction, image):
    from sklearn.datasets import load_digits  # lazy: scikit-learn is slow to import

    d = load_digits()
    # pixels are integers 0..16; /16 is exact in float32
    x = (d.data.astype(np.float32) / np.float32(16.0))
    x = x.reshape(-1, 1, 8, 8) if image else x
    y = d.target.astype(np.int64)
    return _split(x, y, test_fraction, seed) + (10,)


def _blobs(seed, test_fraction, n, dim, classes, spread, image_side):
    rng = np.random.default_rng(seed)
    centers = rng.normal(size=(classes, dim)).astype(np.float32)
    y = rng.integers(0, classes, size=n).astype(np.int64)
    x = (centers[y] + spread * rng.normal(size=(n, dim))).astype(np.float32)
    if image_side:
        x = x.reshape(n, 1, image_side, image_side)
    return _split(x, y, test_fraction, seed + 1) + (classes,)


def load_dataset(name, *, seed=0, path=None, test_fraction=0.25, image=False, n=1000, dim=16,
                 classes=4, spread=1.0, max_chars=None, lowercase=False, max_train=None):
    """Load a dataset by name (one of :data:`DATASETS`).

    image: classification inputs shaped (n, 1, H, W) for CNNs instead of flat vectors.
    path: directory of IDX files for "mnist" / "fashion_mnist" (required for those).
    max_train: keep only the first max_train training examples (tokens for text).
    """
    if name not in DATASETS:
        raise ValueError(f"unknown dataset {name!r}; accepted: {', '.join(DATASETS)}")
    info = {"seed": seed}
    if name in ("python_text", "synthetic_text"):
        if name == "python_text":
            text = python_corpus(max_chars)
            info["source"] = "Python standard library LICENSE.txt, this.py and docstrings"
        else:
            text = synthetic_text(max_chars or 20_000, seed=seed)
            info["source"] = "seeded order-1 Markov chain"
        if lowercase:
            text = text.lower()
        info.update(chars=len(text), sha256=corpus_digest(text))
        vocab = CharVocab(text)
        ids = vocab.encode(text)
        cut = int(len(ids) * (1.0 - test_fraction))
        train = ids[:cut] if max_train is None else ids[:min(cut, max_train)]
        return Dataset(name=name, kind="lm", train=train, test=ids[cut:], vocab=vocab,
                       n_classes=len(vocab), info=info)
    if name == "digits":
        xtr, ytr, xte, yte, k = _digits(seed, test_fraction, image)
        info["source"] = "sklearn.datasets.load_digits (1797 8x8 images, bundled)"
    elif name == "blobs":
        side = round(dim ** 0.5) if image else 0
        if image and side * side != dim:
            raise ValueError(f"blobs with image=True needs a square dim, got dim={dim}")
        xtr, ytr, xte, yte, k = _blobs(seed, test_fraction, n, dim, classes, spread, side)
        info["source"] = f"seeded Gaussian blobs n={n} dim={dim} classes={classes}"
    else:
        if path is None:
            raise ValueError(f"dataset {name!r} needs data.path: a directory holding the four "
                             "IDX files (train-images-idx3-ubyte[.gz], ...)")
        xtr, ytr, xte, yte = load_mnist_dir(path, name)
        k = 10
        xtr, xte = (a[:, None] if image else a.reshape(len(a), -1) for a in (xtr, xte))
        info["source"] = f"IDX files in {path}"
    if max_train is not None:
        xtr, ytr = xtr[:max_train], ytr[:max_train]
    return Dataset(name=name, kind="classification", x_train=xtr, y_train=ytr, x_test=xte,
                   y_test=yte, n_classes=k, info=info)


class BatchSampler:
    """Seeded mini-batches.  Classification: epochs of shuffled indices (the last incomplete
    batch of an epoch is dropped); language modelling: random windows of ``seq_len + 1`` tokens.

    ``state_dict()`` / ``load_state_dict()`` capture everything (generator state, permutation,
    position), so batches continue bit-identically after a resume.
    """

    def __init__(self, dataset, *, batch_size, seed, seq_len=None):
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        self.ds, self.batch_size, self.seq_len = dataset, int(batch_size), seq_len
        self.rng = np.random.default_rng(seed)
        self.perm, self.pos, self.epoch = None, 0, 0
        if dataset.kind == "lm":
            if not seq_len or seq_len < 1:
                raise ValueError("language-model data needs seq_len >= 1")
            if len(dataset.train) < seq_len + 2:
                raise ValueError(f"training text has {len(dataset.train)} tokens, fewer than "
                                 f"seq_len + 2 = {seq_len + 2}")
        elif dataset.n_train < batch_size:
            raise ValueError(f"batch_size {batch_size} exceeds the {dataset.n_train} training "
                             "examples")

    def next(self):
        """(x, y): classification float32 x and int64 y; lm int64 (batch, seq_len) both."""
        if self.ds.kind == "lm":
            starts = self.rng.integers(0, len(self.ds.train) - self.seq_len - 1,
                                       size=self.batch_size)
            win = self.ds.train[starts[:, None] + np.arange(self.seq_len + 1)]
            return win[:, :-1], win[:, 1:]
        if self.perm is None or self.pos + self.batch_size > len(self.perm):
            if self.perm is not None:
                self.epoch += 1
            self.perm, self.pos = self.rng.permutation(self.ds.n_train), 0
        idx = self.perm[self.pos:self.pos + self.batch_size]
        self.pos += self.batch_size
        return self.ds.x_train[idx], self.ds.y_train[idx]

    def state_dict(self):
        return {"rng": self.rng.bit_generator.state, "perm": None if self.perm is None
                else self.perm.copy(), "pos": self.pos, "epoch": self.epoch}

    def load_state_dict(self, state):
        self.rng.bit_generator.state = state["rng"]
        self.perm = None if state["perm"] is None else np.array(state["perm"])
        self.pos, self.epoch = int(state["pos"]), int(state["epoch"])


def eval_batches(dataset, *, batch_size, seq_len=None, max_batches=None):
    """Deterministic evaluation batches over the test split (no randomness)."""
    if dataset.kind == "lm":
        ids, n = dataset.test, seq_len
        count = (len(ids) - 1) // n
        rows = np.arange(count)
        if max_batches is not None:
            rows = rows[:max_batches * batch_size]
        for i in range(0, len(rows), batch_size):
            starts = rows[i:i + batch_size] * n
            win = ids[starts[:, None] + np.arange(n + 1)]
            yield win[:, :-1], win[:, 1:]
        return
    n_test = len(dataset.y_test)
    stop = n_test if max_batches is None else min(n_test, max_batches * batch_size)
    for i in range(0, stop, batch_size):
        yield dataset.x_test[i:i + batch_size], dataset.y_test[i:i + batch_size]
