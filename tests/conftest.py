"""Fixtures shared by several test files."""

from __future__ import annotations

import pytest


def pytest_collection_modifyitems(config, items):
    """The files that hold tests marked slow (the 2^32 exhaustive checks, 3-5 minutes each)
    run first, in their own order; the rest keep theirs.  With pytest-xdist's --dist loadfile
    and --no-loadscope-reorder (make test) each of them starts at once on a process of its
    own, and the short files fill in beside and after them: run last, as xdist's default order
    (files with most tests first) put them, the processes ended 58 s apart (2026-11-28, Zen 3,
    2 cores)."""
    slow_files = {item.path for item in items if item.get_closest_marker("slow")}
    items.sort(key=lambda item: item.path not in slow_files)


@pytest.fixture(scope="module")
def client():
    """A dask.distributed client on a LocalCluster of 2 worker processes (127.0.0.1 only, one
    Numba/BLAS thread each: models.sweep_exec.local_cluster), closed after the module."""
    from distributed import Client

    from models.sweep import local_cluster

    cluster = local_cluster(2)
    try:
        c = Client(cluster, timeout="60s")
        try:
            yield c
        finally:
            c.close()
    finally:
        cluster.close()
