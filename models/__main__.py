"""``python -m models``: the same command line as the ``mpemu`` console script."""

import sys

from .cli import main

sys.exit(main())
