"""Reports over scenarios: ``benchmark`` (the suite's leaderboard, rendered by ``leaderboard``
from the statistics of ``scores``) and ``headroom`` (how sequential a scenario is)."""
