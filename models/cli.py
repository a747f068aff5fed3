"""The command line: ``mpemu`` (console script) and ``python -m models``.

    mpemu train --config FILE [--out RUN_DIR] [--resume] [--steps N] [--no-progress]
    mpemu reproduce [--quick] [--out DIR] [--only MODEL[,MODEL]] [--no-progress]
    mpemu histogram RUN_DIR [--out DIR] [--scale-log2 K]
    mpemu sweep --spec SPEC.json --out DIR [--workers N] [--scheduler ADDRESS] [--no-progress]

``train`` runs one configuration (JSON) and writes ``RUN_DIR/{config.json, history.json,
checkpoint.ckpt, histograms.json}``; ``--resume`` continues from the checkpoint bit-identically.
``reproduce`` is the main job: every configuration of the paper's study on built-in data, then
``report.md``, ``results.json`` and the figures.  ``histogram`` draws the gradient exponent
histograms a run recorded (paper Figures 2b and 3) and prints the underflow fractions.
``sweep`` runs an experiment grid on Dask (models.sweep; exit code 1 when a run failed).

Exit codes: 0 success, 2 bad arguments or config (the message names the key or file), 130 when
interrupted with Ctrl-C (the last checkpoint is intact).  Imports models.* lazily per command.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys

__all__ = ["build_parser", "main"]

log = logging.getLogger("models")
_THREAD_VARS = ("NUMBA_NUM_THREADS", "OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS",
                "MKL_NUM_THREADS")


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
    p.add_argument("-v", "--verbose", action="store_true", help="log every skipped step")
    p.add_argument("--threads", type=int, default=None,
                   help="threads for the Numba emulation kernels and for BLAS (default 1: "
                        "the arrays of these small models are too small to gain from threads, "
                        "and thread start-up dominates, worst on a busy 2-core machine)")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")

    t = sub.add_parser("train", help="train one configuration from a JSON config file")
    t.add_argument("--config", required=True, help="JSON config (see models/config.py)")
    t.add_argument("--out", help="run directory (default: runs/<config name>)")
    t.add_argument("--resume", action="store_true",
                   help="continue from RUN_DIR/checkpoint.ckpt (bit-identical continuation)")
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

    h = sub.add_parser("histogram", help="gradient exponent histograms of a training run")
    h.add_argument("run_dir", help="a directory written by 'train' (holds histograms.json)")
    h.add_argument("--out", help="where to write the PNGs (default: RUN_DIR)")
    h.add_argument("--scale-log2", type=int, default=None,
                   help="loss scale 2^K to show (default: the run's own scale, else the largest "
                        "scale without overflow)")
    return p


def _train(args):
    from .config import load_config
    from .trainer import Trainer

    cfg = load_config(args.config)
    if args.steps is not None:
        if args.steps < 1:
            raise ValueError(f"--steps must be >= 1, got {args.steps}")
        cfg["budget"]["steps"] = args.steps
    run_dir = args.out or os.path.join("runs", cfg["name"])
    trainer = Trainer(cfg, run_dir=run_dir, progress=not args.no_progress, leave=True)
    if args.resume:
        trainer.resume()
    result = trainer.fit()
    f = result["final"]
    print(f"{cfg['name']}: train loss {f['train_loss']:.4g}, eval loss {f['eval_loss']:.4g}, "
          f"eval {result['metric']} {f['eval_metric']:.4g}, skipped {f['skipped_steps']}, "
          f"final scale {f['final_scale']:g}; run directory {run_dir}")
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

    for line in histogram_command(args.run_dir, out_dir=args.out, log2_scale=args.scale_log2):
        print(line)
    return 0


def main(argv=None):
    """Entry point; returns the exit code (the console script exits with it)."""
    args = build_parser().parse_args(argv)
    if args.threads is not None and args.threads < 1:
        print(f"mpemu: error: --threads must be >= 1, got {args.threads}", file=sys.stderr)
        return 2
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
        print("interrupted; the last checkpoint (if any) is intact", file=sys.stderr)
        return 130
    except (ConfigError, CheckpointError, FileNotFoundError, ValueError) as exc:
        print(f"mpemu {args.command}: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
