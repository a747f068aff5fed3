"""models.repro: the Mixed Precision Training paper's study, reproduced at small scale.

Separate from the library above it (models, data, trainer, config, CLI): this package holds the
study itself: its configurations and profiles (``studies``), the run list and how one run is
executed (``runs``), what is measured on top of training (``gradstats``: fp16 bands per layer at
every loss scale; ``observe``: the trainer hook and the DFP-16 GEMM capture; ``dfpstats``: int32
chains by length; ``natural``: tokens per batch), seeds aggregated into study summaries
(``aggregate``), the paper's numbers (``paper``), the findings and their rules (``findings``,
``scaler_rules``), and the outputs (``figs``, ``report``, ``report_study``, ``experiments``).

    from models.repro import reproduce
    reproduce("results/demo", quick=True)        # what ``make demo`` runs

Imports models.*, autograd, softfloat, numpy and tqdm (matplotlib only through models.figures,
lazily).
"""

from .experiments import reproduce

__all__ = ["reproduce"]
