"""models: models, datasets, the trainer, the paper reproduction and the command line.

- ``models.data`` / ``models.idx`` / ``models.corpus``: built-in data (scikit-learn digits, a
  text corpus from the Python standard library, seeded synthetic sets) and an MNIST/Fashion-MNIST
  IDX loader;
- ``models.nets``: an MLP, a LeNet-style CNN with batch-norm, a character LSTM/GRU language model
  and a tiny transformer language model, on autograd;
- ``models.config``: the JSON run config (apex opt_level and DeepSpeed fp16/bf16 blocks accepted);
- ``models.trainer``: training with precision policies, master weights, loss scalers,
  instrumentation, atomic checksummed checkpoints (``models.checkpoint``) and bit-identical
  resume; ``models.rundir``: what a run may write into and ``--overwrite`` may delete;
- ``models.figures``: PNG figures (loss curves, scale trajectories, exponent histograms);
- ``models.histogram_cli``: ``mpemu histogram RUN_DIR``;
- ``models.repro``: the paper's study at small scale (``reproduce``: studies, findings and their
  rules, report.md and results.json), kept apart from the library above;
- ``models.sweep`` (with ``sweep_spec``, ``sweep_exec``, ``sweep_report``): experiment grids on
  Dask (``mpemu sweep``): the spec, the executor of (run id, config) pairs, results.csv and
  summary.md;
- ``models.cli``: the ``mpemu`` command (also ``python -m models``).

May import autograd, softfloat, scalers, numpy, tqdm, scikit-learn and dask.distributed (the
sweep); matplotlib only lazily in the figure code.  Submodules are imported on demand so that
``import models`` stays cheap.
"""

__all__ = ["cli", "config", "data", "figures", "nets", "repro", "sweep", "trainer"]
