"""One evaluated episode, site by site, recorded for ``timeline.png``: for every policy, the rounds
each site trained in against the power it had, with its joins and drop-outs, and, on a scenario
with a grid carbon intensity series, each site's grid intensity as each round started
(``timeline_figure`` draws it).

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

Where the decision view knows the carbon (``carbon_known``: ``PowerTrip-Carbon-v2``, or a
scenario with a carbon intensity file), the recorder also keeps its ``grid_g_per_kwh`` as each
round starts, the intensity the round's grid energy is charged at, in
``PolicyRounds.grid_g_per_kwh``; without carbon that field is None and nothing else changes.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from powertrip_env.errors import EvaluationError, is_whole
from powertrip_env.units import s_to_h
from powertrip_env.view import DecisionView


@dataclass(frozen=True, eq=False)
class PolicyRounds:
    """One policy's rounds in the episode; (R, N) arrays have a row per round, a column per
    site. ``grid_g_per_kwh`` is None where the scenario has no carbon intensity series (and in
    rounds made by hand without it)."""

    label: str
    start_h: np.ndarray  # (R,) when each round started, hours since the episode's start
    end_h: np.ndarray  # (R,) when it ended
    selected: np.ndarray  # (R, N) bool: started the round (requested and powered)
    dropped: np.ndarray  # (R, N) bool: lost its power before finishing; its work was lost
    joins: np.ndarray  # (R, N) bool: started without having completed the round before
    tta_h: float  # the episode's TTA, as in episodes.csv
    success: bool
    # (R, N) float: each site's grid carbon intensity (g CO2eq/kWh) as the round started, the
    # decision view's ``grid_g_per_kwh``; None when the view has no carbon (``carbon_known``)
    grid_g_per_kwh: np.ndarray | None = None

    @property
    def completed(self) -> np.ndarray:
        """(R, N) bool: the site trained in the round and its work counted."""
        return self.selected & ~self.dropped


@dataclass(frozen=True, eq=False)
class Timeline:
    """The episode ``timeline.png`` draws: every policy's rounds and every site's power (and,
    with carbon, the grid intensity each round started at: ``PolicyRounds.grid_g_per_kwh``)."""

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

    @property
    def has_intensity(self) -> bool:
        """Whether any policy's rounds carry the grid carbon intensity (a carbon scenario)."""
        return any(run.grid_g_per_kwh is not None for run in self.runs)


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


def _sample_power(
    view: DecisionView, gpus: np.ndarray, rows: dict[int, tuple[float, np.ndarray]]
) -> None:
    """Store the current trace row's power share under its absolute row index, which is the
    same for every policy and for the idle run, so their samples merge."""
    row = round((view.clock_s - view.into_row_s) / view.interval_s)
    if row not in rows:
        start_h = s_to_h(view.elapsed_s - view.into_row_s)
        rows[row] = (start_h, np.clip(np.asarray(view.powered_gpus) / gpus, 0.0, 1.0))


class TimelineRecorder:
    """Collects one policy's rounds while ``run_episode`` plays them: ``before`` each step reads
    the decision view (who completed the last round, the power now and, when ``carbon_known``,
    each site's grid carbon intensity now), ``after`` reads info."""

    def __init__(self, label: str) -> None:
        self.label = label
        self.rounds: PolicyRounds | None = None  # set by ``finish``
        self.site_names: tuple[str, ...] = ()
        self.rows: dict[int, tuple[float, np.ndarray]] = {}
        self._gpus = np.ones(0)
        self._start = 0.0
        self._joined = np.zeros(0, dtype=bool)
        self._grid: np.ndarray | None = None  # the view's grid_g_per_kwh now; None: no carbon
        self._rounds: list[tuple[float, float, np.ndarray, np.ndarray, np.ndarray]] = []
        self._intensity: list[np.ndarray | None] = []  # per round, the _grid it started with

    def before(self, env: Any) -> None:
        """Read the decision view at the start of a round."""
        view = env.unwrapped.decision_view()
        if not self.site_names:
            self.site_names = tuple(env.unwrapped.site_names)
            self._gpus = np.array([max(s.gpu_count, 1) for s in view.scenario.sites], float)
        self._start = s_to_h(view.elapsed_s)
        self._joined = np.array(view.joined, dtype=bool)
        n = len(self.site_names)
        known = bool(getattr(view, "carbon_known", False))
        self._grid = np.array(view.grid_g_per_kwh[:n], dtype=float) if known else None
        _sample_power(view, self._gpus, self.rows)

    def after(self, info: dict[str, Any]) -> None:
        """Read the round's info (its per-site arrays cut to the N real sites of a padded env)."""
        n = len(self.site_names)
        selected = np.array(info["selected"][:n], dtype=bool)
        dropped = np.array(info["dropped"][:n], dtype=bool) & selected
        joins = selected & ~self._joined
        self._rounds.append((self._start, s_to_h(info["elapsed_s"]), selected, dropped, joins))
        self._intensity.append(self._grid)

    def finish(self, tta_h: float, success: bool) -> PolicyRounds:
        """The policy's rounds, once its episode has ended (``tta_h`` and ``success`` as in its
        row of episodes.csv); their grid intensity only if every round started knowing it."""
        n = len(self.site_names)
        start, end, selected, dropped, joins = zip(*self._rounds, strict=True)
        stack = [np.array(x, dtype=bool).reshape(-1, n) for x in (selected, dropped, joins)]
        grid = None
        if all(g is not None for g in self._intensity):
            grid = np.array(self._intensity, dtype=float).reshape(-1, n)
        self.rounds = PolicyRounds(
            self.label, np.array(start), np.array(end), *stack, float(tta_h), bool(success), grid
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


class TimelineRecording:
    """The one thing ``evaluate`` asks of this module: record the drawn episode while it plays.

    Made before the run, it checks the seed (``check_timeline_seed``); during the run it hands a
    recorder for the drawn episode of each policy (``recorder``) and takes the episode's row when
    it ends (``finished``); after it, ``timeline`` plays the same seed idle for the power and
    merges everything into the ``Timeline`` the figure draws.
    """

    def __init__(self, value: Any, seed: int, episodes: int) -> None:
        self.seed = check_timeline_seed(value, seed, episodes)
        self.episode = self.seed - seed
        self.start_time = ""  # the drawn episode's, from its row
        self._recorders: list[TimelineRecorder] = []

    def recorder(self, label: str, episode_seed: int) -> TimelineRecorder | None:
        """A new recorder if ``episode_seed`` is the drawn episode's, else ``None``."""
        if episode_seed != self.seed:
            return None
        self._recorders.append(TimelineRecorder(label))
        return self._recorders[-1]

    def finished(self, recorder: TimelineRecorder | None, row: dict[str, Any]) -> None:
        """Close ``recorder`` (if it recorded) with its episode's row of episodes.csv."""
        if recorder is not None:
            recorder.finish(row["tta_h"], row["success"])
            self.start_time = row["start_time"]

    def timeline(self, env: Any) -> Timeline:
        """The recorded episode with every trace row's power, read by playing it idle on ``env``."""
        idle = power_rows(env, self.seed)
        return build_timeline(self.seed, self.episode, self.start_time, self._recorders, idle)
