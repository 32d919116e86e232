"""Write or check docs/model.md's observation tables, generated from ``features.py``.

python -m powertrip_env.dynamics --write docs/model.md
python -m powertrip_env.dynamics --check docs/model.md   # exit 1 if it is out of date
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from powertrip_env.dynamics.features import rewrite


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m powertrip_env.dynamics", description=__doc__)
    action = parser.add_mutually_exclusive_group(required=True)
    action.add_argument("--write", type=Path, metavar="MODEL_MD", help="rewrite the tables")
    action.add_argument("--check", type=Path, metavar="MODEL_MD", help="fail if they differ")
    args = parser.parse_args(argv)
    path = args.write or args.check
    text = path.read_text(encoding="utf-8")
    new = rewrite(text)
    if args.write:
        if new != text:
            path.write_text(new, encoding="utf-8")
        print(f"{path}: {'rewritten' if new != text else 'up to date'}")
        return 0
    if new != text:
        print(
            f"{path}: the observation tables differ from powertrip_env/dynamics/features.py;"
            " run python -m powertrip_env.dynamics --write " + str(path),
            file=sys.stderr,
        )
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
