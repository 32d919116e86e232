"""``timeline.png``: one evaluated episode site by site, as ``timeline`` recorded it.

The box plots and mean curves say how fast each policy is; this figure says why. Each policy
has a panel with a row per site: the power the site had behind the rounds it trained in, its
joins and its drop-outs.

On a scenario with a grid carbon intensity series (the timeline's rounds carry
``PolicyRounds.grid_g_per_kwh``), each completed round's bar is coloured by its site's grid
intensity as the round started, on the sequential ``INTENSITY_CMAP`` (light yellow-green for
low carbon, dark blue-purple for high; no red, which marks the drop-outs) with one fixed scale for
every panel, 0 to the highest intensity recorded; a colorbar labelled ``INTENSITY_LABEL`` stands
in the right margin beside the panels, which are narrowed for it (the figure's size stays
``timeline_size``). Drop-outs and joins are drawn as always, and a timeline without intensities
is drawn exactly as before: blue bars, no colorbar.
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
_RIGHT_IN = 0.2  # right of the panels, without a colorbar
# With intensities: the colorbar, in the right margin beside the panels (from the first panel's
# top down, at most _CBAR_MAX_H_IN tall), then its tick labels and its label.
_CBAR_GAP_IN = 0.2  # between the panels and the colorbar
_CBAR_W_IN = 0.16
_CBAR_TEXT_IN = 0.85  # the colorbar's tick labels and rotated label, right of it
_CBAR_MAX_H_IN = 4.0
INTENSITY_CMAP = "viridis_r"  # sequential: low carbon light yellow-green, high dark purple
INTENSITY_LABEL = "grid carbon intensity (gCO₂eq/kWh)"


def _row_in(n_sites: int) -> float:
    """Height of one site's row, in inches."""
    return float(np.clip(2.6 / n_sites, 0.14, 0.26))


def timeline_size(n_sites: int, n_policies: int) -> tuple[float, float]:
    """(width, height) in inches of the timeline of ``n_policies`` panels of ``n_sites`` rows."""
    panel = n_sites * _row_in(n_sites) + _TITLE_IN + _TICKS_IN
    return _WIDTH_IN, round(_HEADER_IN + n_policies * panel + _XLABEL_IN, 2)


def _panels(
    fig: Any,
    n_sites: int,
    n_policies: int,
    label_pt: float,
    names: Sequence[str],
    right_in: float = _RIGHT_IN,
) -> Any:
    """The stacked axes, placed by hand in inches: the constrained layout measures every tick
    label of every panel, which takes seconds for a dozen panels of 32 sites. ``right_in`` is
    the margin right of them (wider when a colorbar stands there)."""
    width, height = fig.get_size_inches()
    left = 0.2 + 0.6 * label_pt / 72.0 * max(len(name) for name in names)
    axes_h = n_sites * _row_in(n_sites)
    grid = {
        "left": left / width,
        "right": 1.0 - right_in / width,
        "top": 1.0 - (_HEADER_IN + _TITLE_IN) / height,
        "bottom": (_TICKS_IN + _XLABEL_IN) / height,
        "hspace": (_TITLE_IN + _TICKS_IN) / axes_h,
    }
    return fig.subplots(n_policies, 1, sharex=True, squeeze=False, gridspec_kw=grid)[:, 0]


def timeline_figure(timeline: Timeline, heading: str) -> Any:
    """One panel per policy, stacked on one time axis; in each, one row per site: its power
    share as a green area, its completed rounds as blue bars, its drop-outs as red bars with a
    cross, its joins as black ticks at the round's start.

    When the rounds carry the grid carbon intensity (``Timeline.has_intensity``), a completed
    round's bar is coloured instead by its site's intensity as it started (``INTENSITY_CMAP``,
    one scale from 0 to the highest intensity recorded, shared by all panels), and a colorbar
    labelled ``INTENSITY_LABEL`` stands right of the panels, which are narrowed for it."""
    n, runs = len(timeline.site_names), timeline.runs
    row_pt = _row_in(n) * 72.0
    label_pt = min(9.0, 0.62 * row_pt)
    fig = agg_figure(*timeline_size(n, len(runs)), dpi=DPI)
    colour = _intensity_colours(runs)  # None: no intensities, the figure as without carbon
    right_in = _RIGHT_IN if colour is None else _CBAR_GAP_IN + _CBAR_W_IN + _CBAR_TEXT_IN
    axes = _panels(fig, n, len(runs), label_pt, timeline.site_names, right_in)
    end = max([float(r.end_h[-1]) for r in runs if r.end_h.size] + [1e-9])
    min_w = _MIN_BAR_SHARE * end
    for ax, run in zip(axes, runs, strict=True):
        _draw_power(ax, timeline, end)
        if colour is not None and run.grid_g_per_kwh is not None:
            _draw_rounds_by_intensity(ax, run, min_w, row_pt, colour)
        else:
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
    handles = _legend_handles(colour)
    fig.legend(
        handles=handles,
        loc="upper center",
        ncol=5,
        fontsize=9,
        title=title,
        title_fontsize=12,
        frameon=False,
        bbox_to_anchor=(0.5, 1.0),
    )
    if colour is not None:
        _colorbar(fig, axes[0], colour)
    return fig


