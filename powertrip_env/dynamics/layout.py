"""The kernel's packed arrays: which slot of which array holds what.

The compiled functions take few, packed float64 arrays, which keeps the cost of entering them
small (a step of the single environment is a few microseconds). Each array's slots are named
here once, as module-level integers: numba reads those as compile-time constants, so a named
slot costs nothing over a literal index. Every ``*_FIELDS`` tuple lists the names in slot order,
and the constants under it are its indices.
"""

from __future__ import annotations

import numpy as np

from powertrip_env.dynamics.jit import jit

# --------------------------------------------------------------------------- scenario arrays

# Per row of the wrapped calendar: SimParams.table, (rows + 1, len(TABLE_FIELDS), N). The last
# row only ends the cumulative sums.
TABLE_FIELDS = (
    "rate",  # samples/s of the GPUs the site can power
    "powered",  # GPUs the site can power
    "cum_samples",  # samples the site could have processed from row 0 to the row's start
    "cum_gpu_j",  # energy its powered GPUs would have drawn, busy, from row 0 on
    "outage_s",  # start of the first row at or after this one without a powered GPU (or inf)
    "pv_w",  # the site's on-site PV output in the row, used first (0 without PV)
    "g_per_j",  # gCO2eq per joule drawn from the site's grid in the row (0 without carbon data)
    "cum_busy_g",  # grid carbon its powered GPUs would have emitted, busy, from row 0 on
)
RATE, POWERED, CUM_SAMPLES, CUM_GPU_J, OUTAGE_S, PV_W, G_PER_J, CUM_BUSY_G = range(
    len(TABLE_FIELDS)
)

# Per site: SimParams.site, (len(SITE_FIELDS), N); SimParams reads each row by its name.
SITE_FIELDS = (
    "gpu_count",
    "gpu_wall_w",  # p_g = tdp · server_overhead · PUE
    "gpu_rate",  # θ_g, samples/s per powered GPU
    "site_batch",
    "rtt_s",  # round trip to the hub
    "data_share",
    "quota",  # samples per round (fixed_quota rounds)
    "join_s",  # join_fixed_s + training-state bits / WAN bandwidth
    "site_tx_s",  # M / bw_i: seconds to send one update over the site's WAN link
    "idle_w_per_gpu",  # what a joined GPU draws while it waits: idle_fraction · p_g
)
S_GPUS, S_WALL_W, S_GPU_RATE, S_BATCH, S_RTT, S_SHARE, S_QUOTA, S_JOIN, S_TX, S_IDLE_W = range(
    len(SITE_FIELDS)
)

