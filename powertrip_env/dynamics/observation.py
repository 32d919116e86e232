"""Observations: each episode's observation from the per-row table of site features.

Every site feature but one depends only on the trace row, so ``build_params`` computes them
once per scenario (``site_table``) and an observation is a copy of the current row plus the
episode's joined slots and its global features (`_observe_batch`). The columns are declared in
``features.py``; ``step_observe`` runs a round, observes and reports the info in one call into
compiled code.
"""

from __future__ import annotations

import math
import threading
import time
from typing import TYPE_CHECKING, NamedTuple

import numba
import numpy as np

from powertrip_env.dynamics.features import (
    AGE_SCALE_ROUNDS,
    F_JOINED,
    G_COVERAGE,
    G_DAY_COS,
    G_DAY_SIN,
    G_ELAPSED,
    G_LAST_ROUND,
    G_PROGRESS,
    GC_CARBON,
    GC_FINISH,
    GC_TIME_LEFT,
    N_CARBON_JOB,
    N_CARBON_SITE,
    N_GLOBAL,
    N_SITE_FEATURES,
    N_TELEMETRY,
    PACE_SCALE,
)
from powertrip_env.dynamics.info import Info, _fill_info
from powertrip_env.dynamics.jit import compiled, jit
from powertrip_env.dynamics.layout import (
    ACC,
    BUDGET,
    C_A0,
    C_ALPHA,
    C_AMAX,
    C_CARBON_OBS,
    C_CARBON_REF,
    C_MEASURED,
    C_P0,
    C_SPAN,
    C_T0,
    C_TARGET,
    C_TIME_SCALE,
    CARBON,
    COVERAGE,
    INFO_FIELDS,
    INFO_SITE_FLAGS,
    INFO_TELEMETRY,
    JOINED,
    LAST_PACE,
    LAST_ROUND,
    NO_JITTER,
    PARALLEL_CHUNKS,
    PARALLEL_MIN_BATCH,
    PROGRESS,
    RECORD_FIELDS,
    ROUNDS,
    SITE_RECORD,
    START,
    TIME,
    V_ROUND,
    seen_start,
)
from powertrip_env.dynamics.round import _step_batch
from powertrip_env.dynamics.state import RoundResult, SimState, _c_bool
from powertrip_env.dynamics.tables import _row
from powertrip_env.units import G_PER_KG, S_PER_DAY

if TYPE_CHECKING:
    from powertrip_env.dynamics.params import SimParams

_PARALLEL_LOCK = threading.Lock()


class ThreadChoice:
    """Whether a batch's step runs on numba's threads or in the caller's: timed, not assumed.

    Threads pay only on free cores. On two cores with one other busy process, the 1,024-env
    vector env stepped 132k env-steps/s on two threads and 483k on one: a thread the OS
    descheduled mid-step holds the others at the join (benchmarks/bench_env.py; docs/
    performance.md). Several training processes, or RLlib's runners, make a machine busy in
    just this way. So the calls of a batch size are timed, the faster way is kept and its time
    is a moving mean (one preempted call does not flip the choice), and the other way is timed
    again every ``probe_every`` calls, that time replacing its stale one, so a machine that
    becomes busy or free is followed within a probe or two. Each way's first call (which may
    load its compiled code) is not counted. Which way runs never changes a result: every
    episode is stepped by the same serial code, in whichever thread.
    """

    def __init__(self, probe_every: int = 32, weight: float = 0.25) -> None:
        self.probe_every, self.weight = probe_every, weight
        self.seconds: dict[int, list[float]] = {}  # batch -> mean s a call [serial, threads]
        self.timed: dict[int, list[int]] = {}  # batch -> calls seen [serial, threads]
        self.calls: dict[int, int] = {}

    def parallel(self, batch: int) -> bool:
        """Whether the next step of ``batch`` episodes runs on the threads."""
        timed = self.timed.setdefault(batch, [0, 0])
        calls = self.calls[batch] = self.calls.get(batch, 0) + 1
        if min(timed) < 2:  # each way: its first call, then one counted
            return timed[0] >= 2
        serial, threaded = self.seconds[batch]
        faster = threaded < serial
        return (not faster) if calls % self.probe_every == 0 else faster

    def record(self, batch: int, parallel: bool, seconds: float) -> None:
        """How long the step of ``batch`` episodes just took, on the threads or not."""
        way = int(parallel)
        timed = self.timed.setdefault(batch, [0, 0])
        timed[way] += 1
        means = self.seconds.setdefault(batch, [math.nan, math.nan])
        kept = means[way] <= means[1 - way]  # the way in use (False while either is unknown)
        if timed[way] == 2 or (timed[way] > 2 and not kept):
            means[way] = seconds  # a probe's time replaces a stale mean
        elif timed[way] > 2:
            means[way] += self.weight * (seconds - means[way])


