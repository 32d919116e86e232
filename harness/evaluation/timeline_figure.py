"""``timeline.png``: one evaluated episode site by site, as ``timeline`` recorded it.

The box plots and mean curves say how fast each policy is; this figure says why. Each policy
has a panel with a row per site: the power the site had behind the rounds it trained in, its
joins and its drop-outs.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from powertrip_env.harness.evaluation.timeline import PolicyRounds, Timeline
from powertrip_env.render import agg_figure

# The figure's geometry in inches: one row per site in each policy's panel. Rows get thinner as
# sites get more, down to what a 6 pt site name still fits in.
_WIDTH_IN = 13.0
_HEADER_IN = 0.7  # the figure's title and legend
_TITLE_IN = 0.3  # a panel's title, above it
_TICKS_IN = 0.45  # a panel's time axis, below it
_XLABEL_IN = 0.25  # the time axis's label, under the last panel
DPI = 100
_MIN_BAR_SHARE = 0.0012  # a round is drawn at least this share of the axis wide (~1.5 px)


def _row_in(n_sites: int) -> float:
    """Height of one site's row, in inches."""
    return float(np.clip(2.6 / n_sites, 0.14, 0.26))


def timeline_size(n_sites: int, n_policies: int) -> tuple[float, float]:
    """(width, height) in inches of the timeline of ``n_policies`` panels of ``n_sites`` rows."""
    panel = n_sites * _row_in(n_sites) + _TITLE_IN + _TICKS_IN
    return _WIDTH_IN, round(_HEADER_IN + n_policies * panel + _XLABEL_IN, 2)


def _panels(fig: Any, n_sites: int, n_policies: int, label_pt: float, names: Sequence[str]) -> Any:
    """The stacked axes, placed by hand in inches: the constrained layout measures every tick
    label of every panel, which takes seconds for a dozen panels of 32 sites."""
    width, height = fig.get_size_inches()
    left = 0.2 + 0.6 * label_pt / 72.0 * max(len(name) for name in names)
    axes_h = n_sites * _row_in(n_sites)
    grid = {
        "left": left / width,
        "right": 1.0 - 0.2 / width,
        "top": 1.0 - (_HEADER_IN + _TITLE_IN) / height,
        "bottom": (_TICKS_IN + _XLABEL_IN) / height,
        "hspace": (_TITLE_IN + _TICKS_IN) / axes_h,
    }
    return fig.subplots(n_policies, 1, sharex=True, squeeze=False, gridspec_kw=grid)[:, 0]


def timeline_figure(timeline: Timeline, heading: str) -> Any:
    """One panel per policy, stacked on one time axis; in each, one row per site: its power
    share as a green area, its completed rounds as blue bars, its drop-outs as red bars with a
    cross, its joins as black ticks at the round's start."""
    n, runs = len(timeline.site_names), timeline.runs
    row_pt = _row_in(n) * 72.0
    label_pt = min(9.0, 0.62 * row_pt)
    fig = agg_figure(*timeline_size(n, len(runs)), dpi=DPI)
    axes = _panels(fig, n, len(runs), label_pt, timeline.site_names)
    end = max([float(r.end_h[-1]) for r in runs if r.end_h.size] + [1e-9])
    min_w = _MIN_BAR_SHARE * end
    for ax, run in zip(axes, runs, strict=True):
        _draw_power(ax, timeline, end)
        _draw_rounds(ax, run, min_w, row_pt)
        ax.set_yticks(range(n), timeline.site_names, fontsize=label_pt)
        ax.set_ylim(n - 0.5, -0.5)
        ax.set_xlim(-0.006 * end, end)  # a join at 0 shows beside the axis, not on it
        ax.tick_params(axis="x", labelbottom=True, labelsize=8)
        ax.grid(axis="x", alpha=0.3)
        ax.set_title(_panel_title(run), loc="left", fontsize=10)
    axes[-1].set_xlabel("hours since the episode's start")
    title = (
        f"{heading}: episode {timeline.episode} (seed {timeline.seed}, starts "
        f"{timeline.start_time}), one panel per policy"
    )  # the legend's title, which keeps the two together in the header
    fig.legend(handles=_legend_handles(), loc="upper center", ncol=5, fontsize=9, title=title,
               title_fontsize=12, frameon=False, bbox_to_anchor=(0.5, 1.0))  # fmt: skip
    return fig


