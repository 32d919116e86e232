"""Evaluate site-selection policies and saved agents on identical episodes.

Every policy (and every saved SB3 agent) runs the same episodes: episode ``e`` starts with
``env.reset(seed=seed + e)``, which fixes both the start time in the trace and the jitter
stream, because the environment derives both from its seed and no policy touches it.
Differences between policies are therefore paired, episode by episode, which is what makes a
few dozen episodes enough to rank them.

Command line::

    powertrip evaluate --env PowerTrip-v0 --policies all --episodes 30
    powertrip evaluate --policies PowerTrip,AllSites --model runs/ppo.zip --algo ppo
    powertrip evaluate --scenario my_sites.toml --episodes 10

writes ``episodes.csv``, ``summary.md``, ``tta.png``, ``tta_paired.png``,
``accuracy_vs_time.png`` and ``timeline.png`` (the first episode, or the one whose seed
``--timeline SEED`` gives) to ``--out`` (default ``results/<env>-<split>``, or
``results/<env>-<scenario stem>-<split>`` with ``--scenario``) as one set, and prints the
summary. A ``--out`` that holds an earlier run's files is refused unless ``--force``, which
replaces them once the new set is complete. Bad arguments (unknown policy or environment, a
broken scenario or trace, a missing or incompatible model, a model that could only be loaded by
running code stored in it, a used or unwritable output folder, a ``--timeline`` seed that is
not one of the run's episodes) exit with code 2 and a message, before any episode runs. A set
that cannot be written (a full disk) exits 2 too, with one line naming the folder and the error;
its summary is printed first, so the run's table is not lost, and the folder keeps what it held.

A model file is code: SB3 pickles the policy class and other objects into its zips, and
unpickling runs whatever the file names. Models are loaded without unpickling anything in them
(``powertrip_env.harness.models.loading``, which also says how a policy class of ``agents`` is found
without this package importing it); an RLlib checkpoint is loaded by Ray, which unpickles, so
evaluate only checkpoints you trust.
"""

from __future__ import annotations

import argparse
import importlib.util
import math
import os
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import pandas as pd

from powertrip_env.atomic import (
    OutputDirError,
    result_dir,
    stop_codes,
    write_text,
)
from powertrip_env.baselines.base import Policy
from powertrip_env.baselines.carbon_references import priced_misses_kg
from powertrip_env.baselines.registry import make_policy
from powertrip_env.episodes import SPLITS
from powertrip_env.errors import EvaluationError, ResultsNotWritten, is_whole
from powertrip_env.harness.arguments import (
    add_env,
    add_episodes,
    add_force,
    add_no_progress,
    add_out,
    add_seed,
    check_env_id,
    check_out_dir,
    make_env,
)
from powertrip_env.harness.evaluation.figures import FIGURES
from powertrip_env.harness.evaluation.results import (
    EPISODE_COLUMNS,
    SUMMARY_COLUMNS,
    ZERO,
    Evaluation,
)
from powertrip_env.harness.evaluation.statistics import day_bootstrap_ci95, start_days
from powertrip_env.harness.evaluation.timeline import Timeline, TimelineRecorder, TimelineRecording
from powertrip_env.harness.models.loading import ALGOS, load_agent, model_label
from powertrip_env.harness.tracks import track_for
from powertrip_env.render import has_matplotlib, save_png
from powertrip_env.scenario.power_data import iso_utc
from powertrip_env.units import s_to_h

# --------------------------------------------------------------------------- running


@dataclass
class _Entry:
    """A policy ready to run, with the env keyword arguments it needs."""

    label: str
    policy: Policy
    env_kwargs: dict[str, Any]