THREADS = ThreadChoice()
"""The process's choice for ``step_observe`` (batches from ``PARALLEL_MIN_BATCH`` up, when
numba has more than one thread)."""


@jit
def _observe_batch(c, site_obs, state, out, width, valid):
    """Each episode's observation into a row of ``out``: the site features of ``width`` sites
    (zeros past N; on a carbon task its carbon columns after them, and on the measured track
    its telemetry after those), the global features (on a carbon task the job's after them),
    then (``valid``) the per-site valid flags."""
    n = site_obs.shape[1]
    carbon = c[C_CARBON_OBS] > 0.0
    nf = N_SITE_FEATURES + (N_CARBON_SITE if carbon else 0)
    tel = c[C_MEASURED] > 0.0
    nfo = nf + (N_TELEMETRY if tel else 0)
    g = width * nfo
    ng = N_GLOBAL + (N_CARBON_JOB if carbon else 0)
    seen = seen_start(n)
    for b in range(state.shape[0]):
        st = state[b]
        row = out[b]
        k = _row(c, st[TIME])
        for i in range(n):
            for q in range(nf):
                row[i * nfo + q] = site_obs[k, i, q]
            row[i * nfo + F_JOINED] = st[JOINED + i]
            if tel:
                _telemetry_features(st, seen, n, i, row, i * nfo + nf)
        for x in range(n * nfo, g):
            row[x] = 0.0
        day = 2.0 * math.pi * ((st[TIME] + c[C_T0]) % S_PER_DAY) / S_PER_DAY
        row[g + G_PROGRESS] = min(max((st[ACC] - c[C_A0]) / c[C_SPAN], 0.0), 1.0)
        row[g + G_ELAPSED] = min(max((st[TIME] - st[START]) / st[BUDGET], 0.0), 1.0)
        row[g + G_DAY_SIN] = math.sin(day)
        row[g + G_DAY_COS] = math.cos(day)
        row[g + G_LAST_ROUND] = min(max(st[LAST_ROUND] / c[C_TIME_SCALE], 0.0), 1.0)
        row[g + G_COVERAGE] = min(max(st[COVERAGE], 0.0), 1.0)
        if carbon:
            _job_carbon_features(c, st, row, g + N_GLOBAL)
        if valid:
            for i in range(width):
                row[g + ng + i] = 1.0 if i < n else 0.0


@jit
def _job_carbon_features(c, st, row, at):
    """A carbon task's job columns (features.CARBON_JOB_ROWS), into ``row`` from ``at``: the
    time left, the time the progress still needed takes at the last pace (over the time left),
    and the grid carbon so far (over the price of a miss)."""
    left_s = st[START] + st[BUDGET] - st[TIME]
    row[at + GC_TIME_LEFT] = min(max(left_s / st[BUDGET], 0.0), 1.0)
    # the progress at which the curve reaches the target at full coverage (formulas)
    ratio = (c[C_AMAX] - c[C_TARGET]) / (c[C_AMAX] - c[C_A0])
    needed = max(c[C_P0] * (ratio ** (-1.0 / c[C_ALPHA]) - 1.0) - st[PROGRESS], 0.0)
    if st[LAST_PACE] > 0.0 and left_s > 0.0:
        finish = needed / st[LAST_PACE] / left_s / PACE_SCALE
        row[at + GC_FINISH] = min(max(finish, 0.0), 1.0)
    else:
        row[at + GC_FINISH] = 0.0 if needed <= 0.0 else 1.0
    ref_g = c[C_CARBON_REF] * G_PER_KG
    row[at + GC_CARBON] = min(max(st[CARBON] / ref_g, 0.0), 1.0) if ref_g > 0.0 else 0.0


