"""One evaluated episode, site by site (``timeline.png``): for every policy, the rounds each site
trained in against the power it had, with its joins and drop-outs.

The box plots and mean curves say how fast each policy is; this figure says why. A policy that
churns through sites pays a join every time a site comes back, one that keeps a site whose power
is failing loses that site's work to drop-outs, and one that waits for power leaves sites idle.

The rounds are recorded during the evaluation's own play of the episode (``evaluate.run_episode``
calls a ``TimelineRecorder``), not by a second run of it: RandomK and OortLike seed their
generator from how many episodes they have played, so a fresh policy replaying episode ``e``
would play another episode than the evaluation did, and a planner would pay its search twice.
The recorder reads only what any user of the env can: ``info`` and the decision view. The power
comes from the same seed played idle (``power_rows``): an idle round moves the clock by one trace
row, so the decision view then reads every row's power, for every policy alike.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from powertrip_env.errors import EvaluationError, is_whole
from powertrip_env.render import agg_figure

_S_PER_H = 3600.0
# The figure's geometry in inches: one row per site in each policy's panel. Rows get thinner as
# sites get more, down to what a 6 pt site name still fits in.
_WIDTH_IN = 13.0
_HEADER_IN = 0.7  # the figure's title and legend
_TITLE_IN = 0.3  # a panel's title, above it
_TICKS_IN = 0.45  # a panel's time axis, below it
_XLABEL_IN = 0.25  # the time axis's label, under the last panel
DPI = 100
_MIN_BAR_SHARE = 0.0012  # a round is drawn at least this share of the axis wide (~1.5 px)


@dataclass(frozen=True, eq=False)
class PolicyRounds:
    """One policy's rounds in the episode; (R, N) arrays have a row per round, a column per
    site."""

    label: str
    start_h: np.ndarray  # (R,) when each round started, hours since the episode's start
    end_h: np.ndarray  # (R,) when it ended
    selected: np.ndarray  # (R, N) bool: started the round (requested and powered)
    dropped: np.ndarray  # (R, N) bool: lost its power before finishing; its work was lost
    joins: np.ndarray  # (R, N) bool: started without having completed the round before
    tta_h: float  # the episode's TTA, as in episodes.csv
    success: bool

    @property
    def completed(self) -> np.ndarray:
        """(R, N) bool: the site trained in the round and its work counted."""
        return self.selected & ~self.dropped


@dataclass(frozen=True, eq=False)
class Timeline:
    """The episode ``timeline.png`` draws: every policy's rounds and every site's power."""

    seed: int  # the episode's reset seed (seed + e)
    episode: int  # e
    start_time: str  # ISO-8601 UTC on the power data's calendar
    site_names: tuple[str, ...]
    power_h: np.ndarray  # (K,) start of each trace row, hours since the episode's start
    power_share: np.ndarray  # (K, N) powered GPUs over the site's GPUs in that row
    runs: tuple[PolicyRounds, ...]  # in the evaluation's order

    def run(self, label: str) -> PolicyRounds:
        """The rounds of the policy labelled ``label``."""
        for run in self.runs:
            if run.label == label:
                return run
        have = [r.label for r in self.runs]
        raise KeyError(f"no policy {label!r} in the timeline; it has {have}")


def check_timeline_seed(value: Any, seed: int, episodes: int) -> int:
    """The reset seed of the episode to draw: ``value``, or the first episode's when None.

    It must be the seed of an evaluated episode, because the timeline is recorded while the
    evaluation plays it (see the module's docstring); the error names the seeds there are.
    """
    if value is None:
        return seed
    last = seed + episodes - 1
    allowed = f"{seed}" if episodes == 1 else f"{seed} to {last}"
    if not is_whole(value) or not seed <= value <= last:
        raise EvaluationError(
            f"timeline seed {value!r} is not one of this run's episodes: episode e resets with "
            f"seed + e, so with seed {seed} and {episodes} episode{'s' * (episodes != 1)} the "
            f"timeline seed must be {allowed}"
        )
    return int(value)


# --------------------------------------------------------------------------- recording


def _sample_power(view: Any, gpus: np.ndarray, rows: dict[int, tuple[float, np.ndarray]]) -> None:
    """Store the current trace row's power share under its absolute row index, which is the
    same for every policy and for the idle run, so their samples merge."""
    row = round((view.clock_s - view.into_row_s) / view.interval_s)
    if row not in rows:
        start_h = (view.elapsed_s - view.into_row_s) / _S_PER_H
        rows[row] = (start_h, np.clip(np.asarray(view.powered_gpus) / gpus, 0.0, 1.0))


class TimelineRecorder:
    """Collects one policy's rounds while ``run_episode`` plays them: ``before`` each step reads
    the decision view (who completed the last round, the power now), ``after`` reads info."""

    def __init__(self, label: str) -> None:
        self.label = label
        self.rounds: PolicyRounds | None = None  # set by ``finish``
        self.site_names: tuple[str, ...] = ()
        self.rows: dict[int, tuple[float, np.ndarray]] = {}
        self._gpus = np.ones(0)
        self._start = 0.0
        self._joined = np.zeros(0, dtype=bool)
        self._rounds: list[tuple[float, float, np.ndarray, np.ndarray, np.ndarray]] = []

    def before(self, env: Any) -> None:
        """Read the decision view at the start of a round."""
        view = env.unwrapped.decision_view()
        if not self.site_names:
            self.site_names = tuple(env.unwrapped.site_names)
            self._gpus = np.array([max(s.gpu_count, 1) for s in view.scenario.sites], float)
        self._start = view.elapsed_s / _S_PER_H
        self._joined = np.array(view.joined, dtype=bool)
        _sample_power(view, self._gpus, self.rows)

    def after(self, info: dict[str, Any]) -> None:
        """Read the round's info (its per-site arrays cut to the N real sites of a padded env)."""
        n = len(self.site_names)
        selected = np.array(info["selected"][:n], dtype=bool)
        dropped = np.array(info["dropped"][:n], dtype=bool) & selected
        joins = selected & ~self._joined
        self._rounds.append((self._start, info["elapsed_s"] / _S_PER_H, selected, dropped, joins))

    def finish(self, tta_h: float, success: bool) -> PolicyRounds:
        """The policy's rounds, once its episode has ended (``tta_h`` and ``success`` as in its
        row of episodes.csv)."""
        n = len(self.site_names)
        start, end, selected, dropped, joins = zip(*self._rounds, strict=True)
        stack = [np.array(x, dtype=bool).reshape(-1, n) for x in (selected, dropped, joins)]
        self.rounds = PolicyRounds(
            self.label, np.array(start), np.array(end), *stack, float(tta_h), bool(success)
        )
        return self.rounds


def power_rows(env: Any, seed: int) -> dict[int, tuple[float, np.ndarray]]:
    """Every trace row's power share in the episode of ``seed``, read by playing it idle.

    The start time depends only on the seed, and the power only on the trace, so the rows are
    the ones every policy met. An idle round moves the clock by one trace row, and the episode
    ends at the time budget, or at ``max_rounds`` (rows after that come from the policies' own
    round starts, which the recorders sampled).
    """
    env.reset(seed=seed)
    view = env.unwrapped.decision_view()
    gpus = np.array([max(s.gpu_count, 1) for s in view.scenario.sites], float)
    idle = np.zeros(env.action_space.shape, dtype=env.action_space.dtype)
    rows: dict[int, tuple[float, np.ndarray]] = {}
    while True:
        _sample_power(env.unwrapped.decision_view(), gpus, rows)
        _, _, terminated, truncated, _ = env.step(idle)
        if terminated or truncated:
            return rows


def build_timeline(
    seed: int,
    episode: int,
    start_time: str,
    recorders: Sequence[TimelineRecorder],
    idle_rows: dict[int, tuple[float, np.ndarray]],
) -> Timeline:
    """Merge the finished recorders' rounds and every power sample (the idle run's and the
    round starts') by trace row."""
    rows = dict(idle_rows)
    for recorder in recorders:
        for row, sample in recorder.rows.items():
            if row in rows and not np.array_equal(rows[row][1], sample[1]):
                raise RuntimeError(  # another episode than the evaluation's: a bug, not input
                    f"{recorder.label} met other power than the idle run in trace row {row}"
                )
            rows.setdefault(row, sample)
    runs = [r.rounds for r in recorders if r.rounds is not None]
    order = sorted(rows)
    names = recorders[0].site_names
    power_h = np.array([max(rows[r][0], 0.0) for r in order])
    share = np.array([rows[r][1] for r in order]).reshape(len(order), len(names))
    return Timeline(seed, episode, start_time, names, power_h, share, tuple(runs))


# --------------------------------------------------------------------------- the figure


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
