"""Fit the surrogate's learning curve to real federated training on the same clock.

    powertrip calibrate --env PowerTrip-Digits-v1 --episodes 10 --out results/calib

Runs episodes of the environment with the real learner (``learner="torch"``) under several
selection rules, records what every round did (which sites completed, the global batch, the
real accuracy after it), and fits the surrogate's parameters so that the surrogate, replaying
exactly those rounds, predicts the same accuracies (least squares over every round, weighted
up to five times more near the target accuracy, where the time to accuracy is decided):

* the accuracy curve ``a0``, ``a_max``, ``p0``, ``alpha``;
* the noise scale ``noise_b0``, ``noise_p_b``, ``noise_gamma``;
* the local-step discount ``eta_local``;
* the non-IID coverage ``non_iid``, ``coverage_tau_rounds`` and ``coverage_ceiling`` (how far
  the accuracy ceiling falls when the model covers only part of the data).

``eta_local`` and ``p0`` trade off (both scale progress), so they are reported as fitted, not as
separately measured. The selection rules span the choices the policies make: every available
site; the same 1, 2 or half of the sites all episode long (as PowerTrip and Nearest-k settle
on a few sites); and random sets of 1, 2, half and all but one of the available sites, redrawn
every round. They are plain rules, not policies to compare: they only probe the learner.

Writes to ``--out``: ``calibrated.toml`` (a scenario that ``extends`` the one calibrated and
sets the fitted ``[workload]`` fields: pass it as ``--scenario``, or paste the fields),
``rounds.csv`` (every recorded round), ``fit.json`` (the parameters and the error before and
after) and ``real_vs_surrogate.png`` (accuracy against wall-clock time, real and fitted), as one
set: a ``--out`` that holds an earlier run's files is refused before anything runs, unless
``--force``, which replaces them once the new set is complete. Needs the ``train`` extra (torch;
matplotlib for the plot).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np

from powertrip_env.atomic import (
    OutputDirError,
    check_output_dir,
    result_dir,
    stop_codes,
    write_text,
)
from powertrip_env.errors import ScenarioError, TraceError
from powertrip_env.harness.arguments import (
    REAL_TRAINING,
    add_env,
    add_episodes,
    add_force,
    add_out,
    add_seed,
    positive_int,
)
from powertrip_env.learners import require_torch
from powertrip_env.render import agg_figure, has_matplotlib, save_png
from powertrip_env.simulation import load_simulation
from powertrip_env.units import s_to_h

TARGET_BAND = 0.05  # accuracies within about this of the target weigh more in the fit ...
TARGET_WEIGHT = 4.0  # ... up to this many times more (they decide the time to accuracy)
FITTED = (
    "a0", "a_max", "p0", "alpha", "noise_b0", "noise_p_b", "noise_gamma", "eta_local",
    "non_iid", "coverage_tau_rounds", "coverage_ceiling",
)  # fmt: skip


# --------------------------------------------------------------------------- selection rules


def _rules(n: int) -> dict[str, Callable[[np.random.Generator, np.ndarray, Any], np.ndarray]]:
    """name -> rule(rng, available, fixed) giving a mask; ``fixed`` is the episode's own order
    of the sites (a random permutation), which the fixed-set rules take a prefix of."""

    def redrawn(k: int) -> Callable[..., np.ndarray]:
        def rule(rng: np.random.Generator, avail: np.ndarray, order: Any) -> np.ndarray:
            idx = np.flatnonzero(avail)
            chosen = rng.choice(idx, size=min(k, idx.size), replace=False) if idx.size else idx
            out = np.zeros(n, dtype=np.int8)
            out[chosen] = 1
            return out

        return rule

    def kept(k: int) -> Callable[..., np.ndarray]:
        def rule(rng: np.random.Generator, avail: np.ndarray, order: Any) -> np.ndarray:
            out = np.zeros(n, dtype=np.int8)
            out[order[:k]] = 1
            return out

        return rule

    rules: dict[str, Callable[..., np.ndarray]] = {
        "all": lambda rng, avail, order: avail.astype(np.int8)
    }
    for k in sorted({1, 2, max(1, n // 2)}):
        rules[f"fixed-{k}"] = kept(k)
    for k in sorted({1, 2, max(1, n // 2), max(1, n - 1)}):
        rules[f"random-{k}"] = redrawn(k)
    return rules


@dataclass
class Recorded:
    """The rounds of one episode: what the surrogate needs to replay them, and the truth."""

    rule: str
    episode: int
    hours: np.ndarray  # (R,) elapsed hours after each round
    done: np.ndarray  # (R, N) bool: sites that completed the round
    taught: np.ndarray  # (R,) bool: the round could teach (not idle, not cut)
    idle: np.ndarray  # (R,) bool
    accuracy: np.ndarray  # (R,) real accuracy after each round
    start_accuracy: float


def record(
    env_id: str, episodes: int, seed: int, scenario: str | None, max_rounds: int = 300
) -> list[Recorded]:
    """Run every rule for ``episodes`` training-split episodes with the real learner.

    An episode is recorded up to its end or ``max_rounds`` rounds: a rule whose accuracy has
    long flattened out teaches the fit nothing more.
    """
    kwargs: dict[str, Any] = {"learner": "torch", "split": "train"}
    if scenario is not None:
        kwargs["scenario"] = scenario
    env = gym.make(env_id, **kwargs)
    n = env.unwrapped.n_sites
    out = []
    for r, (name, rule) in enumerate(_rules(n).items()):
        for e in range(episodes):
            rng = np.random.default_rng([seed, r, e])
            fixed = rng.permutation(n)
            _, info = env.reset(seed=seed + e)
            start = float(env.unwrapped.decision_view().accuracy)
            rows: list[tuple[float, np.ndarray, bool, bool, float]] = []
            while True:
                mask = rule(rng, env.unwrapped.available(), fixed)
                _, _, terminated, truncated, info = env.step(mask)
                done = info["selected"] & ~info["dropped"]
                rows.append(
                    (
                        s_to_h(info["elapsed_s"]),
                        done,
                        not (info["idle"] or info["cut"]),
                        info["idle"],
                        info["accuracy"],
                    )
                )
                if terminated or truncated or len(rows) >= max_rounds:
                    break
            out.append(
                Recorded(
                    name,
                    e,
                    np.array([x[0] for x in rows]),
                    np.array([x[1] for x in rows]),
                    np.array([x[2] for x in rows]),
                    np.array([x[3] for x in rows]),
                    np.array([x[4] for x in rows]),
                    start,
                )
            )
    env.close()
    return out


# --------------------------------------------------------------------------- the fit


def fit(recorded: Sequence[Recorded], params: Any, iterations: int = 600) -> dict[str, float]:
    """Least-squares fit of the surrogate's parameters to the recorded real accuracies.

    The surrogate replays each episode's rounds exactly as the simulator would (the same
    coverage bookkeeping, the same progress formula); Adam on unconstrained transforms of the
    parameters, starting from the scenario's values.
    """
    import torch

    episodes = len(recorded)
    absent, batch, valid, truth = _round_table(recorded, params)
    length = truth.shape[1]
    a = torch.tensor(absent)
    b = torch.tensor(batch)
    y = torch.tensor(truth)
    # The surrogate serves to time the crossing of the target: fit it hardest there.
    near = np.exp(-(((truth - params.a_target) / TARGET_BAND) ** 2))
    mask = torch.tensor(valid * (1.0 + TARGET_WEIGHT * near), dtype=torch.float64)
    share = torch.tensor(np.asarray(params.data_share, dtype=np.float64))
    start = _unconstrained_start(params)
    raw = {k: torch.tensor(v, dtype=torch.float64, requires_grad=True) for k, v in start.items()}

    def loss(raw: dict[str, Any]) -> Any:
        v = _constrained(raw)
        cover = 1 - v["non_iid"] * ((1 - torch.exp(-a / v["coverage_tau_rounds"])) * share).sum(-1)
        progress = torch.zeros(episodes, dtype=torch.float64)
        predicted = []
        for t in range(length):
            noise = v["noise_b0"] * (1 + progress / v["noise_p_b"]) ** v["noise_gamma"]
            bt = b[:, t]
            rate = params.local_steps * v["eta_local"] * cover[:, t]
            gain = rate / (1 + noise / torch.clamp(bt, min=1e-9))
            progress = progress + torch.where(bt > 0, gain, torch.zeros_like(bt))
            ceiling = v["a_max"] * cover[:, t] ** v["coverage_ceiling"]
            predicted.append(
                v["a0"] + (ceiling - v["a0"]) * (1 - (1 + progress / v["p0"]) ** (-v["alpha"]))
            )
        pred = torch.stack(predicted, dim=1)
        return ((pred - y) ** 2 * mask).sum() / mask.sum(), pred

    optimiser = torch.optim.Adam(list(raw.values()), lr=0.05)
    before = float(loss(raw)[0].detach())
    for _ in range(iterations):
        optimiser.zero_grad()
        value, _ = loss(raw)
        value.backward()
        optimiser.step()
    after, predicted = loss(raw)
    fitted = {k: float(v.detach()) for k, v in _constrained(raw).items()}
    fitted["rmse_before"] = math.sqrt(before)
    fitted["rmse_after"] = math.sqrt(float(after.detach()))
    fitted["_predicted"] = predicted.detach().numpy()  # type: ignore[assignment]
    return fitted


def _round_table(
    recorded: Sequence[Recorded], params: Any
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The recorded rounds as the surrogate replays them, each ``(episodes, longest episode)``.

    ``absent`` (with a trailing site axis): rounds since each site last finished a round, the
    coverage bookkeeping of the simulator (an idle round leaves them as they were); ``batch``: the
    batch the round taught (0 if it taught nothing); ``valid``: the entries an episode has
    (shorter episodes are padded); ``truth``: the real accuracy after the round.
    """
    episodes = len(recorded)
    length = max(len(r.accuracy) for r in recorded)
    n = params.n_sites
    absent = np.zeros((episodes, length, n))
    batch = np.zeros((episodes, length))
    valid = np.zeros((episodes, length), dtype=bool)
    truth = np.zeros((episodes, length))
    site_batch = np.asarray(params.site_batch, dtype=np.float64)
    for e, r in enumerate(recorded):
        away = np.zeros(n)
        for t in range(len(r.accuracy)):
            if not r.idle[t]:
                away = np.where(r.done[t], 0.0, away + 1.0)
            absent[e, t] = away
            batch[e, t] = float(site_batch[r.done[t]].sum()) if r.taught[t] else 0.0
            truth[e, t] = r.accuracy[t]
            valid[e, t] = True
    return absent, batch, valid, truth


