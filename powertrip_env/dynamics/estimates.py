"""What a deployable policy estimates from the telemetry, compiled with the kernel.

On the measured and moving tracks each site's speed, link and join differ from the stated values,
and the job's progress curve is known only to a fit's error (docs/model.md, "What is unknown").
The adaptive rules and the candidate-set agent plan with *estimates* built from what the rounds
measured (``powertrip_env.baselines.adaptive`` says how and why). They are updated before every
decision, and a decision of the agent is otherwise a few tens of microseconds, so the update
and the belief it gives are written here as scalar loops over a batch of episodes, one compiled
call each, on the telemetry read out of the state in one more (``Telemetry``).

An episode's estimates are one float64 row (``estimates_width``):

* the clock of the telemetry last read, and the round about to be played (whether there is one,
  its start's progress and its global batch);
* the job's pace and noise fit: per noise factor of the grid, the running mean and sum of
  squared deviations (Welford's) of each measured round's log progress over the stated curve's,
  so a fit costs the grid, not the rounds measured;
* per site, the log of measured over stated compute, exchange and join, how many measurements
  each holds, the round last read, and for a world that moves the long-run levels of compute
  and exchange and when each was last measured.

``estimator_config`` packs what the estimate assumes (the smoothing, the optimism and the
spreads it is in units of, the change detection, the noise grid) and the stated workload. Nothing
here reads an unknown: only the ``SEEN_FIELDS`` telemetry, the progress the job has made (which
the observation shows) and the clock.
"""

from __future__ import annotations

import math
from typing import Any, NamedTuple

import numpy as np

from powertrip_env.dynamics.jit import jit
from powertrip_env.dynamics.layout import (
    C_B0,
    C_ETA,
    C_GAMMA,
    C_LOCAL_STEPS,
    C_PB,
    CONSTS,
    PROGRESS,
    ROUNDS,
    SEEN_FIELDS,
    TIME,
    U_BANDWIDTH,
    U_JOIN,
    U_NOISE,
    U_PACE,
    U_RTT,
    U_THROUGHPUT,
    UNKNOWN_SCALARS,
    V_COMPUTE,
    V_JOIN,
    V_ROUND,
    V_TRANSFER,
    seen_start,
    unknowns_width,
)
from powertrip_env.dynamics.learning import _noise_scale
from powertrip_env.dynamics.tables import _row, available_now

# What policies use (the baselines may import these, as they do the formulas): the estimates
# read nothing but the telemetry, so they are not the simulator's core.
__all__ = [
    "CONFIG_FIELDS",
    "ESTIMATE_FIELDS",
    "SITE_BLOCKS",
    "EstimateRows",
    "Telemetry",
    "belief_of",
    "estimates_width",
    "estimator_config",
    "fit_pace_noise",
    "fitted_rounds",
    "new_estimates",
    "played_estimates",
    "played_row",
    "restart_rows",
    "site_block",
    "telemetry",
    "update_estimates",
    "update_row",
]


class Telemetry(NamedTuple):
    """A batch's telemetry as the estimates read it: (B, len(SEEN_FIELDS), N) each site's last
    measurement (``SimState.seen``), the progress, rounds and clock (B,), and the sites powered
    now (B, N): what ``decision_view`` shows of them, without the rest of the view."""

    seen: np.ndarray
    progress: np.ndarray
    rounds: np.ndarray
    clock_s: np.ndarray
    available: np.ndarray


# The configuration's slots (``estimator_config``), then the noise grid.
CONFIG_FIELDS = (
    "smoothing",  # the weight of the newest measurement in a smoothed estimate
    "optimism",  # σ of the spreads an unmeasured site is believed better than stated by (0: none)
    "throughput_sigma",  # the scenario's spreads, in which the optimism is counted
    "link_sigma",  # hypot of the RTT's and the bandwidth's: an exchange's
    "join_sigma",
    "tracking",  # 1: the moving track's change detection, forgetting and re-probing
    "band",  # a change: a departure beyond this, in log-ratio
    "tau_s",  # s: how fast an unmeasured site's belief returns to its long-run level
    "site_batch",  # the stated samples per site per round: a round's global batch, per site
)
(
    K_SMOOTHING, K_OPTIMISM, K_THROUGHPUT_SIGMA, K_LINK_SIGMA, K_JOIN_SIGMA, K_TRACKING, K_BAND,
    K_TAU_S, K_SITE_BATCH,
) = range(len(CONFIG_FIELDS))  # fmt: skip
K_GRID = len(CONFIG_FIELDS)

