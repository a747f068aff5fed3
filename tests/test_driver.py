"""softfloat._driver: the kernel record's two parts (a cached structured array of the static
fields, a tuple of the per-call ones), the chunk layout, and the errors on misuse."""

import os
import pathlib
import pickle
import subprocess
import sys

import numba
import numpy as np
import pytest
from numba import njit

from softfloat import _driver
from softfloat._driver import CHUNK, flag_table, launch, record


@njit
def _probe_chunk(k, lo, hi, c, out, rows):
    """Writes what the chunk function sees: the record's fields and the chunk layout."""
    for i in range(lo, hi):
        out[i, 0] = k.lane_mask                  # static uint64 (top bit set)
        out[i, 1] = np.uint64(k.scale * 4.0)     # static float64
        out[i, 2] = np.uint64(k.flag)            # static bool
        out[i, 3] = k.key                        # dynamic uint64
        out[i, 4] = np.uint64(k.base + i)        # dynamic int64
        out[i, 5] = np.uint64(k.negate)          # dynamic bool
    rows[c, 0] = lo
    rows[c, 1] = hi


Probe = record("Probe", ("lane_mask", "scale", "flag"), _probe_chunk, __name__,
               dynamic=(("key", np.uint64), ("base", np.int64), ("negate", np.bool_)))


@pytest.mark.parametrize("n", [1, CHUNK - 1, CHUNK, 3 * CHUNK + 5])
@pytest.mark.parametrize("serial", [True, False])
def test_fields_and_chunks_reach_the_chunk_function(monkeypatch, n, serial):
    monkeypatch.setattr(_driver, "SERIAL_MAX", n if serial else 0)
    static = Probe.params(np.uint64(0xFFFF_0000_0000_0001), 2.5, True)
    key = 0xFEDC_BA98_7654_3210                   # above 2^63: carried as a uint64
    out = np.zeros((n, 6), dtype=np.uint64)
    rows = flag_table(n, 2)
    launch(static, (np.uint64(key), 7, False), n, out, rows)
    expect = np.array([0xFFFF_0000_0000_0001, 10, 1, key, 0, 0], dtype=np.uint64)
    assert (out[:, [0, 1, 2, 3, 5]] == expect[[0, 1, 2, 3, 5]]).all()
    assert (out[:, 4] == 7 + np.arange(n, dtype=np.uint64)).all()
    starts = np.arange(_driver.n_chunks(n)) * CHUNK
    assert (rows[:, 0] == starts).all()
    assert (rows[:, 1] == np.minimum(starts + CHUNK, n)).all()


def test_dynamic_values_are_converted_to_their_declared_types():
    """A Python int given for a uint64 field, an int for a bool: the record holds the
    declared types (one compiled driver per record class, whatever the caller passes)."""
    static = Probe.params(np.uint64(1), 0.25, False)
    out = np.zeros((3, 6), dtype=np.uint64)
    launch(static, (5, np.int64(-2), 1), 3, out, flag_table(3, 2))
    assert out[:, 3].tolist() == [5, 5, 5]
    assert out[:, 4].tolist() == [(-2 + i) % (1 << 64) for i in range(3)]
    assert out[:, 5].tolist() == [1, 1, 1]


def test_static_part_is_read_only_and_typed_from_its_values():
    static = Probe.params(np.uint32(3), 1.0, True)
    assert not static.flags.writeable
    assert static.dtype.names == ("record_Probe", "lane_mask", "scale", "flag")
    assert [static.dtype[i] for i in range(1, 4)] == [np.dtype(np.uint32), np.dtype(np.float64),
                                                       np.dtype(np.bool_)]


def test_nothing_runs_for_an_empty_array():
    out = np.zeros((0, 6), dtype=np.uint64)
    launch(Probe.params(np.uint64(0), 0.0, False), (np.uint64(0), 0, False), 0, out,
           flag_table(0, 2))