def _logit(p: float) -> float:
    p = min(max(p, 1e-6), 1 - 1e-6)
    return math.log(p / (1 - p))


def _unconstrained_start(params: Any) -> dict[str, float]:
    """The scenario's values of the fitted parameters, as the unconstrained numbers Adam moves
    (the inverse of ``_constrained``), so that every step keeps each parameter in its range."""
    return {
        "a0": _logit(params.a0),
        "a_max": _logit((params.a_max - params.a0) / (1 - params.a0)),
        "p0": math.log(params.p0),
        "alpha": math.log(params.alpha),
        "noise_b0": math.log(max(params.noise_b0, 1e-6)),
        "noise_p_b": math.log(params.noise_p_b),
        "noise_gamma": _logit(params.noise_gamma / 4.0),
        "eta_local": _logit(params.eta_local),
        "non_iid": _logit(params.non_iid),
        "coverage_tau_rounds": math.log(params.coverage_tau),
        "coverage_ceiling": _inverse_softplus(params.coverage_ceiling),
    }


def _constrained(raw: dict[str, Any]) -> dict[str, Any]:
    """The parameters from their unconstrained tensors: each in its range whatever Adam does
    (positive, a share, ``a0 <= a_max <= 1``), and differentiable for the fit."""
    import torch

    a0 = torch.sigmoid(raw["a0"])
    return {
        "a0": a0,
        "a_max": a0 + (1 - a0) * torch.sigmoid(raw["a_max"]),
        "p0": torch.exp(raw["p0"]),
        "alpha": torch.exp(raw["alpha"]),
        "noise_b0": torch.exp(raw["noise_b0"]),
        "noise_p_b": torch.exp(raw["noise_p_b"]),
        "noise_gamma": 4.0 * torch.sigmoid(raw["noise_gamma"]),
        "eta_local": torch.sigmoid(raw["eta_local"]),
        "non_iid": torch.sigmoid(raw["non_iid"]),
        "coverage_tau_rounds": torch.exp(raw["coverage_tau_rounds"]),
        "coverage_ceiling": torch.nn.functional.softplus(raw["coverage_ceiling"]),
    }


