"""A character-level text corpus assembled from files that ship with Python itself.

Provides :func:`python_corpus`, which concatenates (in a fixed order) the standard library's
``LICENSE.txt`` (English prose) and the docstrings of a fixed list of pure-Python standard-library
modules, read from their source files with :mod:`ast` (nothing is imported or executed), cleaned
to printable ASCII with single blank lines between paragraphs; and :func:`synthetic_text`, a
seeded order-1 Markov chain text for tests.  Nothing is downloaded.  The corpus is identical for a
given Python version; its SHA-256 is reported so runs can be compared.

Imports only the standard library and numpy.
"""

from __future__ import annotations

import ast
import hashlib
import inspect
import os
import re
import sysconfig

import numpy as np

__all__ = ["STDLIB_SOURCES", "CharVocab", "corpus_digest", "python_corpus", "synthetic_text"]

#: Files read, relative to the standard library directory, in this order.  Modules with long,
#: prose-like docstrings; a missing file (stripped distributions) is skipped, not an error.
STDLIB_SOURCES = (
    "LICENSE.txt",
    "this.py",
    "argparse.py", "textwrap.py", "string.py", "functools.py", "collections/__init__.py",
    "statistics.py", "fractions.py", "random.py", "heapq.py", "bisect.py", "shutil.py",
    "pathlib.py", "inspect.py", "json/__init__.py", "json/decoder.py", "json/encoder.py",
    "logging/__init__.py", "csv.py", "difflib.py", "calendar.py", "datetime.py", "tempfile.py",
    "pprint.py", "enum.py", "dataclasses.py", "typing.py", "contextlib.py", "abc.py",
    "unittest/case.py", "doctest.py", "pickle.py", "gzip.py", "zipfile.py", "subprocess.py",
    "threading.py", "queue.py", "sched.py", "locale.py", "gettext.py", "email/message.py",
    "http/client.py", "urllib/parse.py", "smtplib.py", "ftplib.py", "imaplib.py", "mailbox.py",
)

_PARA = re.compile(r"\n\s*\n+")


def _rot13(text):
    # this.py stores the Zen of Python rot13-encoded; decode it with our own table.
    def shift(c, base):
        return chr((ord(c) - base + 13) % 26 + base)
    return "".join(shift(c, 65) if "A" <= c <= "Z" else shift(c, 97) if "a" <= c <= "z" else c
                    for c in text)


def _docstrings(source):
    """Module, class and function docstrings of a source file, in source order."""
    tree = ast.parse(source)
    nodes = [tree] + [n for n in ast.walk(tree)
                      if isinstance(n, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))]
    nodes.sort(key=lambda n: getattr(n, "lineno", 0))
    out = []
    for node in nodes:
        doc = ast.get_docstring(node, clean=True)
        if doc and len(doc) >= 40:
            out.append(doc)
    return out


def _this_text(source):
    tree = ast.parse(source)
    for node in tree.body:
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant) \
                and isinstance(node.value.value, str) and len(node.value.value) > 200:
            return _rot13(node.value.value)
    return ""


def _clean(text):
    text = inspect.cleandoc(text).replace("\t", "    ")
    text = "".join(c for c in text if c == "\n" or 32 <= ord(c) < 127)
    text = "\n".join(line.rstrip() for line in text.split("\n"))
    return _PARA.sub("\n\n", text).strip()


def python_corpus(max_chars=None, *, stdlib_dir=None):
    """The corpus text (str).  ``max_chars`` truncates it; ``stdlib_dir`` overrides where the
    standard library is looked up (default: this interpreter's).

    Raises FileNotFoundError if fewer than 10,000 characters could be assembled.
    """
    root = stdlib_dir or sysconfig.get_paths()["stdlib"]
    parts = []
    for rel in STDLIB_SOURCES:
        path = os.path.join(root, *rel.split("/"))
        if not os.path.isfile(path):
            continue
        with open(path, encoding="utf-8", errors="replace") as fh:
            source = fh.read()
        if rel.endswith(".txt"):
            pieces = [source]
        elif rel == "this.py":
            pieces = [_this_text(source)]
        else:
            try:
                pieces = _docstrings(source)
            except SyntaxError:
                continue
        parts += [p for p in (_clean(x) for x in pieces) if p]
        if max_chars is not None and sum(len(p) + 2 for p in parts) >= max_chars:
            break
    text = "\n\n".join(parts) + "\n"
    if len(text) < 10_000:
        raise FileNotFoundError(
            f"could not assemble a text corpus from the Python standard library in {root}: "
            f"found {len(text)} characters (need 10,000); the files looked for are "
            "models.corpus.STDLIB_SOURCES; use a synthetic corpus (data.name='synthetic_text') "
            "instead")
    return text[:max_chars] if max_chars is not None else text


def corpus_digest(text):
    """SHA-256 hex digest of the corpus text (UTF-8)."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def synthetic_text(n_chars, *, seed, alphabet="abcdefgh ", concentration=0.3):
    """A seeded order-1 Markov chain text over ``alphabet``: learnable, non-trivial structure.

    Each row of the transition matrix is a Dirichlet(concentration) draw, so a small
    concentration gives peaked, predictable transitions.
    """
    if n_chars < 2:
        raise ValueError(f"synthetic_text needs n_chars >= 2, got {n_chars}")
    rng = np.random.default_rng(seed)
    k = len(alphabet)
    trans = rng.dirichlet(np.full(k, concentration), size=k)
    cum = np.cumsum(trans, axis=1)
    u = rng.random(n_chars)
    idx = np.empty(n_chars, dtype=np.int64)
    idx[0] = int(u[0] * k)
    for i in range(1, n_chars):
        idx[i] = min(int(np.searchsorted(cum[idx[i - 1]], u[i], side="right")), k - 1)
    return "".join(alphabet[i] for i in idx)


class CharVocab:
    """Sorted character vocabulary: :meth:`encode` str -> int64 ids, :meth:`decode` back."""

    def __init__(self, text):
        self.chars = sorted(set(text))
        self._index = {c: i for i, c in enumerate(self.chars)}

    def __len__(self):
        return len(self.chars)

    def encode(self, text):
        try:
            return np.fromiter((self._index[c] for c in text), dtype=np.int64, count=len(text))
        except KeyError as exc:
            raise ValueError(f"character {exc.args[0]!r} is not in the vocabulary") from None

    def decode(self, ids):
        return "".join(self.chars[int(i)] for i in np.asarray(ids).reshape(-1))
