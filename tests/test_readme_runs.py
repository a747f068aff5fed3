"""The README's "Command line, runs and training from Python" section, its MNIST instructions and
its precision-policy text, run as written: the mpemu commands it shows, the Python training
snippet, the precision-policy doctest, and the MNIST file names and addresses against the
loader's own (and its missing-file error)."""

from __future__ import annotations

import doctest
import os
import re
import shlex
from pathlib import Path

import numpy as np
import pytest

from models.cli import main
from models.idx import MNIST_FILES, MNIST_SOURCES, write_idx

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text(encoding="utf-8")


def _section(heading):
    """The README text from ``heading`` to the next heading of the same or a higher level."""
    level = heading.split()[0]
    start = README.index(heading + "\n")
    rest = README[start + len(heading) + 1:]
    stop = re.search(rf"^#{{1,{len(level)}}} ", rest, flags=re.M)
    return rest[:stop.start()] if stop else rest


def _blocks(text, lang=""):
    return re.findall(rf"^```{lang}\n(.*?)^```", text, flags=re.M | re.S)


def _mpemu_lines(block):
    out = []
    for line in block.replace("\\\n", " ").splitlines():
        line = line.split("#")[0].strip()
        if line.startswith("mpemu "):
            out.append(shlex.split(line)[1:])
    return out


def _run(argv):
    """Run an mpemu command from the README with the example configs read from the source
    tree (the test runs in a scratch directory)."""
    argv = [str(ROOT / a) if a.startswith("models/configs/") else a for a in argv]
    return main(argv + (["--no-progress"] if argv[0] == "train" else []))


def test_the_command_lines_shown_run(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    section = _section("## Command line, runs and training from Python")
    lines = _mpemu_lines(_blocks(section)[0])
    assert lines[0] == ["--version"] and len(lines) == 4
    with pytest.raises(SystemExit) as info:
        _run(lines[0])
    assert info.value.code == 0 and capsys.readouterr().out.startswith("mpemu ")
    for argv in lines[1:]:
        assert _run(argv) == 0, argv
    out = capsys.readouterr().out
    assert "-> 0 in e4m3fn unscaled" in out
    assert {"history.json", "hist_weight_grad_e4m3fn.png"} <= set(os.listdir("runs/mlp"))


def test_the_python_training_snippet_runs(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (code,) = _blocks(_section("### Training from Python"), "python")
    namespace = {}
    exec(compile(code, "README.md", "exec"), namespace)
    result = namespace["result"]
    assert result["final"]["steps"] == 40 and result["final"]["failure"] is None
    assert result["final"]["final_scale"] == 2.0 ** 16
    assert (tmp_path / "runs" / "api-demo" / "history.json").is_file()
    from models.trainer import Trainer

    # the signature the README states
    import inspect

    params = inspect.signature(Trainer).parameters
    assert list(params)[:3] == ["cfg", "run_dir", "progress"]
    assert params["run_dir"].kind is inspect.Parameter.KEYWORD_ONLY


def test_the_precision_policy_text_matches_the_code():
    text = _section("### Precision policies (autograd)")
    (block,) = _blocks(text)
    test = doctest.DocTestParser().get_doctest(block, {}, "README precision policies",
                                               "README.md", 0)
    assert test.examples, "the README shows no doctest"
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS)
    runner.run(test)
    assert runner.summarize(verbose=False).failed == 0
    from autograd.policy import PRESETS, Policy

    said = {"O1": "ideal-fp32", "O2": "ideal-fp32", "O3": "ideal-fp32", "bf16": "ideal-fp32",
            "fp8_delayed": "ideal-fp32", "fp8_current": "ideal-fp32",
            "mxfp8": "ideal-fp32", "nvfp4": "ideal-fp32",
            "O0": "native", "fp64": "native", "dfp16": "dfp16"}
    for name in said:                  # every preset the code has is named in the text
        assert f"`{name}`" in text
    assert {k: p.accumulation for k, p in PRESETS.items()} == said
    assert Policy().accumulation == "native"
    assert "`ideal-fp32` model by default" not in README


def _fake_mnist(directory):
    rng = np.random.default_rng(0)
    directory.mkdir(parents=True)
    for split, n in (("train", 80), ("t10k", 20)):
        write_idx(directory / f"{split}-images-idx3-ubyte.gz",
                  rng.integers(0, 256, (n, 28, 28), dtype=np.uint8))
        write_idx(directory / f"{split}-labels-idx1-ubyte.gz",
                  rng.integers(0, 10, n, dtype=np.uint8))


def test_mnist_instructions_match_the_loader_and_its_error(tmp_path, monkeypatch, capsys):
    section = _section("### MNIST")
    for role in MNIST_FILES:
        assert f"`{MNIST_FILES[role][0]}.gz`" in section
    for sources in MNIST_SOURCES.values():
        for url in sources:
            assert f"<{url}>" in section, url
    config = (ROOT / "models" / "configs" / "mnist_o2_static.json").read_text()
    assert '"path": "data/mnist"' in config and "`data/mnist`" in section
    shell = _blocks(section)[0]
    assert "https://ossci-datasets.s3.amazonaws.com/mnist/$f.gz" in shell
    (train,) = _mpemu_lines(shell)
    monkeypatch.chdir(tmp_path)
    # without the files: the error names the directory and says what the README says
    assert _run(train) == 2
    err = capsys.readouterr().err
    assert "data directory not found: data/mnist" in err
    assert MNIST_SOURCES["mnist"][0] in err and "t10k-labels-idx1-ubyte.gz" in err
    assert 'the README\'s "MNIST" section' in err
    # with the four files where the README says: the command trains (budget cut to 2 steps)
    _fake_mnist(tmp_path / "data" / "mnist")
    assert _run(train + ["--steps", "2"]) == 0
    assert "mnist-o2-static: train loss" in capsys.readouterr().out


def test_the_quick_tour_runs_and_says_what_it_shows():
    """The Quick tour's code runs as written, and the values its comments state are the
    values it computes."""
    (code,) = _blocks(_section("## Quick tour"), "python")
    ns = {}
    exec(compile(code, "README.md (Quick tour)", "exec"), ns)
    sf, np_ = ns["sf"], ns["np"]
    fp16 = ns["fp16"]
    assert (fp16.max, fp16.tiny, fp16.smallest_subnormal, fp16.eps) == (
        65504.0, 2.0 ** -14, 2.0 ** -24, 2.0 ** -10)
    r = sf.round(ns["x"], fp16)
    assert np_.isinf(r[:2]).all() and r[2] == 0 and np_.signbit(r[3])
    assert float(sf.round(70000.0, fp16, "rtz")) == 65504.0
    assert ns["f"].underflow == 1 and ns["f"].overflow == 1
    assert int(sf.to_bits(sf.round(1.0, fp16), fp16)) == 0x3C00
    assert float(sf.add(ns["a"], ns["b"], "bf16", "rtz")) == 1.0
    assert ns["q"].format.name == "nvfp4" and ns["q"].scale_bits.dtype == np_.uint8