def _inverse_softplus(x: float) -> float:
    """The raw value whose softplus is ``x`` (about ``x`` itself when it is 0: 1e-6)."""
    x = max(x, 1e-6)
    return x + math.log(-math.expm1(-x))


# --------------------------------------------------------------------------- outputs


def calibrated_toml(fitted: dict[str, float], base: str, command: str) -> str:
    """A scenario that extends ``base`` with the fitted ``[workload]`` fields."""
    lines = [
        f"# Fitted by: {command}",
        f"# Surrogate RMSE against the real learner: {fitted['rmse_before']:.4f} before, "
        f"{fitted['rmse_after']:.4f} after.",
        f"extends = {json.dumps(base)}",
        f"name = {json.dumps(Path(base).stem + '-calibrated')}",
        "",
        "[workload]",
    ]
    for key in FITTED:
        lines.append(f"{key} = {fitted[key]:.6g}")
    return "\n".join(lines) + "\n"


def plot(recorded: Sequence[Recorded], predicted: np.ndarray, path: Path) -> bool:
    """Real and fitted accuracy against hours, every recorded episode, coloured by rule."""
    if not has_matplotlib():
        return False
    fig = agg_figure(8, 5, dpi=110, layout="constrained")
    ax = fig.add_subplot()
    rules = list(dict.fromkeys(r.rule for r in recorded))
    colours = {rule: f"C{i}" for i, rule in enumerate(rules)}
    for e, r in enumerate(recorded):
        label = r.rule if r.episode == 0 else None
        ax.plot(r.hours, r.accuracy, color=colours[r.rule], lw=1.2, alpha=0.8, label=label)
        ax.plot(r.hours, predicted[e, : len(r.hours)], color=colours[r.rule], lw=1, ls="--")
    ax.set_xlabel("wall-clock time (h)")
    ax.set_ylabel("accuracy")
    ax.set_title("real training (solid) and the fitted surrogate (dashed)")
    ax.legend(fontsize="small")
    save_png(fig, path)
    return True


