"""How close is a scenario to published runs of the same algorithm? The calibration table.

The numbers that decide which sites win (how progress scales with the number of sites, the
communication share of a round, the cost of joining) are each set against a published
measurement of DiLoCo, OpenDiLoCo or INTELLECT-1 (docs/calibration.md derives them). This
command recomputes every one of them from the scenario as shipped, next to the published figure
and its source, and runs the references on paired test episodes to say what problem the
calibrated scenario poses:

* ``tokens_ratio``: tokens to the target for M equally fast sites at full power, relative to
  one site (the scenario's progress model, rounds iterated to the target), against the ratio
  the DiLoCo scaling laws give at the job's model size (``published_tokens_ratio``);
* ``comm_share``: the share of the non-idle rounds' time spent communicating, pooled over the
  test episodes, for MyopicOptimal, PowerTrip and a set of four sites (OpenDiLoCo's four
  workers);
* ``join_s``: a joining site's mean time to start, against the transfer of the training state;
* ``headroom`` (BestFixedSet / BeamPlanner), ``myopic_over_beam``, ``powertrip_over_myopic``
  and ``beam_never_worse`` (BeamPlanner at most every policy it starts from, on every episode).

Command line::

    powertrip fidelity --env PowerTrip-v0
    powertrip fidelity --env PowerTrip-v0 --scenario my.toml --episodes 10

It prints the table and, as its last line, one JSON object with the keys above (each ratio
keyed by M as a string), ``tokens_ratio_published``, ``state_transfer_s`` and the episodes run.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Sequence
from typing import Any

import numpy as np

from powertrip_env.baselines.base import Policy
from powertrip_env.dynamics import delta_progress, rounds_to_target
from powertrip_env.errors import EvaluationError
from powertrip_env.harness.arguments import (
    make_env,
    report_cli,
    report_parser,
)
from powertrip_env.harness.evaluation.evaluate import evaluate
from powertrip_env.harness.reports.headroom import headroom
from powertrip_env.simulation import load_simulation
from powertrip_env.units import gbps_to_bps

REPLICAS = (2, 4, 8)
# Charles et al. 2025 (arXiv:2503.09799), Table 10: the joint fit L = A · N^α · M^β of DiLoCo's
# evaluation loss at H = 30 and a token budget of D = 20 N.
DILOCO_FIT_A, DILOCO_FIT_N_EXP, DILOCO_FIT_M_EXP = 19.226, -0.0985, 0.0116
TOKENS_PER_PARAMETER = 20.0
# Hoffmann et al. 2022 (Chinchilla), the data term B / D^β of L = E + A/N^0.34 + B/D^0.28.
CHINCHILLA_B, CHINCHILLA_BETA = 410.7, 0.28
# DiLoCo (arXiv:2311.08105), Table 3: perplexity at H = 500 with fixed inner steps per replica.
DILOCO_TABLE3 = {1: 16.23, 4: 15.23, 8: 15.08, 16: 15.02, 64: 14.95}
# OpenDiLoCo (arXiv:2407.07852): the all-reduce took 6.9% of training time with 4 workers;
# INTELLECT-1 (arXiv:2412.01152), Table 2: 103-469 s of all-reduce per 38 min of compute.
OPENDILOCO_COMM_SHARE = 0.069
INTELLECT1_COMM_SHARE = (103.0 / (103.0 + 38 * 60.0), 469.0 / (469.0 + 38 * 60.0))
OPENDILOCO_WORKERS = 4
COMM_POLICIES = ("MyopicOptimal", "PowerTrip")


def published_tokens_ratio(parameters: float, replicas: int) -> float:
    """Tokens that ``replicas`` DiLoCo replicas need for one replica's loss, relative to one.

    The scaling-law fit gives the loss at a fixed budget of ``D = 20 N`` tokens as
    ``L_M = L_1 · M^0.0116``. The extra loss ``ΔL = L_1 (M^0.0116 − 1)`` is turned into tokens
    through the data term of a Chinchilla fit: with ``g(D) = B / D^β`` the loss still to gain from
    data, M replicas reach ``L_1`` once ``g(r D) = g(D) − ΔL``, so
    ``r = (1 − ΔL / g(D))^(−1/β)`` (docs/calibration.md).
    """
    loss_one = DILOCO_FIT_A * parameters**DILOCO_FIT_N_EXP
    extra = loss_one * (replicas**DILOCO_FIT_M_EXP - 1.0)
    data_term = CHINCHILLA_B / (TOKENS_PER_PARAMETER * parameters) ** CHINCHILLA_BETA
    if extra >= data_term:
        return math.inf
    return (1.0 - extra / data_term) ** (-1.0 / CHINCHILLA_BETA)


def simulated_tokens_ratio(params: Any, replicas: int) -> float:
    """Tokens to the target for ``replicas`` equally fast sites over those for one site."""
    return replicas * rounds_to_target(params, replicas) / rounds_to_target(params, 1)


def fidelity(
    env_id: str = "PowerTrip-v0",
    *,
    episodes: int = 30,
    seed: int = 0,
    scenario: str | None = None,
    progress: bool = False,
) -> dict[str, Any]:
    """Every calibrated figure of ``env_id`` against its published anchor; see the module doc.

    Raises ``EvaluationError`` for bad input.
    """
    kwargs: dict[str, Any] = {} if scenario is None else {"scenario": scenario}
    probe = make_env(env_id, split="test", **kwargs)
    env = probe.unwrapped
    params, workload = load_simulation(env.scenario).params, env.scenario.workload
    if workload.parameters is None:
        raise EvaluationError(
            f"{env.scenario.source}: [workload] has no 'parameters' (the model's parameter "
            "count), which the scaling-law anchor needs"
        )
    n_params = workload.parameters
    probe.close()

    ratio = {str(m): simulated_tokens_ratio(params, m) for m in REPLICAS}
    published = {str(m): published_tokens_ratio(n_params, m) for m in REPLICAS}
    per_round = {m: delta_progress(params, 0.0, m * float(params.site_batch.max()))
                 for m in DILOCO_TABLE3}  # fmt: skip

    # communication share, on the scenario as it runs (jitter on), test split: the time spent
    # communicating over the time of the non-idle rounds, pooled over the episodes, as the
    # published shares are of training time
    fastest = np.argsort(-(params.gpu_count * params.gpu_rate), kind="stable")
    four = [int(i) for i in fastest[: min(OPENDILOCO_WORKERS, params.n_sites)]]
    four_name = f"Fixed-{'+'.join(env.scenario.sites[i].name for i in four)}"
    comm_names = [p for p in COMM_POLICIES if p != "MyopicOptimal" or params.n_sites <= 16]
    played = evaluate(
        env_id, [*comm_names, FixedSet(four, four_name)], episodes=episodes, split="test",
        seed=seed, env_kwargs=kwargs, progress=progress,
    ).episodes  # fmt: skip
    sums = played.groupby("policy")[["comm_s", "active_s"]].sum()
    comm = {name: float(sums.loc[name, "comm_s"] / sums.loc[name, "active_s"])
            for name in [*comm_names, four_name]}  # fmt: skip

    summary, frame = headroom(
        env_id, episodes=episodes, seed=seed, scenario=scenario, progress=progress
    )
    tta = frame.pivot(index="episode", columns="policy", values="tta_h")
    starts = [p for p in ("PowerTrip", "MyopicOptimal", "BestFixedSet") if p in tta]
    never_worse = bool((tta["BeamPlanner"].to_numpy()[:, None]
                        <= tta[starts].to_numpy() + 1e-9).all())  # fmt: skip
    mean = summary["mean_tta_h"]
    wan_bps = gbps_to_bps(np.array([site.wan_gbps for site in env.scenario.sites]))
    transfer = 8.0 * (workload.state_bytes or workload.model_bytes) / wan_bps
    out: dict[str, Any] = {
        "env": env_id,
        "scenario": scenario,
        "episodes": episodes,
        "parameters": n_params,
        "tokens_ratio": {k: round(v, 4) for k, v in ratio.items()},
        "tokens_ratio_published": {k: round(v, 4) for k, v in published.items()},
        "progress_per_round": {str(m): round(v, 3) for m, v in per_round.items()},
        "comm_share": {k: round(v, 4) for k, v in comm.items()},
        "join_s": round(float(params.join_s.mean()), 1),
        "state_transfer_s": round(float(transfer.mean()), 1),
        "beam_never_worse": never_worse,
        "headroom": summary["beam_headroom"],
        "mean_tta_h": mean,
        "myopic_over_beam": (
            round(mean["MyopicOptimal"] / mean["BeamPlanner"], 4)
            if "MyopicOptimal" in mean
            else None
        ),
        "powertrip_over_myopic": (
            round(mean["PowerTrip"] / mean["MyopicOptimal"], 4) if "MyopicOptimal" in mean else None
        ),
    }
    return out


class FixedSet(Policy):
    """The same sites every round (those that have power)."""

    def __init__(self, sites: Sequence[int], name: str) -> None:
        super().__init__()
        self.sites, self.name = list(sites), name

    def act(self, obs: Any, info: dict[str, Any]) -> np.ndarray:
        mask = np.zeros(self.env.decision_view().n_sites, dtype=np.int8)
        mask[self.sites] = 1
        return mask


def to_markdown(report: dict[str, Any]) -> str:
    """The calibration table: simulated against published, with the source of each."""
    rows = ["| figure | simulated | published | source |", "|---|---:|---:|---|"]
    for m in REPLICAS:
        k = str(m)
        rows.append(
            f"| tokens to target, {m} sites / 1 site | {report['tokens_ratio'][k]:.3f} | "
            f"{report['tokens_ratio_published'][k]:.3f} | Charles et al. 2025, Table 10 fit at "
            f"N = {report['parameters']:.3g}, via Chinchilla's data term |"
        )
    prog = report["progress_per_round"]
    rows.append(
        "| progress per round, 1 / 4 / 8 / 16 / 64 sites | "
        + " / ".join(f"{prog[str(m)]:.0f}" for m in DILOCO_TABLE3)
        + " | perplexity "
        + " / ".join(f"{v:.2f}" for v in DILOCO_TABLE3.values())
        + " | DiLoCo, Table 3: more replicas, better at fixed inner steps |"
    )
    lo, hi = INTELLECT1_COMM_SHARE
    for name, share in report["comm_share"].items():
        anchor = (
            f"{OPENDILOCO_COMM_SHARE:.3f}" if name.startswith("Fixed-") else f"{lo:.3f}–{hi:.3f}"
        )
        source = (
            "OpenDiLoCo, 4 workers"
            if name.startswith("Fixed-")
            else "INTELLECT-1, Table 2 (US to global)"
        )
        rows.append(f"| communication share, {name} | {share:.3f} | {anchor} | {source} |")
    rows.append(
        f"| join time, mean over sites (s) | {report['join_s']:.0f} | ≥ "
        f"{report['state_transfer_s']:.0f} (state transfer) | INTELLECT-1: a blocking checkpoint "
        "transfer took 30–60 min at 10B |"
    )
    rows += [
        "",
        f"On {report['episodes']} paired test episodes without jitter: headroom "
        f"{report['headroom']:.3f}, MyopicOptimal / BeamPlanner "
        f"{_fmt(report['myopic_over_beam'])}, PowerTrip / MyopicOptimal "
        f"{_fmt(report['powertrip_over_myopic'])}; BeamPlanner never worse than the policies "
        f"it starts from: {report['beam_never_worse']}.",
    ]
    return "\n".join(rows) + "\n"


def _fmt(value: float | None) -> str:
    return "–" if value is None else f"{value:.3f}"


def main(argv: Sequence[str] | None = None) -> int:
    """Command-line entry point; returns the exit code (2 for bad arguments)."""
    parser = report_parser(
        "powertrip fidelity",
        "The calibration table: simulated against published figures.",
        episodes=30,
        scenario=True,
    )
    args = parser.parse_args(argv)
    return report_cli(
        lambda: fidelity(
            args.env,
            episodes=args.episodes,
            seed=args.seed,
            scenario=args.scenario,
            progress=sys.stderr.isatty(),
        ),
        to_markdown,
    )


if __name__ == "__main__":
    sys.exit(main())