def run_episode(
    env: gym.Env, policy: Policy, seed: int, recorder: TimelineRecorder | None = None
) -> tuple[dict[str, Any], tuple[np.ndarray, np.ndarray]]:
    """One episode of ``policy``: its CSV row (without policy/episode) and accuracy curve.

    A ``recorder`` reads the decision view before every round and info after it: what
    ``timeline.png`` draws is then this very episode, as the policy played it here.
    """
    obs, info = env.reset(seed=seed)
    policy.reset(env)
    start = iso_utc(info["trace_time"])
    hours = [0.0]
    acc = [float(env.unwrapped.decision_view().accuracy)]
    sites: list[int] = []
    comm_s = busy_s = 0.0  # over the non-idle rounds
    width = env.action_space.shape[0]
    while True:
        if recorder is not None:
            recorder.before(env)
        action = policy.act(obs, info)
        if len(action) < width:  # a baseline acts on the N real sites of a padded env
            action = np.concatenate([action, np.zeros(width - len(action), action.dtype)])
        obs, _, terminated, truncated, info = env.step(action)
        if recorder is not None:
            recorder.after(info)
        hours.append(s_to_h(info["elapsed_s"]))
        acc.append(info["accuracy"])
        if not info["idle"]:
            sites.append(info["n_selected"])
            comm_s += float(info["comm_s"])
            busy_s += float(info["round_time_s"])
        if terminated or truncated:
            break
    row = {
        "seed": seed,
        "start_time": start,
        "tta_h": info["tta_h"],
        "success": bool(terminated),
        "rounds": int(info["rounds"]),
        "energy_kwh": float(info["energy_kwh"]),
        # NaN where the scenario has no carbon intensity: unknown, and tables leave it out
        "carbon_kg": float(info["carbon_kg"]) if env.unwrapped.params.carbon else math.nan,
        "mean_sites": float(np.mean(sites)) if sites else 0.0,
        "comm_share": comm_s / busy_s if busy_s > 0 else 0.0,  # of the non-idle rounds' time
        "comm_s": comm_s,  # the sums behind it, so that shares pool over episodes
        "active_s": busy_s,
    }
    return row, (np.asarray(hours), np.asarray(acc))


def summary_table(
    episodes: pd.DataFrame, order: Sequence[str], carbon_ref_kg: float = 0.0
) -> pd.DataFrame:
    """One row per policy; the CI is the day bootstrap of ``day_bootstrap_ci95``. With a
    ``carbon_ref_kg`` (a carbon task's price of a miss), the mean carbon cost too."""
    rows = []
    for label in order:
        ep = episodes[episodes["policy"] == label]
        tta = ep["tta_h"].to_numpy(dtype=np.float64)
        low, high = day_bootstrap_ci95(tta, start_days(ep["start_time"]))
        rows.append(
            {
                "policy": label,
                "episodes": len(ep),
                "mean_tta_h": float(tta.mean()),
                "ci95_tta_h": (high - low) / 2.0,
                "ci95_lo_h": low,
                "ci95_hi_h": high,
                "median_tta_h": float(np.median(tta)),
                "success_rate": float(ep["success"].mean()),
                "mean_rounds": float(ep["rounds"].mean()),
                "mean_energy_kwh": float(ep["energy_kwh"].mean()),
                "mean_carbon_kg": float(ep["carbon_kg"].mean()),
                "mean_carbon_cost_kg": float(
                    np.mean(priced_misses_kg(ep["carbon_kg"], ep["success"], carbon_ref_kg))
                )
                if carbon_ref_kg > 0.0
                else math.nan,
                "mean_sites": float(ep["mean_sites"].mean()),
            }
        )
    summary = pd.DataFrame(rows, columns=SUMMARY_COLUMNS[:-1])
    ref = summary.loc[summary["policy"] == ZERO, "mean_tta_h"]
    if len(ref):
        summary["vs_powertrip_pct"] = 100.0 * (summary["mean_tta_h"] / float(ref.iloc[0]) - 1.0)
    else:
        summary["vs_powertrip_pct"] = math.nan
    return summary


