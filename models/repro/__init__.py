"""models.repro: the Mixed Precision Training paper's study, reproduced at small scale.

Separate from the library above it (models, data, trainer, config, CLI): this package holds the
study itself, its configurations (``studies``), the paper's numbers (``paper``), the findings and
the rules that judge them, and the report (``experiments``, ``report``).

    from models.repro import reproduce
    reproduce("results/demo", quick=True)        # what ``make demo`` runs

Imports models.*, numpy and tqdm (matplotlib only through models.figures, lazily).
"""

from .experiments import reproduce

__all__ = ["reproduce"]
