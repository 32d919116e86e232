"""``DecisionView``: what a policy may know when a round starts, read-only.

A policy may see each site's power *now* (the current trace row), the forecast issued now, the
RTTs and GPUs, which sites are joined, and how far the episode has come: never a future actual.
``env.unwrapped.decision_view()`` hands that over as one frozen object, so policies and renderers
need neither the simulator's tables nor its state (``baselines/policies.py`` reads only this
and ``predict_round``). The clairvoyant references, which read the future on purpose, are the
only code that goes further.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from powertrip_env import dynamics
from powertrip_env.dynamics.features import F_POWER
from powertrip_env.dynamics.plans import POWER_FORECASTS
from powertrip_env.dynamics.unknowns import UnknownFactors
from powertrip_env.scenario import Scenario
from powertrip_env.units import g_to_kg, j_to_kwh, per_j_to_per_kwh

# POWER_FORECASTS: the guesses of power beyond the forecast's horizon a policy may ask
# ``env.forecast_rows`` for (re-exported here, beside the view policies read, so that baselines
# import nothing from the kernel)

# UnknownFactors: what a policy may believe about the factors it cannot see (a belief's type).
__all__ = ["FIELD_GROUPS", "POWER_FORECASTS", "DecisionView", "UnknownFactors", "decision_view"]

FIELD_GROUPS: dict[str, tuple[str, ...]] = {
    "stated": ("scenario", "rtt_s", "exchange_s", "data_share"),
    "power": ("available", "powered_gpus", "rate", "power_w", "power_fraction", "forecast_power_w"),
    "participation": ("joined", "absent_rounds"),
    "time": (
        "clock_s", "trace_t0_s", "interval_s", "into_row_s", "elapsed_s", "last_round_s",
        "time_budget_s", "rounds",
    ),
    "progress": (
        "progress", "accuracy", "a_target", "coverage_tau_rounds", "surrogate_progress",
        "progress_needed",
    ),
    "telemetry": (
        "measured_track", "measured_compute", "measured_transfer", "measured_join",
        "measured_round",
    ),
    "carbon": ("energy_kwh", "carbon_known", "grid_g_per_kwh", "pv_w", "carbon_kg"),
}  # fmt: skip
"""``DecisionView``'s fields by what they tell, in the class's order: each name once (a test
keeps it equal to the fields and to the class's ``# ---- group`` comments)."""


@dataclass(frozen=True, eq=False)
class DecisionView:
    """One episode at the start of a round: everything a deployable policy may know, read-only.

    Arrays are (N,) per site, float64 unless noted. The fields come in groups
    (``FIELD_GROUPS``): what the scenario states, power now, which sites take part, time,
    progress, the measured track's telemetry, and energy and carbon. Two progresses, two
    scales: ``progress`` is how far the *accuracy* has come towards the target (0 at the start,
    1 at the target; the observation's), ``surrogate_progress`` the learning curve's own
    variable P in ideal-step equivalents (docs/model.md, "Learning progress"), the scale of
    ``progress_needed`` and of ``predict_plan``'s trajectories. With ``learner="torch"`` the
    accuracy is measured on real training and P is still the surrogate's, which the what-ifs
    read.
    """

    # ---- stated: what the scenario says about the sites, fixed for the episode
    scenario: Scenario  # the sites' names, places, GPUs and the hub
    rtt_s: np.ndarray  # s: round trip to the hub
    exchange_s: np.ndarray  # s: the site's round trips and update transfer (SimParams.exchange_s)
    data_share: np.ndarray  # fraction of the training data the site holds (sums to 1)
    # ---- power: what each site can give now (the current trace row) and the forecast issued now
    available: np.ndarray  # bool: at least one GPU can be powered now
    powered_gpus: np.ndarray  # GPUs: how many the site can power now
    rate: np.ndarray  # samples/s now: powered GPUs × per-GPU rate
    power_w: np.ndarray  # W the job can draw now: powered GPUs × wall power per GPU
    power_fraction: np.ndarray  # [0, 1]: available power over its peak (capacity + PV peak)
    forecast_power_w: np.ndarray  # (H, N) W: power_w forecast now for this row and the next H − 1
    # ---- participation: who took part in the last rounds
    joined: np.ndarray  # bool: completed the last round (no join cost this round)
    absent_rounds: np.ndarray  # rounds since each site last took part
    # ---- time: the clock, the trace's rows and the budget
    clock_s: float  # s since the trace's row 0: the episode's clock, as a trajectory's time_s
    trace_t0_s: float  # Unix time (s) of the trace's row 0: info's trace_time is it + clock_s
    interval_s: float  # s: length of a trace row
    into_row_s: float  # s since the current trace row began
    elapsed_s: float  # s since the episode began
    last_round_s: float  # s: length of the last round (0 before the first)
    time_budget_s: float  # s of elapsed time at which the episode ends without success (its own)
    rounds: int  # rounds played
    # ---- progress: how far the job has come towards the target accuracy
    progress: float  # (a − a0) / (a* − a0): the accuracy's share of the way, 1 at the target
    accuracy: float  # a: the model's accuracy now (a fraction, as a0 and a_target)
    a_target: float  # a*: the accuracy at which the episode succeeds
    coverage_tau_rounds: float  # rounds: the forgetting time of an absent site's data (non-IID)
    surrogate_progress: float  # P, ideal-step equivalents: the curve's variable, as a trajectory's
    progress_needed: float  # P*, ideal-step equivalents: the P at which accuracy reaches a_target
    # ---- telemetry: each site's last measurement (the measured track: docs/model.md, "What is
    # unknown"), measured over nominal (the scenario's stated values, no jitter) of its compute,
    # its own exchange with the hub and its join (1 where never measured), and the round it was
    # taken in (-1: never). Jitter makes one measurement noisy.
    measured_track: bool  # the scenario draws unknowns: the stated values are not the truth
    measured_compute: np.ndarray  # ratio: measured over stated compute time for its quota
    measured_transfer: np.ndarray  # ratio: measured over stated exchange with the hub
    measured_join: np.ndarray  # ratio: measured over stated join time
    measured_round: np.ndarray  # int: the round of the last measurement (-1: never)
    # ---- carbon: the episode's energy and emissions so far, the grid and PV now (docs/model.md,
    # "Carbon"): the current trace row's values, known when a round starts as its power is; all
    # zero without a carbon intensity file (``carbon_known``).
    energy_kwh: float  # kWh the episode has used so far
    carbon_known: bool  # the scenario charges grid energy with a carbon intensity series
    grid_g_per_kwh: np.ndarray  # g CO2eq per kWh: the site's grid carbon intensity now
    pv_w: np.ndarray  # W: the site's on-site PV output now, used before the grid
    carbon_kg: float  # kg CO2eq: grid carbon of the episode so far

    @property
    def n_sites(self) -> int:
        return int(self.available.shape[0])


def decision_view(
    params: dynamics.SimParams, state: dynamics.SimState, scenario: Scenario, i: int = 0
) -> DecisionView:
    """The view of episode ``i`` of a batch ``state``."""
    row = int(dynamics.current_row(params, state.time_s[i : i + 1])[0])
    powered = np.asarray(params.powered[row], dtype=np.float64)
    forecast_gpus = params.forecast_rate[row] / params.gpu_rate
    time_s = float(state.time_s[i])
    seen = state.seen[i]
    out = DecisionView(
        # stated
        scenario=scenario,
        rtt_s=params.rtt_s,
        exchange_s=params.exchange_s,
        data_share=params.data_share,
        # power
        available=np.asarray(params.available[row], dtype=bool),
        powered_gpus=powered,
        rate=np.asarray(params.rate[row], dtype=np.float64),
        power_w=powered * params.gpu_wall_w,
        power_fraction=params.site_obs[row, :, F_POWER].astype(np.float64),
        forecast_power_w=forecast_gpus * params.gpu_wall_w,
        # participation
        joined=state.prev_selected[i].copy(),
        absent_rounds=state.absent_rounds[i].copy(),
        # time
        clock_s=time_s,
        trace_t0_s=params.trace_t0_s,
        interval_s=params.interval_s,
        into_row_s=time_s - row * params.interval_s,
        elapsed_s=time_s - float(state.start_s[i]),
        last_round_s=float(state.last_round_s[i]),
        time_budget_s=float(state.budget_s[i]),
        rounds=int(state.rounds[i]),
        # progress
        progress=(float(state.accuracy[i]) - params.a0) / (params.a_target - params.a0),
        accuracy=float(state.accuracy[i]),
        a_target=params.a_target,
        coverage_tau_rounds=params.coverage_tau,
        surrogate_progress=float(state.progress[i]),
        progress_needed=dynamics.progress_needed(params),
        # telemetry
        measured_track=bool(params.measured),
        measured_compute=seen[0].copy(),
        measured_transfer=seen[1].copy(),
        measured_join=seen[2].copy(),
        measured_round=seen[3].astype(np.int64),
        # carbon
        energy_kwh=j_to_kwh(float(state.energy_j[i])),
        carbon_known=bool(params.carbon),
        grid_g_per_kwh=per_j_to_per_kwh(params.g_per_j[row]),
        pv_w=params.pv_w[row].copy(),
        carbon_kg=g_to_kg(float(state.carbon_g[i])),
    )
    for value in vars(out).values():  # its own arrays; the params' are read-only already
        if isinstance(value, np.ndarray):
            value.flags.writeable = False
    return out