def evaluate(
    env_id: str,
    policies: Sequence[str | Policy],
    *,
    episodes: int = 30,
    split: str = "test",
    seed: int = 0,
    models: Sequence[tuple[str, str]] = (),
    env_kwargs: Mapping[str, Any] | None = None,
    out_dir: str | os.PathLike[str] | None = None,
    progress: bool = True,
    force: bool = False,
    timeline: int | None = None,
    probe: gym.Env | None = None,
) -> Evaluation:
    """Run policies and saved agents on the same episodes and summarise time-to-accuracy.

    Args:
        env_id: a registered PowerTrip ID, e.g. ``"PowerTrip-v0"``.
        policies: policy names (see ``registry.make_policy``; ``"all"`` expands to the
            deployable baselines of the task's track, ``"references"`` to its clairvoyant
            references: ``powertrip_env.harness.tracks``) or ``Policy`` instances. A planning
            reference starts from the episodes of the track's rules (``Track.starts``).
        episodes: paired episodes per policy; episode e resets with ``seed + e``.
        split: ``"test"`` (held-out days, default), ``"train"`` or ``"all"``.
        seed: base seed of the episodes and of the randomised policies.
        models: ``(path, algo)`` pairs of saved SB3 agents, algo in ``ppo``, ``a2c``,
            ``maskable_ppo``; labelled by file stem. The env is made with the observation and
            action modes the agent was trained with.
        env_kwargs: extra ``gym.make`` arguments (e.g. ``scenario=...``, ``jitter=False``).
        out_dir: if given, write ``episodes.csv``, ``summary.md`` and the figures there, as a
            set (see ``write_outputs``). A folder that already holds files is refused before
            anything runs, unless ``force``.
        progress: show a progress bar on stderr (only when stderr is a terminal).
        force: replace the files of an earlier run in ``out_dir`` (all of them, once this
            run's set is complete).
        timeline: the reset seed (``seed + e``) of the episode ``timeline.png`` draws, recorded
            while it is evaluated; None for the first, ``seed``.
        probe: an env of ``env_id`` made with ``env_kwargs`` and ``split`` (the caller's, which
            it closes) to read the sites from, so a report needing one anyway makes one, not two.

    Returns:
        An ``Evaluation``. Raises ``EvaluationError`` (a ``ValueError``) for bad input, before
        running anything.
    """
    check_env_id(env_id)
    if not is_whole(episodes) or episodes < 1:
        raise EvaluationError(f"episodes={episodes!r}: must be an integer >= 1")
    if split not in SPLITS:
        raise EvaluationError(f"split={split!r}: allowed {', '.join(SPLITS)}")
    base_kwargs = {**dict(env_kwargs or {}), "split": split}
    recording = TimelineRecording(timeline, seed, episodes)  # checks the seed, before the run

    env = make_env(env_id, **base_kwargs) if probe is None else probe
    n_sites = env.unwrapped.n_sites
    scenario = Path(env.unwrapped.scenario.source).name if "scenario" in base_kwargs else ""
    track = track_for(env_id, env, scenario_given="scenario" in base_kwargs)
    measured = bool(env.unwrapped.params.measured)
    carbon_ref_kg = float(env.unwrapped.params.carbon_ref_kg)  # 0: no carbon objective posed
    if env is not probe:
        env.close()

    named = {"all": track.rules(n_sites, measured), "references": list(track.references)}
    starts = track.starts(n_sites, measured)  # what its planners start from
    entries = _entries(policies, models, n_sites, seed, env_id, base_kwargs, named, starts)
    if not entries:
        raise EvaluationError("nothing to evaluate: give at least one policy or model")
    out = Path(out_dir) if out_dir is not None else None
    if out is not None:
        check_out_dir(out, force)  # after the cheap checks, before the long run
    rows, curves, drawn = _play_entries(env_id, entries, episodes, seed, progress, recording)

    frame = pd.DataFrame(rows, columns=EPISODE_COLUMNS)
    order = [e.label for e in entries]
    summary = summary_table(frame, order, carbon_ref_kg)
    result = Evaluation(env_id, split, frame, summary, curves, scenario, drawn)
    if out is not None:
        write_outputs(result, out, force=force)
    return result