# The scalars: SimParams.consts, (len(CONSTS),), all float64. SimParams reads each by its name,
# as the type it declares.
CONSTS = (
    "interval_s",  # length of a trace row
    "rows",  # rows of the wrapped per-row tables
    "trace_t0_s",  # Unix time of row 0
    "hub_tx_s",  # M / bw_hub: seconds the hub's link needs per site's update
    "rtt_factor",
    "aggregation_s",
    "local_steps",
    "eta_local",
    "noise_b0",
    "noise_p_b",
    "noise_gamma",
    "a0",
    "a_max",
    "a_target",
    "span",  # a_target − a0
    "p0",
    "alpha",
    "non_iid",
    "coverage_tau",  # [workload] coverage_tau_rounds
    "coverage_ceiling",  # κ
    "fixed_time",  # rounds are time-balanced (round_mode = "fixed_time")
    "round_s",
    "idle_s",  # an idle round's length ([episode] idle_s, or one trace row)
    "jitter_sigma",
    "time_budget_s",
    "max_rounds",
    "time_scale_s",  # normaliser of the time-valued observations
    "h_ref_s",
    "ring",  # ring all-reduce among the completing sites instead of exchanges via the hub
    "grace",  # fixed_time rounds: a site's window stretches at most by this share (or inf)
    "nonblocking",  # a joiner fetches during a round it does not delay, and adds nothing to it
    "measured",  # the scenario draws unknowns ([unknowns]): rounds keep each site's telemetry
    "carbon",  # the scenario has carbon intensity ([trace] carbon_file): emissions are known
    "carbon_ref_kg",  # [episode] carbon_ref_kg: the carbon objective's scale (0: none posed)
    # [moving]: episodic processes per site while the job runs (docs/moving.md); per process,
    # its onsets per second per site (0: off), its mean duration and its depth, in PROCESSES' order
    "slow_rate_per_s",
    "slow_mean_s",
    "slow_factor",  # fail-slow: throughput over slow_factor
    "link_rate_per_s",
    "link_mean_s",
    "link_depth",  # link excursion: bandwidth times 1 - depth
    "callback_rate_per_s",
    "callback_mean_s",
    "callback_depth",  # power callback: 1 - depth
    "moving",  # some process is on: rounds apply the episode's path (off in a forecast's world)
    "carbon_obs",  # observations add a carbon task's columns (features.CARBON_SITE_ROWS, ...)
)
(
    C_IV, C_ROWS, C_T0, C_HUB_TX, C_RTT_FACTOR, C_AGG, C_LOCAL_STEPS, C_ETA, C_B0, C_PB,
    C_GAMMA, C_A0, C_AMAX, C_TARGET, C_SPAN, C_P0, C_ALPHA, C_NON_IID, C_TAU, C_KAPPA,
    C_FIXED_TIME, C_ROUND_S, C_IDLE_S, C_SIGMA, C_BUDGET, C_MAX_ROUNDS, C_TIME_SCALE, C_H_REF,
    C_RING, C_GRACE, C_NONBLOCKING, C_MEASURED, C_CARBON, C_CARBON_REF,
    C_SLOW_RATE, C_SLOW_MEAN, C_SLOW_FACTOR, C_LINK_RATE, C_LINK_MEAN, C_LINK_DEPTH,
    C_CALLBACK_RATE, C_CALLBACK_MEAN, C_CALLBACK_DEPTH, C_MOVING, C_CARBON_OBS,
) = range(len(CONSTS))  # fmt: skip
# The episodic processes of [moving], each with (rate, mean duration, depth) at
# C_PROCESS + 3 · its index; a process's path in the state is PATH_FIELDS' pair at 2 · its index.
PROCESSES = ("slow", "link", "callback")
P_SLOW, P_LINK, P_CALLBACK = range(len(PROCESSES))
C_PROCESS = C_SLOW_RATE

# --------------------------------------------------------------------------- episodes

# A batch of episodes: (B, len(STATE_FIELDS) + UNKNOWN_SCALARS + STATE_BLOCKS · N): the scalars,
# each site's "joined" slot (1: it completed the last round; with non-blocking joins, the share
# of the training state fetched so far) and its rounds absent; then the episode's unknowns (a
# belief's layout, below: what the world is this episode against the scenario's stated values,
# drawn at reset, all 1 when the scenario draws none), then the telemetry each site last gave
# (SEEN_FIELDS, N each), then each process's path (PATH_FIELDS, N each), then the job's share of
# each site (SHARE_FIELDS).
STATE_FIELDS = (
    "time_s", "start_s", "progress", "accuracy", "rounds", "energy_j", "last_round_s",
    "coverage", "key", "carbon_g", "last_pace", "budget_s",
)  # fmt: skip
(
    TIME, START, PROGRESS, ACC, ROUNDS, ENERGY, LAST_ROUND, COVERAGE, KEY, CARBON, LAST_PACE,
    BUDGET,
) = range(len(STATE_FIELDS))  # fmt: skip
JOINED = len(STATE_FIELDS)  # first of the N joined slots; the N absent counts follow them
KEY_LIMIT = 2**53  # episode keys are whole numbers below this: exact in the float64 state

