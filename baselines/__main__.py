"""``python -m baselines`` runs ``baselines.evaluate``: evaluation is what the package does."""

from __future__ import annotations

import sys

from baselines.evaluate import main

if __name__ == "__main__":
    sys.exit(main())
