"""What a track is: one kind of task, declared once, and everything that scores its tasks.

A track names what its tasks ask (the ``objective`` its IDs are registered with, the
``measure`` its board is scored on), the policies that play them (its deployable ``rules``, the
rules it ``tells`` the draw, its clairvoyant ``references``), the two ends of its score (``zero``
and ``top``), its bound, the tables of its tasks' facts, its board and its figures. The
benchmark, ``evaluate --policies all``, ``readme-tables``, the agents' final table and the
generated docs ask a task's track for these, so a new kind of task is one declaration: a
``Track`` (or a subclass overriding what it scores differently) given to
``powertrip_env.harness.tracks.register_track``, and IDs registered on it with
``powertrip_env.register_task(..., track=<its name>)``.

``Track`` itself scores any lower-is-better column of ``evaluate``'s episodes (``measure.key``:
hours, kWh, kg) against ``top``; the shipped tracks (``time.KNOWN``, ``time.MEASURED``,
``carbon.CARBON``) add their bounds, brackets, chains and figures, as bsuite's experiments each
keep their own analysis beside their environment.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import gymnasium as gym
import pandas as pd

from powertrip_env.dynamics.params import SimParams
from powertrip_env.harness.evaluation.results import ZERO
from powertrip_env.harness.reports import leaderboard
from powertrip_env.harness.reports.measures import TIME, Measure

Facts = dict[str, dict[str, Any]]
"""Each task's facts, by ID (the JSON's ``tasks`` entries without their policies)."""
Section = Callable[[Facts], list[str]]
"""Lines of Markdown over the facts of the tasks whose tracks show it (``Track.sections``)."""

SCORED_COLUMNS = ("policy", "episode", "start_time", "tta_h", "success")
"""The columns of ``evaluate``'s episodes every track's frame keeps."""


class Track:
    """One kind of task: what it asks, who plays it, and how its board is scored.

    Args:
        name: what the track is called; IDs join it by this name
            (``powertrip_env.register_task(..., track=name)``) and the JSON groups by it.
        title: its board's heading.
        rules: ``rules(n_sites, measured) -> names``: its deployable baselines, which
            ``evaluate --policies all`` and the benchmark play (``measured``: the task's
            scenario draws unknowns, ``SimParams.measured``).
        references: the clairvoyant references ``--policies references`` plays on it; ``top``
            is among them.
        top: the reference at score 1 (its feasible plan).
        zero: the policy at score 0.
        told: ``told(measured) -> names``: references that are told the episode's draw but
            not its future, played beside the rules (the measured track's ``Informed``).
        board_references: the references the benchmark plays (default ``references``).
        objective: the ``reward_mode`` its IDs are registered with (``None``: the env's
            default, the time reward).
        measure: what its board is scored on (lower is better): its name, unit and the column
            of ``evaluate``'s episodes that holds it.
        final_policies: the policies the agents' final table compares an agent with, as
            ``--final-policies`` takes them (default: ``zero`` and the references).
        about: what a task of the track is, as the generated pages of its IDs say it.
    """

    def __init__(
        self,
        name: str,
        *,
        title: str,
        rules: Callable[[int, bool], list[str]],
        references: Sequence[str],
        top: str,
        zero: str = ZERO,
        told: Callable[[bool], list[str]] = lambda measured: [],
        board_references: Sequence[str] | None = None,
        objective: str | None = None,
        measure: Measure = TIME,
        final_policies: str = "",
        about: str = "",
    ) -> None:
        if top not in references or (board_references is not None and top not in board_references):
            raise ValueError(
                f"track {name!r}: top={top!r} is not among references {references} (and "
                f"board_references {board_references}): the board plays its score's 1"
            )
        self.name = name
        self.title = title
        self._rules = rules
        self.references = tuple(references)
        self.board_references = tuple(references if board_references is None else board_references)
        self.top = top
        self.zero = zero
        self._told = told
        self.objective = objective
        self.measure = measure
        self.final_policies = final_policies or ",".join([zero, *self.references])
        self.about = about or f"task of the {name} track, scored on {measure.name}"

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r})"

    # ------------------------------------------------------------------ who plays it

    def rules(self, n_sites: int, measured: bool) -> list[str]:
        """Its deployable baselines on a task of ``n_sites`` sites."""
        return list(self._rules(n_sites, measured))

    def told(self, measured: bool) -> list[str]:
        """The references it tells the episode's draw, played beside the rules."""
        return list(self._told(measured))

    def starts(self, n_sites: int, measured: bool) -> list[str]:
        """The policies whose episodes its planning references start from, so none of them is
        beaten by a shipped policy in any episode: the rules, then those told the draw. The
        pinned results depend on this list (tests/test_versions.py pins it per task)."""
        return [*self.rules(n_sites, measured), *self.told(measured)]

    # ------------------------------------------------------------------ how it is scored

    bound_label: str | None = None
    """The ``policy`` of its bound's rows in a run's episodes (``bound``), which no board
    scores; ``None`` without a bound."""

    def bound(self, env: gym.Env, episodes: int, seed: int) -> pd.DataFrame | None:
        """Rows of a bound no policy beats, one per paired episode (columns ``policy, episode``
        and the measure's key), or ``None``: the plain track has none."""
        return None

    def values(self, played: pd.DataFrame, params: SimParams) -> pd.Series:
        """Each of ``evaluate``'s episodes (``played``) on the track's measure: the column
        ``measure.key`` where ``evaluate`` writes it (the time tracks' ``tta_h``)."""
        return played[self.measure.key]

    def on_measure(self, episodes: pd.DataFrame) -> pd.DataFrame:
        """``episodes`` with the measure where the boards read a policy's value (``tta_h``):
        the statistics are the same for any lower-is-better measure."""
        key = self.measure.key
        return episodes if key == "tta_h" else episodes.assign(tta_h=episodes[key])

    def score(
        self,
        env_id: str,
        played: pd.DataFrame,
        bounds: pd.DataFrame | None,
        params: SimParams,
        contenders: list[str],
    ) -> tuple[pd.DataFrame, dict[str, Any]]:
        """A task's frame (its episodes, and a bound's rows) and facts, from ``evaluate``'s
        episodes: the mean of ``top`` on the measure and whether any of ``contenders`` (the
        rules and those told the draw) beat it in an episode."""
        key = self.measure.key
        columns = [*SCORED_COLUMNS, *([key] if key not in SCORED_COLUMNS else [])]
        frame = played[columns].copy()
        frame.insert(0, "task", env_id)
        cost = frame.pivot(index="episode", columns="policy", values=key)
        return frame, {
            "track": self.name,
            f"optimum_upper_{self.measure.unit}": float(cost[self.top].mean()),
            "reference_never_beaten": never_beaten(cost, self.top, contenders),
            "episodes": int(cost.shape[0]),
            "n_sites": int(params.n_sites),
        }

    def board(self, episodes: pd.DataFrame) -> leaderboard.Board:
        """The board of its tasks' scored episodes: 0 = ``zero`` and 1 = ``top``."""
        return leaderboard.board(
            self.on_measure(episodes), self.zero, self.top, measure=self.measure
        )

    def sections(self) -> list[Section]:
        """The tables of its tasks' facts, in the order the benchmark prints them; tracks that
        share a section (the time tracks' bracket) show it once, over all their tasks."""
        return [self.facts_lines]

    def facts_lines(self, facts: Facts) -> list[str]:
        """Each task's reference on the measure, and whether a rule beat it."""
        unit = self.measure.unit
        lines = [
            f"| task | sites | {self.top} ({unit}) | never beaten |",
            "|---|---:|---:|---|",
        ]
        for task, f in facts.items():
            lines.append(
                f"| {task} | {f['n_sites']} | {f[f'optimum_upper_{unit}']:.2f} | "
                f"{f['reference_never_beaten']} |"
            )
        return [*lines, "", f"{self.title}: scored on {self.measure.name} ({unit}).", ""]

    def figures(self, episodes: pd.DataFrame, facts: Facts, folder: Path) -> list[str]:
        """Draw its figures of a run into ``folder`` (``facts``: its tasks' JSON entries);
        returns their file names. The plain track draws none."""
        return []


def with_bound_rows(frame: pd.DataFrame, bounds: pd.DataFrame, zero: str, key: str) -> pd.DataFrame:
    """``frame``'s episodes and a bound's rows (its value in column ``key``), each on the start
    time its episode had (``zero``'s row says it); the bound plays no round and reaches the
    target by construction."""
    starts = frame.loc[frame["policy"] == zero, ["episode", "start_time"]]
    rows = bounds[["policy", "episode", key]].merge(starts, on="episode")
    rows["success"] = True
    return pd.concat([frame, rows], ignore_index=True)


def bracket(
    per_episode: pd.DataFrame,
    *,
    fixed: str,
    top: str,
    bound: str,
    unit: str,
    contenders: Sequence[str],
) -> dict[str, Any]:
    """A bracketed task's facts from its per-episode values (one column per policy, lower is
    better): the optimiser headroom ``fixed`` / ``top``, the bracket between ``top``'s feasible
    plan and ``bound`` (keys in ``unit``), their gap, and whether ``top`` and the bound held
    against ``contenders`` in every episode."""
    mean = per_episode.mean()
    return {
        "optimiser_headroom": float(mean[fixed] / mean[top]),
        f"optimum_upper_{unit}": float(mean[top]),
        f"optimum_lower_{unit}": float(mean[bound]),
        "gap": float(mean[top] / mean[bound]),
        "reference_never_beaten": never_beaten(per_episode, top, contenders),
        "bound_holds": bound_holds(per_episode, bound),
        "episodes": int(per_episode.shape[0]),
    }


def never_beaten(cost: pd.DataFrame, top: str, contenders: Sequence[str]) -> bool:
    """Whether ``top`` (a column of per-episode costs) is at most every contender's in every
    episode, up to a rounding's 1e-9."""
    if not len(contenders):
        return True
    return bool((cost[top] <= cost[list(contenders)].min(axis=1) + 1e-9).all())


def bound_holds(per_episode: pd.DataFrame, bound: str) -> bool:
    """Whether the column ``bound`` is at most every other column of ``per_episode`` (a pivot of
    TTAs, or of another lower-is-better measure, one row per episode, one column per policy) in
    every episode, within 1e-9 for rounding: a relaxation no policy beats."""
    others = per_episode.drop(columns=[bound]).to_numpy()
    return bool((per_episode[bound].to_numpy()[:, None] <= others + 1e-9).all())


def chain_table(
    rows: Sequence[tuple[str, Mapping[str, Any]]], heads: Mapping[str, str], key: str, digits: int
) -> list[str]:
    """The room chains of ``rows`` (task, facts with a ``chain``) as a Markdown table: a column
    per step, headed ``heads[step]``, each cell the step's policy, its mean ``key`` to
    ``digits`` decimals and (in brackets) its share of the room, then the learnable room. The
    measured, moving and carbon tracks lay out their chains alike."""
    steps = [link["step"] for link in rows[0][1]["chain"]]
    lines = [
        "| task | " + " | ".join(heads[step] for step in steps) + " | learnable room |",
        "|---|" + "---:|" * (len(steps) + 1),
    ]
    for task, f in rows:
        cells = []
        for link in f["chain"]:
            share = f" ({link['share']:.0%})" if "share" in link else ""
            cells.append(f"{link['policy']} {link[key]:.{digits}f}{share}")
        lines.append(f"| {task} | {' | '.join(cells)} | {f['learnable_room']:.3f} |")
    return lines


def facts_of(facts: Mapping[str, Mapping[str, Any]], tasks: Sequence[str]) -> Facts:
    """The facts of ``tasks``, in their order."""
    return {task: dict(facts[task]) for task in tasks}
