"""``powertrip evaluate`` runs ``powertrip_env.harness.evaluation.evaluate``: evaluation is what
the package does."""

from __future__ import annotations

import sys

from powertrip_env.harness.evaluation.evaluate import main

if __name__ == "__main__":
    sys.exit(main())