# An episode's row: the scalars, the fit's 2 · G, then per-site blocks of N.
ESTIMATE_FIELDS = ("clock_s", "progress", "has_last", "last_progress", "last_batch", "fitted")
E_CLOCK, E_PROGRESS, E_HAS_LAST, E_LAST_PROGRESS, E_LAST_BATCH, E_FITTED = range(
    len(ESTIMATE_FIELDS)
)
E_FIT = len(ESTIMATE_FIELDS)
# log-ratios of compute, exchange, join; their counts; round last read; long-run compute and
# exchange; when each of those two was last measured; whether powered at the last read
SITE_BLOCKS = ("log", "log", "log", "weight", "weight", "weight", "round", "base", "base",
               "measured_s", "measured_s", "available")  # fmt: skip
B_LOG, B_WEIGHT, B_ROUND, B_BASE, B_MEASURED, B_AVAILABLE = 0, 3, 6, 7, 9, 11


def estimates_width(n_sites: int, grid: int) -> int:
    """Length of one episode's estimates row."""
    return E_FIT + 2 * grid + len(SITE_BLOCKS) * n_sites


def estimator_config(
    workload: Any,
    grid: np.ndarray,
    smoothing: float,
    optimism: float = 0.0,
    spreads: Any = None,
    band: float | None = None,
    tau_s: float = math.inf,
) -> tuple[np.ndarray, np.ndarray]:
    """The configuration (``CONFIG_FIELDS`` then the noise grid) and the stated workload's
    constants (``CONSTS``' slots of the progress curve) the compiled estimates take.

    ``spreads`` (the scenario's ``[unknowns]``) are what ``optimism`` counts in; without them
    the optimism is off. ``band`` (a log-ratio) turns the moving track's tracking on.
    """
    cfg = np.zeros(K_GRID + len(grid))
    cfg[K_SMOOTHING] = smoothing
    if optimism > 0.0 and spreads is not None:
        cfg[K_OPTIMISM] = optimism
        cfg[K_THROUGHPUT_SIGMA] = spreads.throughput_sigma
        cfg[K_LINK_SIGMA] = math.hypot(spreads.rtt_sigma, spreads.bandwidth_sigma)
        cfg[K_JOIN_SIGMA] = spreads.join_sigma
    if band is not None:
        cfg[K_TRACKING] = 1.0
        cfg[K_BAND] = band
        cfg[K_TAU_S] = tau_s
    cfg[K_SITE_BATCH] = float(workload.site_batch)
    cfg[K_GRID:] = grid
    consts = np.zeros(len(CONSTS))
    consts[C_B0] = workload.noise_b0
    consts[C_PB] = workload.noise_p_b
    consts[C_GAMMA] = workload.noise_gamma
    consts[C_LOCAL_STEPS] = float(workload.local_steps)
    consts[C_ETA] = workload.eta_local
    return cfg, consts


def new_estimates(batch: int, n_sites: int, grid: int) -> np.ndarray:
    """(B, width) estimates of episodes that measured nothing yet: every site as stated."""
    out = np.zeros((batch, estimates_width(n_sites, grid)))
    restart_rows(out, np.ones(batch, dtype=np.bool_), n_sites, grid)
    return out


def restart_rows(est: np.ndarray, rows: np.ndarray, n_sites: int, grid: int) -> None:
    """Start the estimates of ``rows`` (B,) bool again from the stated values."""
    est[rows] = 0.0
    lo = E_FIT + 2 * grid + B_ROUND * n_sites
    est[np.flatnonzero(rows)[:, None], np.arange(lo, lo + n_sites)] = -1.0  # no round read


@jit
def _site(g: int, n: int, block: int, i: int) -> int:
    """Index of site ``i``'s slot of ``block`` (``B_*``) in a row with grid ``g``."""
    return E_FIT + 2 * g + (block * n) + i