def _draw_power(ax: Any, timeline: Timeline, end: float) -> None:
    """Each site's power share, held over its trace row, rising from the bottom of its row;
    rows without any power grey over the whole row, so that none stands out from a little.
    One polygon per site, all in one collection: a panel of 32 sites stays one artist."""
    if not timeline.power_h.size:
        return
    edges = np.append(timeline.power_h, max(end, float(timeline.power_h[-1])))
    x = np.repeat(edges, 2)[1:-1]  # each row's start and end: a step held over the row
    polygons, off = [], []
    for i in range(len(timeline.site_names)):
        share = timeline.power_share[:, i]
        top = i + 0.45 - 0.9 * np.repeat(share, 2)
        outline = np.column_stack([x, top])
        polygons.append(np.vstack([[edges[0], i + 0.45], outline, [edges[-1], i + 0.45]]))
        dark = share == 0.0
        off += [(a, i - 0.45, w, 0.9) for a, w in _spans(edges[:-1][dark], edges[1:][dark], 0.0)]
    _add(ax, polygons, color="tab:green", alpha=0.28)
    _add(ax, _boxes(off), color="0.88")


def _boxes(boxes: Sequence[tuple[float, float, float, float]]) -> list[np.ndarray]:
    """Rectangles (x, y, width, height) as polygons."""
    return [np.array([[x, y], [x + w, y], [x + w, y + h], [x, y + h]]) for x, y, w, h in boxes]


def _add(ax: Any, polygons: list[np.ndarray], **style: Any) -> None:
    from matplotlib.collections import PolyCollection

    if polygons:
        ax.add_collection(PolyCollection(polygons, linewidths=0, **style), autolim=False)


def _spans(start: np.ndarray, end: np.ndarray, min_w: float) -> list[tuple[float, float]]:
    """(start, width) of the rounds, back-to-back ones merged into one bar, each at least
    ``min_w`` wide so a round of a few minutes in a two-day episode still shows."""
    spans: list[list[float]] = []
    for a, b in zip(start, end, strict=True):
        if spans and a - spans[-1][1] <= 1e-9:
            spans[-1][1] = b
        else:
            spans.append([a, b])
    return [(a, max(b - a, min_w)) for a, b in spans]


def _draw_rounds(ax: Any, run: PolicyRounds, min_w: float, row_pt: float) -> None:
    """Completed rounds as blue bars, lost ones as red bars with a cross at their end, joins
    as black ticks at their start; each kind one artist per panel."""
    done: list[tuple[float, float, float, float]] = []
    lost: list[tuple[float, float, float, float]] = []
    for i in range(run.selected.shape[1]):
        ok, bad = run.completed[:, i], run.dropped[:, i]
        done += [(a, i - 0.2, w, 0.4) for a, w in _spans(run.start_h[ok], run.end_h[ok], min_w)]
        lost += [(a, i - 0.2, w, 0.4) for a, w in _spans(run.start_h[bad], run.end_h[bad], min_w)]
    _add(ax, _boxes(done), color="tab:blue")
    _add(ax, _boxes(lost), color="tab:red")
    r, i = np.nonzero(run.dropped)
    ax.plot(run.end_h[r], i, "x", color="tab:red", ms=0.5 * row_pt, mew=1.2)
    r, i = np.nonzero(run.joins)
    ax.plot(run.start_h[r], i, "|", color="black", ms=0.55 * row_pt, mew=1.0)


def _panel_title(run: PolicyRounds) -> str:
    reached = "target reached" if run.success else "target not reached (TTA at the budget)"
    idle = int((~run.selected.any(axis=1)).sum())
    rounds = f"{len(run.start_h)} rounds" + (f" ({idle} idle)" if idle else "")
    return (
        f"{run.label}: TTA {run.tta_h:.3g} h, {reached}; {rounds}, "
        f"{int(run.joins.sum())} joins, {int(run.dropped.sum())} drop-outs"
    )


def _legend_handles() -> list[Any]:
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    return [
        Patch(color="tab:green", alpha=0.28, label="power: share of its GPUs powered"),
        Patch(color="0.88", label="no power"),
        Patch(color="tab:blue", label="trained (round completed)"),
        Line2D([], [], color="tab:red", marker="x", lw=6,
               label="dropped out: power failed, work lost"),
        Line2D([], [], color="black", marker="|", ls="", ms=10,
               label="join: had not completed the round before"),
    ]  # fmt: skip