def _play_entries(
    env_id: str,
    entries: Sequence[_Entry],
    episodes: int,
    seed: int,
    progress: bool,
    recording: TimelineRecording,
) -> tuple[list[dict[str, Any]], dict[str, list[tuple[np.ndarray, np.ndarray]]], Timeline]:
    """Every entry's paired episodes: the CSV rows, per label the accuracy curves, and the
    timeline of the episode ``recording`` draws, recorded as it is played. Entries with the
    same spaces share one env (episode e is ``reset(seed=seed + e)`` either way)."""
    rows: list[dict[str, Any]] = []
    curves: dict[str, list[tuple[np.ndarray, np.ndarray]]] = {e.label: [] for e in entries}
    bar = _progress_bar(len(entries) * episodes, progress)
    envs: dict[tuple[Any, ...], gym.Env] = {}  # one env per (obs_mode, action_mode, max_sites)
    try:
        for entry in entries:
            key = tuple(entry.env_kwargs.get(k) for k in ("obs_mode", "action_mode", "max_sites"))
            if key not in envs:
                envs[key] = gym.make(env_id, **entry.env_kwargs)
            env = envs[key]
            bar.set_postfix_str(entry.label)
            for e in range(episodes):
                recorder = recording.recorder(entry.label, seed + e)
                row, curve = run_episode(env, entry.policy, seed + e, recorder)
                recording.finished(recorder, row)
                rows.append({"policy": entry.label, "episode": e, **row})
                curves[entry.label].append(curve)
                bar.update(1)
        timeline = recording.timeline(next(iter(envs.values())))  # with the power it met
    finally:
        bar.close()
        for env in envs.values():
            env.close()
    return rows, curves, timeline


def _entries(
    policies: Sequence[str | Policy],
    models: Sequence[tuple[str, str]],
    n_sites: int,
    seed: int,
    env_id: str,
    base_kwargs: dict[str, Any],
    named: Mapping[str, list[str]],
    starts: Sequence[str],
) -> list[_Entry]:
    """Resolve names, instances and models to runnable entries, PowerTrip first: ``named``
    gives the track's lists for ``all`` and ``references``, ``starts`` the policies its
    planners start from."""
    entries: list[_Entry] = []
    if isinstance(policies, str):
        policies = [policies]
    for item in policies:
        if isinstance(item, Policy):
            entries.append(_Entry(item.name, item, base_kwargs))
            continue
        for name in named.get(item, [item]):
            try:
                policy = make_policy(name, n_sites, seed, starts=starts)
                entries.append(_Entry(name, policy, base_kwargs))
            except ValueError as exc:
                raise EvaluationError(str(exc)) from None
    labels = [e.label for e in entries]
    for path, algo in models:
        label = model_label(path)
        if label in labels:
            label = f"{label}-{algo}"
        agent, kwargs = load_agent(path, algo, label, env_id, base_kwargs)
        entries.append(_Entry(label, agent, kwargs))
        labels.append(label)
    seen: set[str] = set()
    for label in labels:
        if label in seen:
            raise EvaluationError(f"policy {label!r} appears twice; give each policy once")
        seen.add(label)
    entries.sort(key=lambda e: e.label != ZERO)  # stable: PowerTrip first, rest in order
    return entries


class _NoBar:
    def update(self, n: int) -> None: ...
    def set_postfix_str(self, s: str) -> None: ...
    def close(self) -> None: ...


def _progress_bar(total: int, enabled: bool) -> Any:
    if not enabled or not sys.stderr.isatty() or importlib.util.find_spec("tqdm") is None:
        return _NoBar()  # tqdm comes with the 'train' extra; a bare install runs without a bar
    from tqdm import tqdm

    return tqdm(total=total, file=sys.stderr, unit="episode", dynamic_ncols=True)


# --------------------------------------------------------------------------- outputs


RESULT_FILES: tuple[str, ...] = ("summary.md", "episodes.csv", *FIGURES)
"""Every file of one result set (``write_outputs``): the two tables, then ``FIGURES``;
``summary.md``, the set's marker, first (``powertrip_env.agents.saving.install_results``)."""


def write_outputs(
    result: Evaluation, out_dir: str | os.PathLike[str], *, force: bool = False
) -> None:
    """``episodes.csv``, ``summary.md`` and the figures (``figures.FIGURES``), as a set.

    The files are written into a hidden folder beside ``out_dir`` that becomes ``out_dir`` only
    once all are written (``powertrip_env.atomic.result_dir``): a Ctrl-C half-way leaves the
    earlier results as they were, never a new ``episodes.csv`` beside an old summary. A
    ``out_dir`` that holds files is refused unless ``force``, which replaces them all. A set
    that cannot be written (a full disk) leaves ``out_dir`` as it was and raises
    ``ResultsNotWritten``, one line naming the folder and the error, holding ``result``.

    The plots need matplotlib (the ``train`` extra); without it they are left out with a note,
    so that evaluation runs on an install that has only the environment and RLlib.
    """
    try:
        with result_dir(out_dir, force=force) as tmp:
            write_files(result, tmp)
    except OutputDirError as exc:  # a full disk, say (atomic.WriteError), named in one line
        raise ResultsNotWritten(str(exc), result) from None