def _intensity_colours(runs: Sequence[PolicyRounds]) -> Any:
    """The ``ScalarMappable`` that colours the rounds by grid intensity: ``INTENSITY_CMAP`` on
    one fixed scale for every panel, 0 to the highest intensity any policy's rounds recorded;
    None when no rounds carry an intensity."""
    grids = [run.grid_g_per_kwh for run in runs if run.grid_g_per_kwh is not None]
    if not grids:
        return None
    from matplotlib.cm import ScalarMappable
    from matplotlib.colors import Normalize

    top = max([float(np.max(g)) for g in grids if g.size] + [0.0])
    return ScalarMappable(Normalize(0.0, top if top > 0 else 1.0), INTENSITY_CMAP)


def _colorbar(fig: Any, first: Any, colour: Any) -> None:
    """The intensity colorbar in the right margin, placed by hand like the panels: its top at
    the first panel's, beside the panels' stack, at most ``_CBAR_MAX_H_IN`` tall."""
    width, height = fig.get_size_inches()
    box = first.get_position()  # figure fractions
    top_in = box.y1 * height
    stack_in = top_in - (_TICKS_IN + _XLABEL_IN)
    h_in = min(stack_in, _CBAR_MAX_H_IN)
    x_in = box.x1 * width + _CBAR_GAP_IN
    cax = fig.add_axes((x_in / width, (top_in - h_in) / height, _CBAR_W_IN / width, h_in / height))
    bar = fig.colorbar(colour, cax=cax)
    bar.set_label(INTENSITY_LABEL, fontsize=9)
    bar.ax.tick_params(labelsize=8)


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


def _intensity_spans(
    start: np.ndarray, end: np.ndarray, value: np.ndarray, min_w: float
) -> list[tuple[float, float, float]]:
    """(start, width, intensity) of the rounds, as ``_spans``, but back-to-back rounds merged
    only while their intensity is the same (rounds in one trace row), so each bar has one."""
    spans: list[list[float]] = []
    for a, b, g in zip(start, end, value, strict=True):
        if spans and a - spans[-1][1] <= 1e-9 and g == spans[-1][2]:
            spans[-1][1] = b
        else:
            spans.append([a, b, float(g)])
    return [(a, max(b - a, min_w), g) for a, b, g in spans]


def _draw_rounds_by_intensity(
    ax: Any, run: PolicyRounds, min_w: float, row_pt: float, colour: Any
) -> None:
    """As ``_draw_rounds``, but each completed round's bar coloured by its site's grid carbon
    intensity as it started (through ``colour``, the figure's shared scale); drop-outs and joins
    as there."""
    assert run.grid_g_per_kwh is not None
    done: list[tuple[float, float, float, float]] = []
    shade: list[float] = []
    lost: list[tuple[float, float, float, float]] = []
    for i in range(run.selected.shape[1]):
        ok, bad = run.completed[:, i], run.dropped[:, i]
        spans = _intensity_spans(run.start_h[ok], run.end_h[ok], run.grid_g_per_kwh[ok, i], min_w)
        done += [(a, i - 0.2, w, 0.4) for a, w, _ in spans]
        shade += [g for _, _, g in spans]
        lost += [(a, i - 0.2, w, 0.4) for a, w in _spans(run.start_h[bad], run.end_h[bad], min_w)]
    if done:
        _add(ax, _boxes(done), facecolors=colour.to_rgba(np.array(shade)), gid="completed")
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


def _legend_handles(colour: Any = None) -> list[Any]:
    """The header's legend; with ``colour`` (intensities) the trained bar is shown in the
    middle of the intensity scale and says the colorbar gives its colour."""
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    trained = Patch(color="tab:blue", label="trained (round completed)")
    if colour is not None:
        trained = Patch(color=colour.get_cmap()(0.5), label="trained (colour: grid carbon)")
    return [
        Patch(color="tab:green", alpha=0.28, label="power: share of its GPUs powered"),
        Patch(color="0.88", label="no power"),
        trained,
        Line2D(
            [], [], color="tab:red", marker="x", lw=6, label="dropped out: power failed, work lost"
        ),
        Line2D(
            [],
            [],
            color="black",
            marker="|",
            ls="",
            ms=10,
            label="join: had not completed the round before",
        ),
    ]