@jit
def _measure(cfg, est, g, n, f, i, x, clock):
    """Fold the log-ratio ``x`` of field ``f`` (0 compute, 1 exchange) of site ``i`` in: a
    site's first measurement is its estimate, later ones are smoothed in, since on a world that
    holds still only the jitter moves them. Tracking, a departure beyond the band is a change
    and replaces the estimate, and the long-run level is kept apart (docs/moving.md)."""
    s = cfg[K_SMOOTHING]
    at_log = _site(g, n, B_LOG + f, i)
    first = est[_site(g, n, B_WEIGHT + f, i)] == 0.0
    level = est[at_log]
    if cfg[K_TRACKING] == 0.0:
        est[at_log] = x if first else (1.0 - s) * level + s * x
        return
    band = cfg[K_BAND]
    at_base = _site(g, n, B_BASE + f, i)
    base = est[at_base]
    if first:
        est[at_log] = x
        est[at_base] = x
    else:
        est[at_log] = x if abs(x - level) > band else (1.0 - s) * level + s * x
        if x < base - band:  # the long-run level was itself measured in an event
            est[at_base] = x
        elif x <= base + band:  # a reading above it by more is an event: left alone
            est[at_base] = (1.0 - s) * base + s * x
    est[_site(g, n, B_MEASURED + f, i)] = clock


@jit
def _fit_round(cfg, consts, est, g, before, batch, gained):
    """One round's progress ``gained`` from ``before`` with global ``batch``: its log over the
    stated curve's at every noise factor of the grid, folded into each factor's running mean
    and squared deviations (Welford's update). The noise scale's growth along the curve is the
    same for every factor, so it is computed once (the scale is linear in the factor)."""
    k = est[E_FITTED] + 1.0
    scale = _noise_scale(consts, 1.0, before)
    for j in range(g):
        eff = 1.0 / (1.0 + cfg[K_GRID + j] * scale / batch)
        stated = consts[C_LOCAL_STEPS] * consts[C_ETA] * eff
        r = math.log(gained / stated)
        mean = est[E_FIT + j]
        d = r - mean
        mean += d / k
        est[E_FIT + j] = mean
        est[E_FIT + g + j] += d * (r - mean)
    est[E_FITTED] = k


@jit
def update_row(cfg, consts, est, compute, transfer, join, at, available, progress, rounds, clock):
    """Read one episode's telemetry: every site's new measurements, and the progress the
    round just played made (when one was played and it made any). The sites powered now and
    the progress are kept for ``played_row``."""
    g = cfg.shape[0] - K_GRID
    n = compute.shape[0]
    est[E_CLOCK] = clock  # the end of the round the fresh measurements come from
    est[E_PROGRESS] = progress
    for i in range(n):
        est[_site(g, n, B_AVAILABLE, i)] = 1.0 if available[i] else 0.0
        at_round = _site(g, n, B_ROUND, i)
        if at[i] > est[at_round]:
            for f in range(2):
                ratio = compute[i] if f == 0 else transfer[i]
                if ratio > 0.0:
                    _measure(cfg, est, g, n, f, i, math.log(ratio), clock)
                    est[_site(g, n, B_WEIGHT + f, i)] += 1.0
            est[at_round] = at[i]
        # a join has no jitter: its one measurement is the site's join (1: never joined yet)
        joined = join[i] != 1.0
        est[_site(g, n, B_LOG + 2, i)] = math.log(max(join[i], 1e-9)) if joined else 0.0
        est[_site(g, n, B_WEIGHT + 2, i)] = 1.0 if joined else 0.0
    if est[E_HAS_LAST] != 0.0 and rounds > 0:
        before, batch = est[E_LAST_PROGRESS], est[E_LAST_BATCH]
        gained = progress - before
        if batch > 0.0 and gained > 0.0:
            _fit_round(cfg, consts, est, g, before, batch, gained)
    est[E_HAS_LAST] = 0.0


@jit
def fit_pace_noise(cfg, est):
    """The job's pace and noise-scale factors that best explain the progress measured: per
    noise factor the pace in closed form (the mean log residual), so the fit's squared error is
    the residuals' squared deviations; the factor that leaves the least (the first of
    near-equal fits)."""
    g = cfg.shape[0] - K_GRID
    if est[E_FITTED] == 0.0:
        return 1.0, 1.0
    best, at = math.inf, -1
    for j in range(g):
        err = est[E_FIT + g + j]
        if err < best - 1e-12:
            best, at = err, j
    if at < 0:  # no finite fit
        return 1.0, 1.0
    return math.exp(est[E_FIT + at]), cfg[K_GRID + at]


