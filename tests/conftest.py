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


#: Test files (by name prefix) that share kernels no precompile group compiles: softfloat.mx's
#: quantization and softfloat.dfp's GEMM and quantization chains.  Under --dist loadfile each
#: family is one work unit (one pytest-xdist process compiles its kernels, the others load them
#: later if at all); spread over both processes file by file they were compiled in both at
#: once, 74 s of duplicated compile time in a clean-clone run (2026-11-28, Zen 3, 2 cores: mx's
#: _tiles 28 s and 26 s, dfp's chain kernels most of the rest).
FAMILIES = {"test_mx_": "tests/mx family", "test_dfp_": "tests/dfp family"}


def work_unit(path: str) -> str:
    """The work unit of a test file (its path from the root): its family's, or the file."""
    name = path.rsplit("/", 1)[-1]
    return next((unit for prefix, unit in FAMILIES.items() if name.startswith(prefix)), path)


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    """pytest-xdist's --dist loadfile scheduling with ``work_unit``'s units in place of files.
    (Not --dist loadgroup with xdist_group marks: pytest-xdist 3.8 renames the tests' node ids
    to group them, which pytest 9.2 no longer lets it do, and every test became a unit of its
    own.)"""
    from xdist.scheduler import LoadFileScheduling

    if config.getoption("dist") != "loadfile" or not hasattr(LoadFileScheduling,
                                                            "_split_scope"):
        return None

    class FamilyScheduling(LoadFileScheduling):
        def _split_scope(self, nodeid):
            return work_unit(super()._split_scope(nodeid))

    return FamilyScheduling(config, log)


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
