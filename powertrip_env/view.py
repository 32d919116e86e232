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
from powertrip_env.dynamics.unknowns import Unknowns

__all__ = ["DecisionView", "Unknowns", "decision_view"]  # Unknowns: what a policy may believe
from powertrip_env.scenario import Scenario
from powertrip_env.units import g_to_kg, j_to_kwh, per_j_to_per_kwh


@dataclass(frozen=True, eq=False)
class DecisionView:
    """One episode at the start of a round. Arrays are (N,) per site unless noted; read-only."""

    scenario: Scenario  # the sites' names, places, GPUs and the hub
    available: np.ndarray  # bool: at least one GPU can be powered now
    powered_gpus: np.ndarray  # GPUs the site can power now
    rate: np.ndarray  # samples/s now: powered GPUs × per-GPU rate
    power_w: np.ndarray  # power the job can draw now: powered GPUs × wall power per GPU
    power_fraction: np.ndarray  # available power over its peak (capacity + PV peak), [0, 1]
    forecast_power_w: np.ndarray  # (H, N) power_w forecast now for this row and the next H − 1
    rtt_s: np.ndarray  # round trip to the hub
    exchange_s: np.ndarray  # what the site adds to a round's communication (SimParams.exchange_s)
    data_share: np.ndarray  # share of the training data
    joined: np.ndarray  # bool: completed the last round (no join cost this round)
    absent_rounds: np.ndarray  # rounds since each site last took part
    interval_s: float  # length of a trace row
    into_row_s: float  # seconds since the current trace row began
    last_round_s: float  # length of the last round (0 before the first)
    progress: float  # (a − a0) / (a* − a0)
    accuracy: float
    a_target: float
    coverage_tau_rounds: float  # the forgetting time of an absent site's data (non-IID)
    elapsed_s: float
    rounds: int
    energy_kwh: float
    # For planners comparing predict_plan's trajectories (their ``state``) with now:
    clock_s: float  # the episode's clock (s since the trace's row 0), as a trajectory's time_s
    trace_t0_s: float  # Unix time of the trace's row 0: info's trace_time is it + clock_s
    surrogate_progress: float  # the learning curve's progress, as a trajectory's progress
    progress_needed: float  # the surrogate progress at which the accuracy reaches a_target
    # Telemetry (the measured track: docs/model.md, "What is unknown"): each site's last
    # measurement as measured over nominal (the scenario's stated values, no jitter) of its
    # compute, its own exchange with the hub and its join (1 where never measured), and the
    # round it was taken in (-1: never). Jitter makes one measurement noisy.
    measured_compute: np.ndarray
    measured_transfer: np.ndarray
    measured_join: np.ndarray
    measured_round: np.ndarray  # int
    measured_track: bool  # the scenario draws unknowns: the stated values are not the truth
    # Carbon (docs/model.md, "Carbon"): the current trace row's values, known when a round
    # starts as its power is; all zero without a carbon intensity file (``carbon_known``).
    carbon_known: bool  # the scenario charges grid energy with a carbon intensity series
    grid_g_per_kwh: np.ndarray  # the site's grid carbon intensity now (g CO2eq per kWh)
    pv_w: np.ndarray  # the site's on-site PV output now (W): used before the grid
    carbon_kg: float  # grid carbon of the episode so far
    time_budget_s: float  # the episode ends here without success (a carbon task's deadline)

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
        scenario=scenario,
        available=np.asarray(params.available[row], dtype=bool),
        powered_gpus=powered,
        rate=np.asarray(params.rate[row], dtype=np.float64),
        power_w=powered * params.gpu_wall_w,
        power_fraction=params.site_obs[row, :, F_POWER].astype(np.float64),
        forecast_power_w=forecast_gpus * params.gpu_wall_w,
        rtt_s=params.rtt_s,
        exchange_s=params.exchange_s,
        data_share=params.data_share,
        joined=state.prev_selected[i].copy(),
        absent_rounds=state.absent_rounds[i].copy(),
        interval_s=params.interval_s,
        into_row_s=time_s - row * params.interval_s,
        last_round_s=float(state.last_round_s[i]),
        progress=(float(state.accuracy[i]) - params.a0) / (params.a_target - params.a0),
        accuracy=float(state.accuracy[i]),
        a_target=params.a_target,
        coverage_tau_rounds=params.coverage_tau,
        elapsed_s=time_s - float(state.start_s[i]),
        rounds=int(state.rounds[i]),
        energy_kwh=j_to_kwh(float(state.energy_j[i])),
        clock_s=time_s,
        trace_t0_s=params.trace_t0_s,
        surrogate_progress=float(state.progress[i]),
        progress_needed=dynamics.progress_needed(params),
        measured_compute=seen[0].copy(),
        measured_transfer=seen[1].copy(),
        measured_join=seen[2].copy(),
        measured_round=seen[3].astype(np.int64),
        measured_track=bool(params.measured),
        carbon_known=bool(params.carbon),
        grid_g_per_kwh=per_j_to_per_kwh(params.g_per_j[row]),
        pv_w=params.pv_w[row].copy(),
        carbon_kg=g_to_kg(float(state.carbon_g[i])),
        time_budget_s=params.time_budget_s,
    )
    for value in vars(out).values():  # its own arrays; the params' are read-only already
        if isinstance(value, np.ndarray):
            value.flags.writeable = False
    return out