@jit
def _telemetry_features(st, seen, n, i, row, at):
    """Site ``i``'s telemetry columns (features.TELEMETRY_ROWS) from the state's last
    measurements, into ``row`` from ``at``."""
    measured_at = st[seen + V_ROUND * n + i]
    for f in range(3):
        ratio = st[seen + f * n + i]
        x = math.log(ratio) if ratio > 0.0 and measured_at >= 0.0 else 0.0
        row[at + f] = min(max(x, -1.0), 1.0)
    if measured_at < 0.0:
        row[at + 3] = 1.0
    else:
        row[at + 3] = min((st[ROUNDS] - 1.0 - measured_at) / AGE_SCALE_ROUNDS, 1.0)


@jit
def _step_observe(
    c, site, table, site_obs, state, masks, jitter, rec, srec, out, width, valid, iv, fl, pw, tm
):
    """`_step_batch`, `_observe_batch` and `_fill_info`: all an environment step needs, in one
    call (``iv``, ``fl``, ``pw``, ``tm``: the ``Info`` arrays)."""
    _step_batch(c, site, table, state, masks, jitter, rec, srec)
    _observe_batch(c, site_obs, state, out, width, valid)
    _fill_info(c, table, state, rec, srec, iv, fl, pw, tm)


@compiled(nogil=True, error_model="numpy", parallel=True)
def _step_observe_parallel(
    c, site, table, site_obs, state, masks, rec, srec, out, width, valid, iv, fl, pw, tm
):
    """`_step_observe` on all cores: the batch in chunks, each episode as in the serial call."""
    b = state.shape[0]
    chunks = min(b, PARALLEL_CHUNKS)
    for ch in numba.prange(chunks):
        lo, hi = ch * b // chunks, (ch + 1) * b // chunks
        _step_observe(
            c,
            site,
            table,
            site_obs,
            state[lo:hi],
            masks[lo:hi],
            NO_JITTER,
            rec[lo:hi],
            srec[lo:hi],
            out[lo:hi],
            width,
            valid,
            iv[lo:hi],
            fl[lo:hi],
            pw[lo:hi],
            tm[lo:hi],
        )


def site_features(params: SimParams) -> int:
    """Columns per site in ``params``' observations: the features, on a carbon task its carbon
    columns (features.CARBON_SITE_ROWS), and on the measured track the telemetry
    (features.TELEMETRY_ROWS)."""
    return (
        N_SITE_FEATURES
        + (N_CARBON_SITE if params.carbon_obs else 0)
        + (N_TELEMETRY if params.measured else 0)
    )


def global_features(params: SimParams) -> int:
    """Global columns in ``params``' observations: the features, and on a carbon task the
    job's (features.CARBON_JOB_ROWS)."""
    return N_GLOBAL + (N_CARBON_JOB if params.carbon_obs else 0)


def _obs_buffer(batch: int, width: int, valid: bool, per_site: int, n_global: int) -> np.ndarray:
    """Flat observations of ``width`` sites: their features, the global ones, valid flags."""
    return np.empty((batch, width * per_site + n_global + (width if valid else 0)), np.float32)


