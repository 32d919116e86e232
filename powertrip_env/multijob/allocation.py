"""How a site's powered GPUs are split among the jobs that ask for them.

A job holds its share of a site for the length of its round (a lease: a synchronous round's
sites keep their GPUs until the barrier) and asks again at its next. The shares of a site's
jobs never add up to more than its powered GPUs: a job asking for a site is offered at most
what the leases running there leave.

- ``"fcfs"``: first come, first served. A job gets all that the running leases leave; a site
  another job holds whole is not open to it until that job's round ends.
- ``"proportional"``: each job that wants the site (it asked for it in its latest round, or it
  is asking now) is due an equal part; a job gets its part, or what the leases leave if that is
  less. A job alone on a site gets it whole; when a second wants it, the first gets half at its
  next round and the second the half it leaves (the fair share of max-min fairness, reached at
  the jobs' round boundaries).
"""

from __future__ import annotations

import numpy as np

SMALLEST_SHARE = 1e-9  # below this a leftover is rounding, not GPUs: the site is not open


def leftover(j: int, t: float, held: np.ndarray, held_until: np.ndarray) -> np.ndarray:
    """(N,) what the other jobs' leases running at time ``t`` leave of each site."""
    running = held_until > t
    running[j] = False
    return np.maximum(1.0 - held[running].sum(axis=0), 0.0)


def offers(
    rule: str,
    j: int,
    t: float,
    held: np.ndarray,
    held_until: np.ndarray,
    wanted: np.ndarray,
    active: np.ndarray,
) -> np.ndarray:
    """(N,) the share of each site's powered GPUs job ``j`` would hold if it asked for the site
    at time ``t``: ``held`` (K, N) the shares of each job's latest round, until ``held_until``
    (K,); ``wanted`` (K, N) the sites each job asked for in its latest round; ``active`` (K,)
    the jobs that have arrived and not finished."""
    free = leftover(j, t, held, held_until)
    if rule == "proportional":
        others = active.copy()
        others[j] = False
        due = 1.0 / (1.0 + wanted[others].sum(axis=0))
        free = np.minimum(free, due)
    elif rule != "fcfs":
        raise ValueError(f"allocation {rule!r} is not a rule: allowed 'fcfs', 'proportional'")
    return np.where(free >= SMALLEST_SHARE, free, 0.0)
