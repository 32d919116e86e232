"""The harness's figures, drawn from an ``Evaluation`` off-screen (matplotlib's Agg): TTA per
policy (``tta.png``), each episode's TTA against PowerTrip's in the same episode
(``tta_paired.png``), mean accuracy against time (``accuracy_vs_time.png``) and one episode site
by site (``timeline.png``, ``timeline_figure``). ``FIGURES`` names them
all.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from powertrip_env.harness.evaluation.results import ZERO, Evaluation
from powertrip_env.harness.evaluation.timeline_figure import timeline_figure
from powertrip_env.render import agg_figure

_CURVE_POINTS = 200
_MARKERS = "osD^vP<>Xh*p"
PAIRED_SIZE_IN = (11.0, 7.0)  # the square-ish plot and, on its right, a legend of ~15 policies
PAIRED_DPI = 120


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
    ax.errorbar(
        pos,
        means,
        yerr=[below, above],
        fmt="o",
        color="tab:red",
        capsize=4,
        label="mean and 95% CI",
    )
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


def paired_figure(result: Evaluation) -> Any:
    """Each episode's TTA of every policy against PowerTrip's TTA in the same episode.

    The box plots compare distributions; the episodes are paired (the same start and jitter for
    every policy), so a policy can lose on average and still win the episodes of some days,
    which only the pairs show. A point above the diagonal is an episode PowerTrip was faster
    in. Without PowerTrip in the run the first policy is the one compared with.
    """
    labels = list(result.summary["policy"])
    ref = ZERO if ZERO in labels else labels[0]
    eps = result.episodes
    base = eps[eps["policy"] == ref].set_index("episode")["tta_h"]
    fig = agg_figure(*PAIRED_SIZE_IN, dpi=PAIRED_DPI, layout="constrained")
    ax = fig.add_subplot()
    others = [label for label in labels if label != ref]
    colours = _colours(len(others))
    for k, label in enumerate(others):
        mine = eps[eps["policy"] == label].set_index("episode").reindex(base.index)
        y, ok = mine["tta_h"].to_numpy(float), mine["success"].to_numpy(bool)
        slower, faster = int((y > base).sum()), int((y < base).sum())
        tally = f"{label}: slower in {slower}, faster in {faster} of {len(base)}"
        style = {"marker": _MARKERS[k % len(_MARKERS)], "s": 36, "linewidths": 1.2}
        ax.scatter(base[ok], y[ok], color=colours[k], label=tally, **style)
        ax.scatter(base[~ok], y[~ok], facecolors="none", edgecolors=colours[k], **style)
    # Each axis spans its own values: PowerTrip's TTAs often vary far less than the others', and
    # on a square plot they would be one column. The diagonal is still y = x.
    x_lim = _padded(base.to_numpy(float))
    y_lim = _padded(eps.loc[eps["policy"] != ref, "tta_h"].to_numpy(float), *x_lim)
    ends = [min(x_lim[0], y_lim[0]), max(x_lim[1], y_lim[1])]
    ax.plot(ends, ends, color="0.4", lw=1, ls="--", label=f"as fast as {ref} (y = x)")
    ax.set(xlim=x_lim, ylim=y_lim)
    note = "" if ref == ZERO else f" (first policy: {ZERO} was not evaluated)"
    ax.set_xlabel(f"{ref}'s TTA in the episode (h){note}")
    ax.set_ylabel("the policy's TTA in the same episode (h)")
    ax.set_title(f"{result.title}, {result.split} split: TTA per episode against {ref}")
    ax.grid(alpha=0.3)
    if not others:
        ax.text(
            0.5,
            0.5,
            f"only {ref} was evaluated: nothing to pair",
            transform=ax.transAxes,
            ha="center",
        )
    key = f"above the diagonal: slower than {ref}\nhollow: target not reached (TTA at budget)"
    fig.legend(loc="outside right upper", fontsize="small", title=key, title_fontsize="small")
    return fig


def _padded(values: np.ndarray, *more: float) -> tuple[float, float]:
    """An axis range around ``values`` (and ``more``) with a margin of 5% each side."""
    lo, hi = float(np.min([*values, *more])), float(np.max([*values, *more]))
    pad = 0.05 * max(hi - lo, 1e-3 * max(abs(hi), 1e-9))
    return lo - pad, hi + pad


def _colours(n: int) -> list[Any]:
    from matplotlib import colormaps

    cmap = colormaps["tab10" if n <= 10 else "tab20"]
    return [cmap(k % cmap.N) for k in range(n)]


def _timeline(result: Evaluation) -> Any:
    if result.timeline is None:
        return None
    return timeline_figure(result.timeline, f"{result.title}, {result.split} split")


FIGURES: dict[str, Callable[[Evaluation], Any]] = {
    "tta.png": tta_figure,
    "tta_paired.png": paired_figure,
    "accuracy_vs_time.png": accuracy_figure,
    "timeline.png": _timeline,
}
"""What ``evaluate`` writes besides its tables: file name, and the figure of an ``Evaluation``
(None: nothing to draw)."""