def test_bad_static_values_are_refused_with_the_fields_named():
    with pytest.raises(TypeError, match=r"Probe.params takes 3 values \(lane_mask, scale, "
                                        r"flag\), got 2"):
        Probe.params(1, 2.0)
    with pytest.raises(TypeError, match="record field 'scale': 'x' is not a bool, int, float"):
        Probe.params(1, "x", True)
    with pytest.raises(OverflowError, match="record field 'lane_mask': 18446744073709551615 "
                                            "does not fit int64"):
        Probe.params((1 << 64) - 1, 1.0, True)


def test_a_second_record_class_of_the_same_name_is_refused():
    with pytest.raises(ValueError, match="a kernel record class named 'Probe' exists already"):
        record("Probe", ("a",), _probe_chunk, __name__)


def test_a_launch_with_the_wrong_number_of_dynamic_values_is_refused():
    out = np.zeros((2, 6), dtype=np.uint64)
    with pytest.raises(Exception, match="Probe: launch takes 3 dynamic values, got 2"):
        launch(Probe.params(np.uint64(0), 0.0, False), (np.uint64(0), 0), 2, out,
               flag_table(2, 2))


ProbeType = record("ProbeType", ("lane_mask",), None, __name__, dynamic=(("key", np.uint64),))


def test_a_record_type_without_chunk_function_cannot_be_launched():
    # (a record type that chunk functions build and pass on, as sf.round's RoundVec)
    assert ProbeType.drive is None
    assert ProbeType(np.uint64(1), np.uint64(2)).key == 2
    with pytest.raises(TypeError, match="ProbeType is a record type without a chunk function: "
                                        "it cannot be launched"):
        launch(ProbeType.params(np.uint64(0)), (np.uint64(0),), 5)


_CACHED_MODULE = '''
import numpy as np
from numba import njit

from softfloat._driver import launch, record


@njit(cache=True)
def _add_chunk(k, lo, hi, c, x):
    for i in range(lo, hi):
        x[i] += k.step


{name} = record("{name}", ("step",), _add_chunk, __name__)
x = np.zeros(5)
launch({name}.params(1.5), (), x.size, x)
print(x.sum())
'''


def test_a_cache_written_with_a_record_class_since_renamed_is_discarded(tmp_path):
    """A Numba cache index names the record class of its chunk function's signatures; after
    the module renames the class (an upgrade), loading that index must neither fail (plain
    pickling: AttributeError, can't get attribute) nor serve the old code: the placeholder
    class lets it load, then the source stamp discards it and the function compiles again
    (its new result shows it)."""
    root = pathlib.Path(__file__).resolve().parents[1]
    env = dict(os.environ, NUMBA_CACHE_DIR=str(tmp_path / "cache"),
               PYTHONPATH=os.pathsep.join([str(tmp_path), str(root)]))
    mod = tmp_path / "recmod.py"

    def run(src, mtime):
        mod.write_text(src)
        os.utime(mod, (mtime, mtime))              # a distinct source stamp per version
        proc = subprocess.run([sys.executable, "-c", "import recmod"], env=env, cwd=tmp_path,
                              capture_output=True, text=True)
        assert proc.returncode == 0, proc.stderr[-2000:]
        return proc.stdout.split()

    assert run(_CACHED_MODULE.format(name="OldRecord"), 1e9) == ["7.5"]
    assert any(p.suffix == ".nbi" for p in (tmp_path / "cache").rglob("*"))
    renamed = _CACHED_MODULE.format(name="NewRecord").replace("+= k.step", "+= 2 * k.step")
    assert run(renamed, 2e9) == ["15.0"]


def test_record_classes_pickle_by_name_and_a_removed_one_to_a_placeholder():
    assert pickle.loads(pickle.dumps(Probe)) is Probe
    t = numba.typeof(Probe(*([np.uint64(1)] * len(Probe._fields))))
    assert pickle.loads(pickle.dumps(t)) == t
    stale = _driver._record_class(__name__, "NoSuchRecord")
    assert stale is _driver._record_class(__name__, "NoSuchRecord")
    assert stale is not Probe and stale.__name__ == "Stale_NoSuchRecord"
    assert _driver._record_class("no_such_module_here", "Probe").__name__ == "Stale_Probe"