# The unknowns, or a belief about them: (UNKNOWN_SCALARS + len(UNKNOWN_SITE_FIELDS) · N,), each a
# factor on the scenario's stated value (docs/model.md, "What is unknown"). The scalars, then one
# block of N per site field.
UNKNOWN_FIELDS = (
    "pace",  # the job's progress per round (η_local)
    "noise",  # its gradient noise scale (B0): how progress scales with the global batch
)
U_PACE, U_NOISE = range(len(UNKNOWN_FIELDS))
UNKNOWN_SCALARS = len(UNKNOWN_FIELDS)
UNKNOWN_SITE_FIELDS = (
    "throughput",  # the site's samples/s for this job
    "rtt",  # its round trip to the hub
    "bandwidth",  # its WAN link's bandwidth
    "join",  # its join (allocation and state fetch) time
)
U_THROUGHPUT, U_RTT, U_BANDWIDTH, U_JOIN = range(len(UNKNOWN_SITE_FIELDS))
# What each site's last measurement said, in the state after the unknowns: measured over
# nominal (the scenario's stated values, no jitter) of its compute, its own exchange with the
# hub and its join, and the round it was taken in (-1: never).
SEEN_FIELDS = ("compute_ratio", "transfer_ratio", "join_ratio", "round")
V_COMPUTE, V_TRANSFER, V_JOIN, V_ROUND = range(len(SEEN_FIELDS))
# The episode's path through the [moving] processes (paths.py), per process of PROCESSES: whether
# the site is in an event, and the calendar row at which that phase ends (inf: never). Keyed to
# the calendar's rows and the episode's key, advanced as the clock passes them.
PATH_FIELDS = (
    "slow_on", "slow_until", "link_on", "link_until", "callback_on", "callback_until",
)  # fmt: skip
# Last, each site's share of its powered GPUs that this episode's job holds (SHARE_FIELDS, N): 1
# unless several jobs share the sites (``powertrip_env.multijob`` writes it before each of the
# job's rounds, from its allocation rule; 0: none left for it). The round multiplies it into the
# site's throughput and its GPUs' draw, where a power callback takes its part (``round.py``).
SHARE_FIELDS = ("share",)
STATE_BLOCKS = (
    2 + len(UNKNOWN_SITE_FIELDS) + len(SEEN_FIELDS) + len(PATH_FIELDS) + len(SHARE_FIELDS)
)  # per site


# The spreads a scenario's [unknowns] gives and the draw takes, in this order (all default 0):
SPREAD_FIELDS = (
    "throughput_sigma",  # log-normal σ of each site's throughput factor
    "slow_probability",  # chance that a site is a slow outlier ...
    "slow_factor",  # ... whose throughput is divided by this (1: no outliers)
    "rtt_sigma",  # log-normal σ of each site's RTT factor
    "bandwidth_sigma",  # log-normal σ of each site's bandwidth factor
    "join_sigma",  # log-normal σ of each site's join-time factor
    "pace_sigma",  # log-normal σ of the job's progress per round
    "noise_sigma",  # log-normal σ of the job's gradient noise scale
)
(
    SP_THROUGHPUT, SP_SLOW_P, SP_SLOW_FACTOR, SP_RTT, SP_BANDWIDTH, SP_JOIN, SP_PACE, SP_NOISE,
) = range(len(SPREAD_FIELDS))  # fmt: skip


# Where a state row's unknowns and telemetry sit: compiled, so the kernel's loops and Python
# read the same formulas.
@jit
def unknowns_width(n_sites: int) -> int:
    """Length of an unknowns vector (or a belief) for ``n_sites`` sites."""
    return UNKNOWN_SCALARS + len(UNKNOWN_SITE_FIELDS) * n_sites


@jit
def unknowns_start(n_sites: int) -> int:
    """The state column where an episode's unknowns begin."""
    return JOINED + 2 * n_sites


@jit
def seen_start(n_sites: int) -> int:
    """The state column where the sites' last telemetry (SEEN_FIELDS) begins."""
    return unknowns_start(n_sites) + unknowns_width(n_sites)


@jit
def path_start(n_sites: int) -> int:
    """The state column where the episode's path (PATH_FIELDS) begins."""
    return seen_start(n_sites) + len(SEEN_FIELDS) * n_sites


@jit
def share_start(n_sites: int) -> int:
    """The state column where each site's share of its GPUs held by the job (SHARE_FIELDS)
    begins."""
    return path_start(n_sites) + len(PATH_FIELDS) * n_sites


def state_width(n_sites: int) -> int:
    """Columns of a batch's state (``SimState.data``) for ``n_sites`` sites."""
    return share_start(n_sites) + len(SHARE_FIELDS) * n_sites


