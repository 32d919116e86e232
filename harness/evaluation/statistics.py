"""The statistics every report shares: start days and the day bootstrap of a mean's 95% CI.

Episodes that start on the same day share its weather, so the start day, not the episode, is
the independent draw: intervals resample whole days, seeded from the days themselves so that a
rerun is identical and every policy gets the same draws (a paired bootstrap).
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Sequence

import numpy as np
import pandas as pd

# Resamples of the day bootstrap of every 95% CI (``day_bootstrap_ci95``). With 2,000 the
# Monte Carlo error of the 2.5th and 97.5th percentiles is about 0.06 standard errors of the
# mean, small beside the interval's own approximation with a handful of days.
BOOTSTRAP_RESAMPLES = 2000


def start_days(start_times: Sequence[str] | pd.Series) -> np.ndarray:
    """The UTC calendar day (``"YYYY-MM-DD"``) of each ISO start time, the blocks of the CI.

    Episodes that start on the same day share that day's sun and wind, so they are not
    independent draws; the day is the unit the bootstrap resamples. Raises ``ValueError`` for a
    missing or unreadable time rather than inventing a block for it.
    """
    times = pd.to_datetime(pd.Series(start_times, dtype=object), utc=True, format="ISO8601")
    if times.isna().any():
        raise ValueError("every episode needs a start time to group it by day")
    return times.dt.strftime("%Y-%m-%d").to_numpy(dtype=str)


def bootstrap_seed(labels: np.ndarray, counts: np.ndarray) -> int:
    """A seed from the days and their episode counts, never from the TTAs.

    Every policy of one evaluation ran the same start times, so every policy gets the same
    resampled days (a paired bootstrap), and a rerun of the same episodes gets the same
    interval bit for bit. ``hashlib`` is stable across processes, unlike ``hash``. Public
    because the scores' bootstrap over several tasks (``reports.scores``) seeds its draws the
    same way, from every task's labels and counts.
    """
    text = ",".join(f"{day}:{n}" for day, n in zip(labels, counts, strict=True))
    return int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "little")


def day_bootstrap_ci95(
    values: Sequence[float] | np.ndarray,
    days: Sequence[str] | np.ndarray,
    *,
    resamples: int = BOOTSTRAP_RESAMPLES,
) -> tuple[float, float]:
    """95% percentile interval of the mean of ``values`` from a block bootstrap over ``days``.

    Episodes are grouped by their start day; each resample draws as many days as there are,
    with replacement, keeps every episode of a drawn day (whole blocks), and takes the mean
    TTA of the episodes drawn. The interval is the 2.5th and 97.5th percentiles of those means.
    A t-interval over episodes would treat the 30 test episodes of PowerTrip-v0 as independent
    although they start on about 7 days and share each day's weather, and overstate precision.

    The draws are reproducible: the seed comes from the days (``bootstrap_seed``) and the
    indices from the raw output of PCG64, whose stream NumPy keeps fixed across versions
    (``Generator`` methods may change), reduced modulo the number of days (a bias of order
    days / 2**64).

    With few days the interval is itself approximate and, if anything, too narrow: the
    bootstrap variance of a mean of G equal days is (G - 1) / G of the usual estimate, and its
    percentiles carry no small-sample (t with G - 1 degrees of freedom) correction. For 7 days
    a cluster t-interval would be about 1.35 times as wide. With three equal days the interval
    is simply the range of the day means. Read it as what the days allow, not as exact.

    Returns:
        ``(low, high)``; ``(nan, nan)`` with fewer than two distinct days, where the data hold
        no information on how the mean varies from day to day.
    """
    x = np.asarray(values, dtype=np.float64)
    labels, block, counts = np.unique(
        np.asarray(days, dtype=str), return_inverse=True, return_counts=True
    )
    if x.shape[0] != block.shape[0]:
        raise ValueError(f"{x.shape[0]} values but {block.shape[0]} days")
    if labels.shape[0] < 2:
        return math.nan, math.nan
    # Sums of deviations from one episode's value: an exact zero when every TTA is the same.
    sums = np.bincount(block, weights=x - x[0], minlength=labels.shape[0])
    raw = np.random.PCG64(bootstrap_seed(labels, counts)).random_raw((resamples, labels.size))
    drawn = (raw % np.uint64(labels.size)).astype(np.intp)
    means = x[0] + sums[drawn].sum(axis=1) / counts[drawn].sum(axis=1)
    low, high = np.percentile(means, [2.5, 97.5])
    return float(low), float(high)


def ci95_half_width(
    values: Sequence[float] | np.ndarray,
    days: Sequence[str] | np.ndarray,
    *,
    resamples: int = BOOTSTRAP_RESAMPLES,
) -> float:
    """Half the width of ``day_bootstrap_ci95``: the ``±`` of the tables; NaN with one day."""
    low, high = day_bootstrap_ci95(values, days, resamples=resamples)
    return (high - low) / 2.0
