"""The command line: ``mpemu`` (console script) and ``python -m models``.

    mpemu --version
    mpemu train --config FILE [--out RUN_DIR] [--resume | --overwrite] [--steps N] [--no-progress]
    mpemu reproduce [--quick] [--out DIR] [--only MODEL[,MODEL]] [--no-progress]
    mpemu histogram RUN_DIR [--out DIR] [--format FMT] [--scale-log2 K | --step N]
    mpemu sweep --spec SPEC.json --out DIR [--workers N] [--scheduler ADDRESS] [--no-progress]

``train`` runs one configuration (JSON) and writes ``RUN_DIR/{config.json, history.json,
checkpoint.ckpt}``; ``--resume`` continues from the checkpoint bit-identically; a directory that
already holds a run is refused unless ``--resume`` or ``--overwrite`` (which deletes only the
files a run writes) says what to do with it.  ``reproduce`` is the main job: every configuration
of the paper's study on built-in data, then ``report.md``, ``results.json`` and the figures.
``histogram`` reads RUN_DIR/history.json, draws the gradient exponent histograms the run recorded
(paper Figures 2b and 3) for a target format and prints the underflow fractions.
``sweep`` runs an experiment grid on Dask (models.sweep; exit code 1 when a run failed).

Exit codes: 0 success; 2 bad arguments, config, run directory or damaged file (the message names
the key or file); 3 the training failed: it stopped early -- the weights or the loss became
non-finite, or the loss scale got stuck at its minimum (the message says which, at which step;
history.json and the checkpoint record the run up to there) -- or it diverged (a non-finite
training loss over the last tenth of its steps, with finite weights); 130 interrupted with
Ctrl-C (the message says which step the checkpoint holds and how to resume, or that nothing was
saved).  Imports models.* lazily per command.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys

__all__ = ["build_parser", "main", "package_version"]

log = logging.getLogger("models")
_THREAD_VARS = ("NUMBA_NUM_THREADS", "OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS",
                "MKL_NUM_THREADS")


EXIT_USAGE, EXIT_RUN_FAILED, EXIT_INTERRUPTED = 2, 3, 130


def package_version():
    """The installed distribution's version (importlib.metadata); run from a source tree that
    is not installed, the version in the setup.cfg beside the package."""
    from importlib import metadata

    try:
        return metadata.version("mpemu")
    except metadata.PackageNotFoundError:
        pass
    import configparser

    cfg = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "setup.cfg")
    parser = configparser.ConfigParser()
    if parser.read(cfg, encoding="utf-8") and parser.has_option("metadata", "version"):
        return parser.get("metadata", "version")
    return "unknown (not installed, and no setup.cfg beside the package)"


def _set_threads(threads):
    """Thread counts are read when numba and numpy's BLAS start, so they are set only while
    neither is imported (a console script or python -m models: they are imported lazily below).
    Inside a process that already runs them (a notebook, a test) nothing is changed: numba
    re-reads NUMBA_NUM_THREADS at each compilation and refuses a change once its threads run."""
    if "numba" in sys.modules or "numpy" in sys.modules:
        if threads is not None:
            log.warning("--threads ignored: numba/numpy are already loaded in this process")
        return
    for var in _THREAD_VARS:
        if threads is not None:
            os.environ[var] = str(threads)
        else:
            os.environ.setdefault(var, "1")


def build_parser():
    p = argparse.ArgumentParser(
        prog="mpemu", description="Bit-exact emulation of mixed precision training: train one "
        "configuration, reproduce the Mixed Precision Training paper's findings, or draw "
        "gradient histograms.")
    p.add_argument("--version", action="version", version=f"mpemu {package_version()}")
    p.add_argument("-v", "--verbose", action="store_true", help="log every skipped step")
    p.add_argument("--threads", type=int, default=None,
                   help="threads for the Numba emulation kernels and for BLAS (default 1: "
                        "the arrays of these small models are too small to gain from threads, "
                        "and thread start-up dominates, worst on a busy 2-core machine)")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")

    t = sub.add_parser("train", help="train one configuration from a JSON config file")
    t.add_argument("--config", required=True, help="JSON config (see models/config.py)")
    t.add_argument("--out", help="run directory (default: runs/<config name>); one that "
                                 "already holds a run needs --resume or --overwrite")
    t.add_argument("--resume", action="store_true",
                   help="continue from RUN_DIR/checkpoint.ckpt (bit-identical continuation)")
    t.add_argument("--overwrite", action="store_true",
                   help="start afresh in a run directory that holds a run: deletes the files "
                        "a run writes there (checkpoint, history, config, hist_*.png figures), "
                        "nothing else")
    t.add_argument("--steps", type=int, help="override budget.steps")
    t.add_argument("--no-progress", action="store_true", help="no progress bar")

    r = sub.add_parser("reproduce", help="run the paper's study and write report.md")
    r.add_argument("--quick", action="store_true", help="small budgets (a few minutes)")
    r.add_argument("--out", default=None,
                   help="output folder (default: results/quick or results/full)")
    r.add_argument("--only", default=None,
                   help="comma-separated model keys to run (mlp, master, cnn, lstm, transformer)")
    r.add_argument("--no-progress", action="store_true", help="no progress bars")

    s = sub.add_parser("sweep", help="run an experiment grid (a spec) on a Dask cluster")
    s.add_argument("--spec", required=True, help="sweep spec JSON (see models/sweep_spec.py)")
    s.add_argument("--out", required=True, help="output folder; rerun to resume")
    s.add_argument("--workers", type=int, default=None,
                   help="worker processes of the local cluster (default: the core count)")
    s.add_argument("--scheduler", default=None,
                   help="address of an existing Dask scheduler, e.g. tcp://host:8786")
    s.add_argument("--no-progress", action="store_true", help="no progress bar")

    h = sub.add_parser("histogram", help="gradient exponent histograms of a training run "
                                         "(reads RUN_DIR/history.json)")
    h.add_argument("run_dir", metavar="RUN_DIR",
                   help="a directory written by 'train'; the histograms are read from "
                        "RUN_DIR/history.json")
    h.add_argument("--out", help="where to write the PNGs (default: RUN_DIR)")
    h.add_argument("--format", default="fp16",
                   help="target format whose underflow and overflow are shown: fp16 (default), "
                        "bf16, e4m3fn, e5m2 or any other softfloat preset the run recorded")
    which = h.add_mutually_exclusive_group()
    which.add_argument("--scale-log2", type=int, default=None, metavar="K",
                       help="show the loss scale 2^K, K in 0..32 (default: the run's final "
                            "scale, whatever its scaler type; 1 without a scaler)")
    which.add_argument("--step", type=int, default=None, metavar="N",
                       help="show the loss scale that step N used instead of the final one")
    return p


def _train(args):
    from .config import load_config
    from .rundir import plan_run_dir, prepare_run_dir
    from .trainer import Trainer

    cfg = load_config(args.config)
    if args.steps is not None:
        if args.steps < 1:
            raise ValueError(f"--steps must be >= 1, got {args.steps}")
        cfg["budget"]["steps"] = args.steps
    run_dir = args.out or os.path.join("runs", cfg["name"])
    plan_run_dir(run_dir, resume=args.resume, overwrite=args.overwrite)   # refuse early
    trainer = Trainer(cfg, run_dir=run_dir, progress=not args.no_progress, leave=True)
    # delete only once the data and model are built: a config that fails keeps the old run
    removed = prepare_run_dir(run_dir, resume=args.resume, overwrite=args.overwrite)
    if removed:
        log.info("--overwrite: removed %s from %s", ", ".join(removed), run_dir)
    try:
        if args.resume:
            trainer.resume()
        result = trainer.fit()
    except KeyboardInterrupt:
        msg = trainer.interrupt_message()
        again = f"mpemu train --config {args.config} --out {run_dir}"
        if trainer.saved_step is not None:
            msg += f"; continue with: {again} --resume"
        else:
            msg += f"; start again with: {again} --overwrite"
        print(f"mpemu train: {msg}", file=sys.stderr)
        return EXIT_INTERRUPTED
    f = result["final"]
    print(f"{cfg['name']}: train loss {f['train_loss']:.4g}, eval loss {f['eval_loss']:.4g}, "
          f"eval {result['metric']} {f['eval_metric']:.4g}, skipped {f['skipped_steps']}, "
          f"final scale {f['final_scale']:g}; run directory {run_dir}")
    if f["failure"]:
        print(f"mpemu train: training stopped early ({f['failure']}); history.json and the "
              f"checkpoint in {run_dir} record the run up to there", file=sys.stderr)
        return EXIT_RUN_FAILED
    if f["diverged"]:
        print(f"mpemu train: the run diverged: the training loss over its last tenth of steps "
              f"is not finite ({f['train_loss']}); see {run_dir}/history.json",
              file=sys.stderr)
        return EXIT_RUN_FAILED
    return 0


def _reproduce(args):
    from .repro import reproduce

    out = args.out or os.path.join("results", "quick" if args.quick else "full")
    only = [s.strip() for s in args.only.split(",")] if args.only else None
    path = reproduce(out, quick=args.quick, only=only, progress=not args.no_progress)
    print(f"report written to {path}")
    return 0


def _sweep(args):
    from .sweep import sweep_command

    return sweep_command(args)


def _histogram(args):
    from .histogram_cli import histogram_command

    for line in histogram_command(args.run_dir, out_dir=args.out, log2_scale=args.scale_log2,
                                  fmt=args.format, step=args.step):
        print(line)
    return 0


def main(argv=None):
    """Entry point; returns the exit code (the console script exits with it)."""
    args = build_parser().parse_args(argv)
    if args.threads is not None and args.threads < 1:
        print(f"mpemu: error: --threads must be >= 1, got {args.threads}", file=sys.stderr)
        return EXIT_USAGE
    _set_threads(args.threads)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING,
                        format="%(levelname)s %(name)s: %(message)s")
    if not args.verbose:
        logging.getLogger("models").setLevel(logging.INFO)
    from .checkpoint import CheckpointError
    from .schema import ConfigError

    commands = {"train": _train, "reproduce": _reproduce, "histogram": _histogram,
                "sweep": _sweep}
    try:
        return commands[args.command](args)
    except KeyboardInterrupt:
        print(f"mpemu {args.command}: interrupted; the last checkpoint (if any) is intact",
              file=sys.stderr)
        return EXIT_INTERRUPTED
    except (ConfigError, CheckpointError, FileNotFoundError, ValueError) as exc:
        print(f"mpemu {args.command}: error: {exc}", file=sys.stderr)
        return EXIT_USAGE


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