@njit
def _visit_chunk(k, lo, hi, c, rows):
    rows[c, 0] += 1
    rows[c, 1] = hi - lo


Visit = record("Visit", (), _visit_chunk, __name__)


@pytest.mark.parametrize("nc,t", [(1, 1), (5, 2), (4, 2), (7, 3), (64, 5), (3, 3)])
def test_the_runs_cover_every_chunk_once_in_order(nc, t):
    cut = _driver.runs(nc, t)
    assert cut[0] == 0 and cut[-1] == nc and len(cut) == t + 1
    lengths = np.diff(cut)
    assert lengths.min() >= 1 and lengths.max() - lengths.min() <= 1


@pytest.mark.parametrize("threads", sorted({1, min(2, numba.config.NUMBA_NUM_THREADS)}))
def test_a_parallel_launch_runs_every_chunk_exactly_once(threads):
    n = 9 * CHUNK + 3
    before = numba.get_num_threads()
    numba.set_num_threads(threads)
    try:
        rows = flag_table(n, 2)
        launch(Visit.params(), (), n, rows)
    finally:
        numba.set_num_threads(before)
    assert rows[:, 0].tolist() == [1] * 10
    assert rows[:, 1].tolist() == [CHUNK] * 9 + [3]


_FORK_CHILD = """
import multiprocessing as mp
import numpy as np
import numba
from softfloat._driver import CHUNK, flag_table, launch
import test_driver as T

def run(q):
    rows = flag_table(20 * CHUNK, 2)             # above SERIAL_MAX: the pool's threads
    launch(T.Visit.params(), (), 20 * CHUNK, rows)
    q.put(rows[:, 0].tolist())

if __name__ == "__main__":
    run(mp.Queue())                      # the parent's pool now has its threads
    q = mp.get_context("fork").Queue()
    p = mp.get_context("fork").Process(target=run, args=(q,), daemon=True)
    p.start()                            # (daemon: a hung child dies with this process)
    print(q.get(timeout=60))
    p.join(30)
    print(p.exitcode)
"""


def test_a_forked_child_makes_its_own_worker_threads(tmp_path):
    """A forked child inherits the pool object but none of its threads: launches in the child
    must not wait forever on them."""
    root = pathlib.Path(__file__).resolve().parents[1]
    script = tmp_path / "forkprobe.py"
    script.write_text(_FORK_CHILD)
    proc = subprocess.run([sys.executable, str(script)], cwd=root, capture_output=True,
                          text=True, timeout=300,
                          env=dict(os.environ, PYTHONPATH=os.pathsep.join(
                              [str(root / "tests"), str(root)])))
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.split("\n")[:2] == [str([1] * 20), "0"]


def test_softfloat_chunk_functions_are_compiled_without_python_wrappers():
    """Every chunk function of softfloat's launch classes is compiled for compiled callers
    only (_driver.INNER: no CPython and no C-callable wrapper, whose unboxing of a large record
    costs compile time at every first call).  (Not called from Python here: without a
    wrapper that crashes the interpreter.)"""
    import softfloat._kernels_arith  # noqa: F401  (the modules that define launch classes)
    import softfloat._kernels_arith_f32  # noqa: F401
    import softfloat._kernels_bits  # noqa: F401
    import softfloat._kernels_round  # noqa: F401
    import softfloat._kernels_round_vec  # noqa: F401
    import softfloat.dfp._kernels_quant  # noqa: F401

    ours = [c for c in _driver._RECORDS.values()
            if c.__module__.startswith("softfloat.") and c.chunk is not None]
    assert len(ours) >= 20
    for cls in ours:
        opts = cls.chunk.targetoptions
        assert all(opts.get(k) == v for k, v in _driver.INNER.items()), (cls.__name__, opts)
