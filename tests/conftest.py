"""Fixtures shared by several test files."""

from __future__ import annotations

import pytest


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
