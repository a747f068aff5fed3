"""Reading and writing IDX files (the format of MNIST and Fashion-MNIST), plain or gzipped.

Provides :func:`read_idx`, :func:`write_idx` and :func:`load_mnist_dir`, which finds the four
standard files (``train-images-idx3-ubyte`` etc., with or without ``.gz``, also the
``train-images.idx3-ubyte`` spelling) in a directory the user names.

The IDX layout (LeCun's description of the MNIST files):

    bytes 0-1   zero
    byte  2     element type: 0x08 uint8, 0x09 int8, 0x0B int16, 0x0C int32, 0x0D float32,
                0x0E float64
    byte  3     number of dimensions n
    4 * n       the dimensions, big-endian uint32
    rest        the elements, big-endian, row-major; exactly prod(dims) of them

Every deviation (a missing file, a bad magic number, a truncated body, trailing bytes, label counts
that disagree with image counts, labels outside 0..9) raises an error that names the file and says
what was expected.  Imports the standard library and numpy only.
"""

from __future__ import annotations

import gzip
import os
import struct

import numpy as np

__all__ = ["IDX_TYPES", "MNIST_FILES", "MNIST_SOURCES", "load_mnist_dir", "read_idx",
           "where_to_get", "write_idx"]

#: type code -> big-endian numpy dtype
IDX_TYPES = {
    0x08: np.dtype(">u1"), 0x09: np.dtype(">i1"), 0x0B: np.dtype(">i2"),
    0x0C: np.dtype(">i4"), 0x0D: np.dtype(">f4"), 0x0E: np.dtype(">f8"),
}
_CODE_OF = {dt.newbyteorder("="): code for code, dt in IDX_TYPES.items()}

#: role -> accepted base names (the first is the canonical one); ".gz" variants are accepted too
MNIST_FILES = {
    "train_images": ("train-images-idx3-ubyte", "train-images.idx3-ubyte"),
    "train_labels": ("train-labels-idx1-ubyte", "train-labels.idx1-ubyte"),
    "test_images": ("t10k-images-idx3-ubyte", "t10k-images.idx3-ubyte"),
    "test_labels": ("t10k-labels-idx1-ubyte", "t10k-labels.idx1-ubyte"),
}


def _read_bytes(path):
    with open(path, "rb") as fh:
        head = fh.read(2)
        fh.seek(0)
        raw = fh.read()
    if head == b"\x1f\x8b":  # gzip magic, whatever the file is called
        try:
            return gzip.decompress(raw)
        except (OSError, EOFError) as exc:
            raise ValueError(f"{path}: corrupt gzip stream ({exc})") from exc
    return raw


def read_idx(path):
    """Read one IDX file (gzipped or not) into a native-endian numpy array.

    Raises FileNotFoundError if the file is missing and ValueError naming the file if its header
    or size is wrong.
    """
    path = os.fspath(path)
    if not os.path.isfile(path):
        raise FileNotFoundError(f"IDX file not found: {path}")
    raw = _read_bytes(path)
    if len(raw) < 4:
        raise ValueError(f"{path}: too short for an IDX header ({len(raw)} bytes, need at least 4)")
    zero, code, ndim = struct.unpack(">HBB", raw[:4])
    if zero != 0:
        raise ValueError(
            f"{path}: bad IDX magic number 0x{raw[:4].hex()}: the first two bytes must be zero "
            "(is this an IDX file?)")
    if code not in IDX_TYPES:
        known = ", ".join(f"0x{c:02X}" for c in IDX_TYPES)
        raise ValueError(f"{path}: unknown IDX element type 0x{code:02X}; known types: {known}")
    if ndim == 0:
        raise ValueError(f"{path}: IDX header declares 0 dimensions")
    head = 4 + 4 * ndim
    if len(raw) < head:
        raise ValueError(f"{path}: truncated IDX header: {ndim} dimensions need {head} bytes, "
                         f"file has {len(raw)}")
    dims = struct.unpack(f">{ndim}I", raw[4:head])
    dtype = IDX_TYPES[code]
    want = int(np.prod(dims, dtype=np.int64)) * dtype.itemsize
    have = len(raw) - head
    if have != want:
        what = "truncated" if have < want else "has trailing bytes"
        raise ValueError(f"{path}: IDX body {what}: shape {tuple(dims)} of {dtype.name} needs "
                         f"{want} bytes after the header, found {have}")
    arr = np.frombuffer(raw, dtype=dtype, offset=head).reshape(dims)
    return arr.astype(dtype.newbyteorder("="))