def main(argv: Sequence[str] | None = None) -> int:
    """Command-line entry point; 0 on success, 2 for bad arguments and for results that could
    not be written (the calibrated scenario is printed first, so a full disk does not lose it)."""
    p = argparse.ArgumentParser(prog="powertrip calibrate", description=__doc__.split("\n")[0])
    add_env(p, "PowerTrip-Digits-v1", fixed_sites=REAL_TRAINING, scenario_hint=True)
    p.add_argument("--scenario", default=None, help="a scenario to run --env on")
    add_episodes(p, 6, "episodes per selection rule")
    add_seed(p)
    p.add_argument(
        "--iterations", type=positive_int, default=600, help="optimiser steps of the fit"
    )
    p.add_argument("--max-rounds", type=int, default=300, help="rounds recorded per episode")
    add_out(p, "results/calibrate")
    add_force(p)
    args = p.parse_args(argv)
    try:
        require_torch("calibration (it trains real models)")
    except ImportError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    try:
        env = gym.make(args.env, **({"scenario": args.scenario} if args.scenario else {}))
    except (ScenarioError, TraceError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    scenario = env.unwrapped.scenario
    params = load_simulation(scenario).params  # the model's parameters, which the fit starts from
    env.close()
    if params.fixed_time:
        print(
            "error: calibration replays fixed_quota rounds; this scenario is fixed_time",
            file=sys.stderr,
        )
        return 2
    try:
        out = check_output_dir(args.out, force=args.force)  # now, not after the long run
    except OutputDirError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    base = args.scenario if args.scenario else scenario.name
    command = " ".join(["powertrip calibrate", *(argv or sys.argv[1:])])
    summary = None
    with stop_codes(OutputDirError) as stop:
        recorded = record(args.env, args.episodes, args.seed, args.scenario, args.max_rounds)
        fitted = fit(recorded, params, args.iterations)
        summary = {k: v for k, v in fitted.items() if not k.startswith("_")}
        summary.update(
            env=args.env,
            scenario=args.scenario,
            episodes=len(recorded),
            rounds=int(sum(len(r.accuracy) for r in recorded)),
        )
        print(calibrated_toml(fitted, str(base), command))  # first: a failed write keeps it
        with result_dir(out, force=args.force) as tmp:  # every file, or none
            plotted = _write_results(tmp, recorded, fitted, summary, str(base), command)
        print(
            f"written to {out}: calibrated.toml, rounds.csv, fit.json"
            + (", real_vs_surrogate.png" if plotted else " (no plot: matplotlib is not installed)")
        )
    if summary is not None:
        print(json.dumps(summary))  # the last line, written or not
    return stop.code


def _write_results(
    folder: Path,
    recorded: Sequence[Recorded],
    fitted: dict[str, Any],
    summary: dict[str, Any],
    base: str,
    command: str,
) -> bool:
    """The result files in ``folder``; whether the plot was drawn (it needs matplotlib)."""
    write_text(folder / "calibrated.toml", calibrated_toml(fitted, base, command))
    rows = ["rule,episode,round,hours,sites,accuracy,surrogate"]
    for e, r in enumerate(recorded):
        for t in range(len(r.accuracy)):
            rows.append(
                f"{r.rule},{r.episode},{t + 1},{r.hours[t]:.6f},{int(r.done[t].sum())},"
                f"{r.accuracy[t]:.6f},{fitted['_predicted'][e, t]:.6f}"
            )
    write_text(folder / "rounds.csv", "\n".join(rows) + "\n")
    write_text(folder / "fit.json", json.dumps(summary, indent=2) + "\n")
    return plot(recorded, fitted["_predicted"], folder / "real_vs_surrogate.png")


if __name__ == "__main__":
    sys.exit(main())
