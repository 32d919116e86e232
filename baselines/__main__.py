"""``powertrip evaluate`` runs ``powertrip_env.baselines.evaluate``: evaluation is what the package
does."""

from __future__ import annotations

import sys

from powertrip_env.baselines.evaluate import main

if __name__ == "__main__":
    sys.exit(main())