def write_idx(path, array, *, compress=None):
    """Write ``array`` as an IDX file; gzip it if ``compress`` (default: path ends with .gz)."""
    path = os.fspath(path)
    arr = np.asarray(array)
    native = arr.dtype.newbyteorder("=")
    if native not in _CODE_OF:
        raise TypeError(f"IDX cannot store dtype {arr.dtype}; accepted: uint8, int8, int16, "
                        "int32, float32, float64")
    if not 1 <= arr.ndim <= 255:
        raise ValueError(f"IDX needs 1..255 dimensions, got {arr.ndim}")
    code = _CODE_OF[native]
    body = struct.pack(">HBB", 0, code, arr.ndim) + struct.pack(f">{arr.ndim}I", *arr.shape)
    body += np.ascontiguousarray(arr, dtype=IDX_TYPES[code]).tobytes()
    if compress is None:
        compress = path.endswith(".gz")
    if compress:
        body = gzip.compress(body, mtime=0)
    with open(path, "wb") as fh:
        fh.write(body)


#: Where the four files can be downloaded (the same names, gzipped, at every address): the
#: canonical MNIST page, then the mirrors torchvision and TensorFlow download from; Zalando's
#: own bucket and repository for Fashion-MNIST.  The README's "MNIST" section lists them too.
MNIST_SOURCES = {
    "mnist": ("https://ossci-datasets.s3.amazonaws.com/mnist/",
              "https://storage.googleapis.com/cvdf-datasets/mnist/",
              "http://yann.lecun.com/exdb/mnist/"),
    "fashion_mnist": ("http://fashion-mnist.s3-website.eu-central-1.amazonaws.com/",
                      "https://github.com/zalandoresearch/fashion-mnist/tree/master/data/fashion"),
}


def where_to_get(directory, dataset="mnist"):
    """The sentence an error about missing files ends with: which four files, from where, and
    into which directory."""
    names = ", ".join(MNIST_FILES[r][0] + ".gz" for r in MNIST_FILES)
    sources = MNIST_SOURCES.get(dataset, MNIST_SOURCES["mnist"])
    return (f"download {names} from {sources[0]} (or {', '.join(sources[1:])}) into "
            f"{directory} (gzipped or not); see the README's \"MNIST\" section")


def _find(directory, role, dataset):
    names = MNIST_FILES[role]
    for base in names:
        for name in (base, base + ".gz"):
            candidate = os.path.join(directory, name)
            if os.path.isfile(candidate):
                return candidate
    tried = ", ".join(f"{n}[.gz]" for n in names)
    raise FileNotFoundError(f"{directory}: missing the {role.replace('_', ' ')} file; "
                            f"looked for {tried}; {where_to_get(directory, dataset)}")


def load_mnist_dir(directory, dataset="mnist"):
    """Load MNIST or Fashion-MNIST from ``directory`` (the four standard IDX files); ``dataset``
    ("mnist" or "fashion_mnist") only chooses the download addresses a missing-file error names.

    Returns (x_train, y_train, x_test, y_test): images as float32 in [0, 1] with shape
    (n, 28, 28) (or whatever the files declare), labels as int64 in 0..9.
    """
    directory = os.fspath(directory)
    if not os.path.isdir(directory):
        raise FileNotFoundError(f"data directory not found: {directory}; "
                                f"{where_to_get(directory, dataset)}")
    out = []
    for split in ("train", "test"):
        ipath = _find(directory, f"{split}_images", dataset)
        lpath = _find(directory, f"{split}_labels", dataset)
        images, labels = read_idx(ipath), read_idx(lpath)
        if images.ndim != 3:
            raise ValueError(f"{ipath}: images must be 3-D (count, rows, cols), got shape "
                             f"{images.shape}")
        if labels.ndim != 1:
            raise ValueError(f"{lpath}: labels must be 1-D, got shape {labels.shape}")
        if images.shape[0] != labels.shape[0]:
            raise ValueError(f"{ipath} has {images.shape[0]} images but {lpath} has "
                             f"{labels.shape[0]} labels")
        if labels.size and (labels.min() < 0 or labels.max() > 9):
            raise ValueError(f"{lpath}: labels must lie in 0..9, found "
                             f"{int(labels.min())}..{int(labels.max())}")
        scale = 255.0 if images.dtype == np.uint8 else 1.0
        out += [images.astype(np.float32) / np.float32(scale), labels.astype(np.int64)]
    return tuple(out)