@jit
def _site_log(cfg, est, g, n, f, i):
    """The believed log-ratio of field ``f`` (0 compute, 1 exchange) of site ``i``: tracking,
    its long-run level plus its current departure weighted by how recently it was measured, so
    a site that slowed and then sat out drifts back and is tried again."""
    log = est[_site(g, n, B_LOG + f, i)]
    if cfg[K_TRACKING] == 0.0:
        return log
    base = est[_site(g, n, B_BASE + f, i)]
    age = max(est[E_CLOCK] - est[_site(g, n, B_MEASURED + f, i)], 0.0)
    return base + (log - base) * math.exp(-age / cfg[K_TAU_S])


@jit
def belief_row(cfg, est, n, out):
    """What the telemetry says so far, as a belief (``UNKNOWN_FIELDS``' layout), optimistic
    about the sites never measured when the optimism is on."""
    g = cfg.shape[0] - K_GRID
    pace, noise = fit_pace_noise(cfg, est)
    out[U_PACE] = pace
    out[U_NOISE] = noise
    opt = cfg[K_OPTIMISM]
    for i in range(n):
        thr = math.exp(-_site_log(cfg, est, g, n, 0, i))  # its inverse is the speed
        transfer = math.exp(_site_log(cfg, est, g, n, 1, i))
        join = math.exp(est[_site(g, n, B_LOG + 2, i)])
        if opt > 0.0:
            if est[_site(g, n, B_WEIGHT, i)] == 0.0:
                thr = math.exp(opt * cfg[K_THROUGHPUT_SIGMA])
            if est[_site(g, n, B_WEIGHT + 1, i)] == 0.0:
                transfer = math.exp(-opt * cfg[K_LINK_SIGMA])
            if est[_site(g, n, B_WEIGHT + 2, i)] == 0.0:
                join = math.exp(-opt * cfg[K_JOIN_SIGMA])
        # an exchange measured r times the stated one: its RTT times r and its bandwidth over r
        out[UNKNOWN_SCALARS + U_THROUGHPUT * n + i] = thr
        out[UNKNOWN_SCALARS + U_RTT * n + i] = transfer
        out[UNKNOWN_SCALARS + U_BANDWIDTH * n + i] = 1.0 / transfer
        out[UNKNOWN_SCALARS + U_JOIN * n + i] = join


@jit
def played_row(cfg, est, mask):
    """Remember the round about to be played, requesting ``mask`` (N,): its start's progress
    and its global batch (the sites it requests that were powered at the last read)."""
    g = cfg.shape[0] - K_GRID
    n = (est.shape[0] - E_FIT - 2 * g) // len(SITE_BLOCKS)  # a padded mask is longer
    count = 0
    for i in range(n):
        if mask[i] and est[_site(g, n, B_AVAILABLE, i)] != 0.0:
            count += 1
    est[E_HAS_LAST] = 1.0
    est[E_LAST_PROGRESS] = est[E_PROGRESS]
    est[E_LAST_BATCH] = cfg[K_SITE_BATCH] * count


@jit
def _update_batch(cfg, consts, est, seen, available, progress, rounds, clock, out):
    """Every episode's update, then its belief into ``out`` (B, width)."""
    n = seen.shape[2]
    for b in range(est.shape[0]):
        update_row(
            cfg,
            consts,
            est[b],
            seen[b, V_COMPUTE],
            seen[b, V_TRANSFER],
            seen[b, V_JOIN],
            seen[b, V_ROUND],
            available[b],
            progress[b],
            rounds[b],
            clock[b],
        )
        belief_row(cfg, est[b], n, out[b])