# A round's outcome: a (B, len(RECORD_FIELDS)) record and a (B, len(SITE_RECORD), N) one.
RECORD_FIELDS = (
    "round_time_s", "compute_s", "comm_s", "delta_accuracy", "energy_j", "straggler",
    "invalid", "idle", "cut", "n_selected", "terminated", "truncated", "over", "excess_gain",
    "gain_rate", "delta_progress", "carbon_g", "carbon_term", "deadline_term", "carbon_reward",
)  # fmt: skip
(
    R_ROUND_S, R_COMPUTE_S, R_COMM_S, R_DELTA_ACC, R_ENERGY_J, R_STRAGGLER, R_INVALID, R_IDLE,
    R_CUT, R_N_SELECTED, R_TERMINATED, R_TRUNCATED, R_OVER, R_EXCESS_GAIN, R_GAIN_RATE,
    R_DELTA_PROGRESS, R_CARBON_G, R_CARBON_TERM, R_DEADLINE_TERM, R_CARBON_REWARD,
) = range(len(RECORD_FIELDS))  # fmt: skip
# Per site: whether it started and dropped out, its powered GPUs, and its telemetry of the
# round: measured compute (0 unless it completed), its own exchange with the hub (0 unless it
# completed) and the join it paid (0 if none).
SITE_RECORD = ("selected", "dropped", "powered", "compute_s", "transfer_s", "join_s")
SELECTED, DROPPED, POWERED_NOW, T_COMPUTE_S, T_TRANSFER_S, T_JOIN_S = range(len(SITE_RECORD))

# What an environment reports of each episode after a round (or at reset, as after no round):
# the numbers of its info dict, computed by the kernel in the step's own call (``info.py``).
# (B, len(INFO_FIELDS)) float64, whole numbers and flags as 0.0/1.0; interface.INFO_KEYS says
# which key each is and the type it is reported as.
INFO_FIELDS = (
    "round_time_s", "compute_s", "comm_s", "elapsed_s", "start_time_s", "trace_time",
    "accuracy", "n_selected", "invalid_selections", "idle", "cut", "straggler",
    "round_energy_kwh", "energy_kwh", "rounds", "tta_h", "success", "delta_progress",
    "round_carbon_kg", "carbon_kg",
)  # fmt: skip
(
    I_ROUND_S, I_COMPUTE_S, I_COMM_S, I_ELAPSED, I_START, I_TRACE_TIME, I_ACC, I_N_SELECTED,
    I_INVALID, I_IDLE, I_CUT, I_STRAGGLER, I_ROUND_KWH, I_KWH, I_ROUNDS, I_TTA_H, I_SUCCESS,
    I_DELTA_PROGRESS, I_ROUND_CARBON_KG, I_CARBON_KG,
) = range(len(INFO_FIELDS))  # fmt: skip
# Its per-site flags, (B, len(INFO_SITE_FLAGS), width) bool (zeros for padded sites), and the
# powered GPUs, (B, width) int64.
INFO_SITE_FLAGS = ("selected", "dropped", "available")
IF_SELECTED, IF_DROPPED, IF_AVAILABLE = range(len(INFO_SITE_FLAGS))
# And each site's telemetry of the round (SITE_RECORD's), (B, len(INFO_TELEMETRY), width) float64.
INFO_TELEMETRY = ("measured_compute_s", "measured_transfer_s", "measured_join_s")

# --------------------------------------------------------------------------- a round's scratch

# Per site, while a round runs: (len(WORK_FIELDS), N).
WORK_FIELDS = (
    "begin",  # compute starts (after the join)
    "end",  # compute would end (the quota processed, or the window over)
    "fetch",  # non-blocking joins: the fetch of the training state ends; -1 if not fetching
    "join",  # the join the site pays before it computes (0: joined already)
    # the episode's path at the round's start ([moving]; 1 without): what divides the site's
    # throughput (fail-slow, power callback), its bandwidth (link excursion) and its GPUs' draw
    "speed",
    "link",
    "power",
)
W_BEGIN, W_END, W_FETCH, W_JOIN, W_SPEED, W_LINK, W_POWER = range(len(WORK_FIELDS))

# One site's what-if from the forecast (predict._forecast_site): (len(FORECAST_FIELDS),).
FORECAST_FIELDS = (
    "available",  # the forecast's horizon 0 (now) powers a GPU
    "finish_s",  # compute would end
    "drop_s",  # the forecast's first row without power starts (inf: none)
    "dropped",  # available, and power runs out before the compute ends
    "samples",  # fixed_time rounds: samples processed in the window
)
FS_AVAILABLE, FS_FINISH, FS_DROP, FS_DROPPED, FS_SAMPLES = range(len(FORECAST_FIELDS))

# --------------------------------------------------------------------------- running batches

NO_JITTER = np.zeros((0, 0))  # "no jitter given": each episode's own, from its key
PARALLEL_MIN_BATCH = 256  # episodes from which a step runs on all cores (threads cost ~10 µs)
PARALLEL_CHUNKS = 64  # pieces of the batch the threads share out

# The kernel's units and their conversions to people's are powertrip_env/units.py's.