def write_files(result: Evaluation, folder: Path) -> None:
    """The files of ``RESULT_FILES`` into ``folder``, one by one: ``write_outputs`` and a
    training run's final table (which moves them into its run folder) make them one set."""
    write_text(folder / "episodes.csv", result.episodes.to_csv(index=False, lineterminator="\n"))
    write_text(folder / "summary.md", result.to_markdown())
    if not has_matplotlib():
        print(
            f"note: matplotlib is not installed, so {', '.join(FIGURES)} were not written "
            "(pip install 'powertrip-env[train]' adds it)",
            file=sys.stderr,
        )
        return
    for name, plot in FIGURES.items():
        fig = plot(result)
        if fig is not None:  # an Evaluation made by hand may have no timeline to draw
            save_png(fig, folder / name)


# --------------------------------------------------------------------------- command line


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="powertrip evaluate",
        description="Compare site-selection policies and saved agents on paired episodes.",
    )
    add_env(parser, scenario_hint=True)
    parser.add_argument(
        "--scenario",
        metavar="FILE_OR_NAME",
        default=None,
        help="run --env on this scenario: a TOML file or a shipped name (default: the ID's own)",
    )
    parser.add_argument(
        "--policies",
        default="all",
        help="comma-separated policy names, 'all' (default) for the deployable baselines of the "
        "task's track, 'references' for its clairvoyant references",
    )
    add_episodes(parser, 30, "paired episodes")
    parser.add_argument("--split", default="test", choices=SPLITS, help="trace days (test)")
    add_seed(parser)
    parser.add_argument(
        "--model",
        action="append",
        default=[],
        help="saved SB3 agent (.zip), RLlib checkpoint folder (with --algo rllib), or "
        "'pretrained' for the shipped general agent (agents/pretrained); may repeat. A model "
        "file is code: give only files you trust",
    )
    parser.add_argument(
        "--algo",
        action="append",
        default=[],
        choices=sorted(ALGOS),
        help="algorithm of each --model, or one for all (ppo)",
    )
    parser.add_argument(
        "--timeline",
        type=int,
        default=None,
        metavar="SEED",
        help="the episode timeline.png draws, by its seed: seed + e for episode e (--seed)",
    )
    add_out(parser, None, default_text="results/<env>-<split>")
    add_force(parser)
    add_no_progress(parser)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Command-line entry point; returns the exit code: 2 for bad input (argparse's errors and
    the ones found before any episode runs) and for a result set that could not be written,
    whose table is printed all the same, so that a full disk does not lose the run."""
    parser = _parser()
    args = parser.parse_args(argv)
    algos = args.algo or ["ppo"]
    if args.model and len(algos) not in (1, len(args.model)):
        parser.error(f"give one --algo for all models or one per --model ({len(args.model)})")
    if not args.model and args.algo:
        parser.error("--algo needs --model")
    per_model = algos if len(algos) == len(args.model) else algos[:1] * len(args.model)
    models = list(zip(args.model, per_model, strict=True))
    policies = [p.strip() for p in args.policies.split(",") if p.strip()]
    run = f"{args.env}-{Path(args.scenario).stem}" if args.scenario else args.env
    out = Path(args.out) if args.out else Path("results") / f"{run}-{args.split}"
    with stop_codes(EvaluationError) as stop:
        try:
            result = evaluate(
                args.env,
                policies,
                episodes=args.episodes,
                split=args.split,
                seed=args.seed,
                models=models,
                env_kwargs={"scenario": args.scenario} if args.scenario else None,
                out_dir=out,
                progress=not args.no_progress,
                force=args.force,
                timeline=args.timeline,
            )
        except ResultsNotWritten as exc:
            print(exc.result.to_markdown())  # the run's table is not lost with its files
            raise
        print(result.to_markdown())
        print(f"results written to {out}")
    return stop.code


if __name__ == "__main__":
    sys.exit(main())
