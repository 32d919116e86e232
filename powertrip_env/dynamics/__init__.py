"""The simulator: one compiled kernel over a batch of episodes.

Every function here works on a batch: the single environment is a batch of one, the vector
environment a batch of B, and the planners in ``baselines/`` a batch of candidate plans, so the
dynamics are written once. They are plain scalar loops over episodes and sites, compiled by numba
(``cache=True``: the first use after an install compiles them in about 15 s, later imports load
the cached machine code). ``NUMBA_DISABLE_JIT=1`` runs the very same functions as plain Python,
which is slow but lets a debugger step through a round. The model, with every equation and
parameter, is in docs/model.md. The modules follow it:

* ``params``: ``SimParams``, a scenario and its power data as the kernel's arrays (``layout``
  names their slots), built once per scenario;
* ``tables``: reading the power tables (the samples and energy a site accumulates);
* ``jitter``: the counter-based randomness;
* ``learning``: progress, accuracy, coverage and the rewards;
* ``round``: a round on the true trace (``step_round``), and the barrier the what-if shares;
* ``observation`` and ``features``: the observation and its declared columns;
* ``predict``: the what-if of candidate sets (``predict_round``);
* ``candidates``: a few candidate sets per episode and their features, picked from a pool
  the what-if ranks (``build_candidates``), for the candidate-set agent and the horizon rule;
* ``plans``: plans played rounds ahead (``play_plans``), on the true trace or on a forecast;
* ``state``: ``SimState`` and ``RoundResult``, the packed arrays by name;
* ``info``: what an environment reports after a round (``Info``, ``first_info``);
* ``layout``: which slot of which packed array holds what. Only the kernel reads the
  slots: everyone else reads the arrays by name, through the classes above, or by a
  field's name in the ``*_FIELDS`` tuples exported here;
* ``unknowns``: what a scheduler cannot know before it measures (the measured track), and
  the beliefs the what-ifs take instead;
* ``estimates``: what a deployable policy estimates from the telemetry (the adaptive rules'
  and the candidate-set agent's estimates), compiled because it runs before every decision;
* ``paths``: what moves while the job runs (the moving track): each site's path through the
  fail-slow, link and power-callback processes;
* ``formulas``: the model's formulas for tools that reason about it;
* ``jit``: how the kernel is compiled and cached.
"""

from __future__ import annotations

from powertrip_env.dynamics.candidates import CandidateBatch, build_candidates
from powertrip_env.dynamics.estimates import EstimateRows, Telemetry, telemetry
from powertrip_env.dynamics.features import (
    CARBON_JOB_FEATURES,
    CARBON_JOB_HIGH,
    CARBON_JOB_LOW,
    CARBON_SITE_FEATURES,
    CARBON_SITE_HIGH,
    CARBON_SITE_LOW,
    GLOBAL_FEATURES,
    GLOBAL_HIGH,
    GLOBAL_LOW,
    N_GLOBAL,
    N_SITE_FEATURES,
    SITE_FEATURES,
    SITE_HIGH,
    SITE_LOW,
    TELEMETRY_FEATURES,
    TELEMETRY_HIGH,
    TELEMETRY_LOW,
)
from powertrip_env.dynamics.formulas import (
    accuracy,
    comm_time_s,
    delta_progress,
    join_bound_dp,
    least_round_ends,
    noise_scale,
    noise_scale_array,
    progress_needed,
    round_bound_dp,
    rounds_to_target,
)
from powertrip_env.dynamics.info import Info, describe, first_info, report
from powertrip_env.dynamics.jitter import episode_draws, jitter_factors
from powertrip_env.dynamics.layout import (
    INFO_FIELDS,
    INFO_SITE_FLAGS,
    INFO_TELEMETRY,
    KEY_LIMIT,
    PARALLEL_MIN_BATCH,
    RECORD_FIELDS,
    SITE_RECORD,
    STATE_FIELDS,
)
from powertrip_env.dynamics.observation import (
    Scratch,
    global_features,
    observe,
    site_features,
    step_observe,
)
from powertrip_env.dynamics.params import (
    SimParams,
    build_params,
    forecast_world,
    great_circle_km,
    rtt_ms,
)
from powertrip_env.dynamics.paths import path_now, path_of, start_paths
from powertrip_env.dynamics.plans import (
    RowsAhead,
    Trajectory,
    clairvoyant_rows_ahead,
    play_plans,
    play_rule,
    predict_plan,
    rows_ahead,
)
from powertrip_env.dynamics.predict import RoundPrediction, predict_round
from powertrip_env.dynamics.round import step_round
from powertrip_env.dynamics.state import RoundResult, SimState, initial_state
from powertrip_env.dynamics.tables import available_now, current_row, finish_times
from powertrip_env.dynamics.unknowns import (
    SPREAD_FIELDS,
    UnknownFactors,
    belief_rows,
    draw_unknowns,
    episode_unknowns,
    fold,
    nominal_belief,
    unknowns_width,
    with_belief,
)
from powertrip_env.units import G_PER_KG, J_PER_KWH, S_PER_H

__all__ = [
    "CARBON_JOB_FEATURES",
    "CARBON_JOB_HIGH",
    "CARBON_JOB_LOW",
    "CARBON_SITE_FEATURES",
    "CARBON_SITE_HIGH",
    "CARBON_SITE_LOW",
    "GLOBAL_FEATURES",
    "GLOBAL_HIGH",
    "GLOBAL_LOW",
    "G_PER_KG",
    "INFO_FIELDS",
    "INFO_SITE_FLAGS",
    "INFO_TELEMETRY",
    "J_PER_KWH",
    "KEY_LIMIT",
    "N_GLOBAL",
    "N_SITE_FEATURES",
    "PARALLEL_MIN_BATCH",
    "RECORD_FIELDS",
    "SITE_FEATURES",
    "SITE_HIGH",
    "SITE_LOW",
    "SITE_RECORD",
    "SPREAD_FIELDS",
    "STATE_FIELDS",
    "S_PER_H",
    "TELEMETRY_FEATURES",
    "TELEMETRY_HIGH",
    "TELEMETRY_LOW",
    "CandidateBatch",
    "EstimateRows",
    "Info",
    "RoundPrediction",
    "RoundResult",
    "RowsAhead",
    "Scratch",
    "SimParams",
    "SimState",
    "Telemetry",
    "Trajectory",
    "UnknownFactors",
    "accuracy",
    "available_now",
    "belief_rows",
    "build_candidates",
    "build_params",
    "clairvoyant_rows_ahead",
    "comm_time_s",
    "current_row",
    "delta_progress",
    "describe",
    "draw_unknowns",
    "episode_draws",
    "episode_unknowns",
    "finish_times",
    "first_info",
    "fold",
    "forecast_world",
    "global_features",
    "great_circle_km",
    "initial_state",
    "jitter_factors",
    "join_bound_dp",
    "least_round_ends",
    "noise_scale",
    "noise_scale_array",
    "nominal_belief",
    "observe",
    "path_now",
    "path_of",
    "play_plans",
    "play_rule",
    "predict_plan",
    "predict_round",
    "progress_needed",
    "report",
    "round_bound_dp",
    "rounds_to_target",
    "rows_ahead",
    "rtt_ms",
    "site_features",
    "start_paths",
    "step_observe",
    "step_round",
    "telemetry",
    "unknowns_width",
    "with_belief",
]