def step_observe(
    params: SimParams,
    state: SimState,
    mask: np.ndarray,
    width: int,
    valid: bool,
    scratch: Scratch | None = None,
) -> tuple[RoundResult, np.ndarray, Info]:
    """`step_round`, the new observations, flat (B, width·F + G [+ width]), and the info's
    numbers (``info.Info``, per-site parts of ``width`` sites), in one call.

    ``scratch`` (``Scratch.fit``, for this batch, ``params``' sites, ``width`` and ``valid``)
    lends the round's record and the info's values, which a caller that reads them before its
    next step need not have made anew (the environments' steps); the state, the observations
    and the per-site flags are fresh arrays every call.
    """
    b = state.batch
    if scratch is None:
        scratch = Scratch.fit(
            None, b, params.n_sites, width, valid, site_features(params), global_features(params)
        )
    data = state.data.copy()
    obs = np.empty(scratch.obs_shape, np.float32)
    info = Info(
        scratch.values,
        np.empty(scratch.flags_shape, np.bool_),
        np.empty(scratch.powered_shape, np.int64),
        np.empty((b, len(INFO_TELEMETRY), scratch.powered_shape[1])),
    )
    if mask.dtype != np.bool_ or not mask.flags.c_contiguous:
        mask = _c_bool(mask)
    args = (params.consts, params.site, params.table, params.site_obs, data, mask)
    record, sites = scratch.record, scratch.sites
    if b >= PARALLEL_MIN_BATCH and numba.get_num_threads() > 1:
        threaded = THREADS.parallel(b)
        started = time.perf_counter()
        if threaded:
            with _PARALLEL_LOCK:  # numba's "workqueue" thread pool is documented not thread-safe
                _step_observe_parallel(*args, record, sites, obs, width, valid, *info)
        else:
            _step_observe(*args, NO_JITTER, record, sites, obs, width, valid, *info)
        THREADS.record(b, threaded, time.perf_counter() - started)
    else:
        _step_observe(*args, NO_JITTER, record, sites, obs, width, valid, *info)
    return RoundResult(SimState(data), record, sites), obs, info


class Scratch(NamedTuple):
    """What a step writes and its caller reads before the next: the round's record, its
    per-site record and the info's values, for a batch of B episodes of N sites; and the
    shapes of the arrays each step makes anew (observations, per-site flags, powered GPUs) for
    ``width`` sites, worked out once here rather than at every step."""

    record: np.ndarray
    sites: np.ndarray
    values: np.ndarray
    obs_shape: tuple[int, int]
    flags_shape: tuple[int, int, int]
    powered_shape: tuple[int, int]

    @staticmethod
    def fit(
        scratch: Scratch | None,
        batch: int,
        n_sites: int,
        width: int,
        valid: bool,
        per_site: int = N_SITE_FEATURES,
        n_global: int = N_GLOBAL,
    ) -> Scratch:
        """``scratch`` if it fits ``batch`` episodes of ``n_sites`` sites laid out over
        ``width`` (with the ``valid`` flags or not) with ``per_site`` columns each and
        ``n_global`` global ones, else new
        arrays."""
        obs_shape = (batch, width * per_site + n_global + (width if valid else 0))
        if (
            scratch is not None
            and scratch.sites.shape == (batch, len(SITE_RECORD), n_sites)
            and scratch.obs_shape == obs_shape
        ):
            return scratch
        return Scratch(
            np.empty((batch, len(RECORD_FIELDS))),
            np.empty((batch, len(SITE_RECORD), n_sites)),
            np.empty((batch, len(INFO_FIELDS))),
            obs_shape,
            (batch, len(INFO_SITE_FLAGS), width),
            (batch, width),
        )


def observe(params: SimParams, state: SimState, width: int, valid: bool) -> np.ndarray:
    """Flat observations (B, width·F + G [+ width]) float32: site features (zeros for padded
    sites), global features, and with ``valid`` the per-site valid flags."""
    obs = _obs_buffer(state.batch, width, valid, site_features(params), global_features(params))
    _observe_batch(params.consts, params.site_obs, state.data, obs, width, valid)
    return obs