@jit
def _update_from_state(cfg, consts, est, c, powered, data, n, played, out):
    """``_update_batch`` reading the telemetry where the state keeps it, after telling each
    row the set its last round played (``played`` (B, N); no rows: none to tell)."""
    lo = seen_start(n)
    for b in range(data.shape[0]):
        if played.shape[0] > 0:
            played_row(cfg, est[b], played[b])
        seen = data[b, lo : lo + len(SEEN_FIELDS) * n]
        update_row(
            cfg,
            consts,
            est[b],
            seen[V_COMPUTE * n : (V_COMPUTE + 1) * n],
            seen[V_TRANSFER * n : (V_TRANSFER + 1) * n],
            seen[V_JOIN * n : (V_JOIN + 1) * n],
            seen[V_ROUND * n : (V_ROUND + 1) * n],
            powered[_row(c, data[b, TIME])],
            data[b, PROGRESS],
            data[b, ROUNDS],
            data[b, TIME],
        )
        belief_row(cfg, est[b], n, out[b])


@jit
def _played_batch(cfg, est, masks):
    for b in range(est.shape[0]):
        played_row(cfg, est[b], masks[b])


class EstimateRows(NamedTuple):
    """A batch's estimates as the kernel takes them: the configuration and stated workload
    (``estimator_config``), the rows (B, ``estimates_width``), updated in place, and the sets
    (B, N) the round since the last read played, not yet told to them (no rows: none). A
    policy hands its played sets over this way to save a compiled call per decision."""

    cfg: np.ndarray
    consts: np.ndarray
    est: np.ndarray
    played: np.ndarray


def belief_of(cfg: np.ndarray, est: np.ndarray, n_sites: int) -> np.ndarray:
    """One episode's belief now (``UNKNOWN_FIELDS``' layout), from its estimates row."""
    out = np.empty(unknowns_width(n_sites))
    belief_row(cfg, est, n_sites, out)
    return out


# the per-site blocks by name: (first block, how many)
_BLOCKS = {"log": (B_LOG, 3), "weight": (B_WEIGHT, 3), "base": (B_BASE, 2)}


def site_block(est: np.ndarray, n_sites: int, grid: int, name: str) -> np.ndarray:
    """A view of one episode's per-site estimates: ``log`` (3, N) the log of measured over
    stated compute, exchange and join (the current level, tracking), ``weight`` (3, N) how
    many measurements each holds, ``base`` (2, N) the long-run levels of compute and exchange."""
    block, fields = _BLOCKS[name]
    lo = E_FIT + 2 * grid + block * n_sites
    return est[lo : lo + fields * n_sites].reshape(fields, n_sites)


def fitted_rounds(est: np.ndarray) -> int:
    """How many rounds' progress one episode's fit holds."""
    return int(est[E_FITTED])


def telemetry(params: Any, state: Any) -> Telemetry:
    """A batch's telemetry now (``Telemetry``), copied out of ``state`` in one compiled pass
    (cheaper than read-only views, which cost a flag each), with the sites powered now
    (``available_now``)."""
    data = state.data
    b, n = data.shape[0], params.n_sites
    seen = np.empty((b, len(SEEN_FIELDS), n))
    scalars = np.empty((3, b))
    _read_telemetry(data, n, seen, scalars)
    return Telemetry(seen, scalars[0], scalars[1], scalars[2], available_now(params, state))


@jit
def _read_telemetry(data, n, seen, scalars):
    lo = seen_start(n)
    for b in range(data.shape[0]):
        for f in range(seen.shape[1]):
            for i in range(n):
                seen[b, f, i] = data[b, lo + f * n + i]
        scalars[0, b] = data[b, PROGRESS]
        scalars[1, b] = data[b, ROUNDS]
        scalars[2, b] = data[b, TIME]


def update_estimates(
    cfg: np.ndarray, consts: np.ndarray, est: np.ndarray, telemetry: Telemetry
) -> np.ndarray:
    """Fold a batch's telemetry into its estimates ``est`` (B, width), in place, and give the
    beliefs they now hold (B, unknowns width)."""
    n = telemetry.seen.shape[2]
    out = np.empty((est.shape[0], unknowns_width(n)))
    _update_batch(
        cfg, consts, est, telemetry.seen, telemetry.available, telemetry.progress,
        telemetry.rounds, telemetry.clock_s, out,
    )  # fmt: skip
    return out


def played_estimates(cfg: np.ndarray, est: np.ndarray, masks: np.ndarray) -> None:
    """Tell a batch's estimates the sets (B, N) the coming round requests."""
    _played_batch(cfg, est, masks)
