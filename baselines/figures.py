"""The harness's figures: TTA per policy (``tta.png``) and mean accuracy against time
(``accuracy_vs_time.png``), drawn from an ``Evaluation`` off-screen (matplotlib's Agg).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from powertrip_env.baselines.evaluation import Evaluation
from powertrip_env.render import agg_figure

_CURVE_POINTS = 200


def tta_figure(result: Evaluation) -> Any:
    """Box plot of TTA per policy with the mean and its 95% CI (day bootstrap) drawn over it."""
    labels = list(result.summary["policy"])
    data = [result.episodes.loc[result.episodes["policy"] == p, "tta_h"].to_numpy() for p in labels]
    fig = agg_figure(max(6.0, 0.7 * len(labels) + 2.0), 4.5, layout="constrained")
    ax = fig.add_subplot()
    pos = np.arange(1, len(labels) + 1)
    ax.boxplot(data, positions=pos, widths=0.6, showfliers=True)
    means = result.summary["mean_tta_h"].to_numpy()
    # The percentile interval need not be symmetric about the mean: draw its two ends.
    below = np.nan_to_num(means - result.summary["ci95_lo_h"].to_numpy()).clip(min=0.0)
    above = np.nan_to_num(result.summary["ci95_hi_h"].to_numpy() - means).clip(min=0.0)
    ax.errorbar(pos, means, yerr=[below, above], fmt="o", color="tab:red", capsize=4,
                label="mean and 95% CI")  # fmt: skip
    ax.set_xticks(pos, labels, rotation=40, ha="right")
    ax.set_ylabel("time to accuracy (h)")
    ax.set_title(f"{result.title}, {result.split} split: TTA per policy")
    ax.grid(axis="y", alpha=0.3)
    ax.legend(loc="upper left")
    return fig


def mean_curve(curves: Sequence[tuple[np.ndarray, np.ndarray]], grid: np.ndarray) -> np.ndarray:
    """Mean accuracy over episodes on a common time grid.

    Accuracy is a step function of time (it changes at round ends), and an episode that ended
    keeps its final accuracy, so every episode has a value at every grid point.
    """
    values = []
    for hours, acc in curves:
        idx = np.searchsorted(hours, grid, side="right") - 1
        values.append(acc[np.clip(idx, 0, acc.shape[0] - 1)])
    return np.mean(values, axis=0)


def accuracy_figure(result: Evaluation) -> Any:
    """Mean accuracy against wall-clock hours, one line per policy."""
    end = max((h[-1] for eps in result.curves.values() for h, _ in eps), default=1.0)
    grid = np.linspace(0.0, max(end, 1e-9), _CURVE_POINTS)
    fig = agg_figure(8.0, 5.0, layout="constrained")
    ax = fig.add_subplot()
    for label in result.summary["policy"]:
        if result.curves.get(label):
            ax.plot(grid, mean_curve(result.curves[label], grid), label=label, lw=1.5)
    ax.set_xlabel("wall-clock time (h)")
    ax.set_ylabel(f"mean accuracy over {int(result.episodes['episode'].nunique())} episodes")
    ax.set_title(f"{result.title}, {result.split} split: accuracy against time")
    ax.grid(alpha=0.3)
    ax.legend(fontsize="small", ncol=2)
    return fig
