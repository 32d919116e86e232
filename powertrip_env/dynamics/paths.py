"""A world that moves while the job runs: each site's path through the ``[moving]`` processes.

docs/moving.md. On the measured track the unknowns are drawn once per episode, so a site's first
round identifies it. Published measurements say the real world moves during a day-long job:
sites slow down for a while and recover (fail-slow), links dip and revert (excursions), spare
power is called back (demand response). Each is a two-state process per site, calm and in an
event, whose phases last exponentially distributed times (an alternating renewal process with
memoryless phases, so a stationary start is one coin flip and a draw of the phase's rest).

The path is keyed to the calendar's rows and the episode's key: a phase that ends at row ``r``
is followed by one whose length is a hash of (key, r, process, site), so the path does not
depend on what the policy plays or when it asks, the same seed gives the same path, and a
copied state replays it (the clairvoyant references). The state holds, per process and site,
whether the site is in an event and the row its phase ends (layout.PATH_FIELDS); the round
advances it to the row it starts in and applies the factors there (``round.py``): a round
lasts minutes and a phase hours. Nothing a deployable policy calls reads it: the forecast's
world switches the processes off (``params.forecast_world``), and the what-ifs never run a
true round.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np

from powertrip_env.dynamics.jit import jit
from powertrip_env.dynamics.jitter import _hash, _mix32, _uniform
from powertrip_env.dynamics.layout import (
    C_CALLBACK_DEPTH,
    C_IV,
    C_LINK_DEPTH,
    C_MOVING,
    C_PROCESS,
    C_SLOW_FACTOR,
    KEY,
    P_CALLBACK,
    P_LINK,
    P_SLOW,
    PROCESSES,
    START,
    TIME,
    W_LINK,
    W_POWER,
    W_SPEED,
    WORK_FIELDS,
    path_start,
)
from powertrip_env.dynamics.state import calm_paths
from powertrip_env.dynamics.tables import _row

if TYPE_CHECKING:
    from powertrip_env.dynamics.params import SimParams
    from powertrip_env.dynamics.state import SimState

_PATH_STREAM, _PATH_START_STREAM = 11, 13  # the hashes' third word (jitter.py numbers the others)
_M32 = 0xFFFFFFFF


@jit
def _slot(p: int, i: int) -> int:
    """Process ``p`` and site ``i`` as one number to mix into a hash."""
    return p * 65536 + i


@jit
def _phase_rows(h: int, mean_s: float, iv: float) -> float:
    """A phase's length in whole rows from hash ``h``: an exponential time of mean ``mean_s``
    rounded up to rows (a geometric number of rows, at least one)."""
    return float(math.ceil(-math.log(_uniform(h)) * mean_s / iv))


@jit
def _means(c: np.ndarray, p: int) -> tuple[float, float]:
    """Process ``p``'s mean calm and event durations (s); a calm without end if it is off."""
    rate = c[C_PROCESS + 3 * p]
    calm = 1.0 / rate if rate > 0.0 else math.inf
    return calm, c[C_PROCESS + 3 * p + 1]


@jit
def _start_path(c: np.ndarray, st: np.ndarray, n: int) -> None:
    """A fresh episode's path at its start row: each process's stationary phase (in an event
    with the share of time events take) and the rest of it. Off processes stay calm forever."""
    lo = path_start(n)
    key = int(st[KEY])
    k0 = _row(c, st[START])
    iv = c[C_IV]
    for p in range(len(PROCESSES)):
        calm, event = _means(c, p)
        for i in range(n):
            on, until = lo + 2 * p * n + i, lo + (2 * p + 1) * n + i
            st[on] = 0.0
            st[until] = math.inf
            if calm == math.inf:
                continue
            h = _mix32(_hash(key, k0 & _M32, _PATH_START_STREAM) ^ _slot(p, i))
            if _uniform(h) < event / (event + calm):
                st[on] = 1.0
            mean = event if st[on] > 0.0 else calm
            st[until] = k0 + _phase_rows(_mix32(h ^ 0x5BD1E995), mean, iv)


@jit
def _advance_path(c: np.ndarray, st: np.ndarray, n: int, k: int) -> None:
    """Each process's phases on to row ``k``: a phase that ended at or before it gives way to
    the other, whose length is hashed from the row it starts at."""
    lo = path_start(n)
    key = int(st[KEY])
    iv = c[C_IV]
    for p in range(len(PROCESSES)):
        calm, event = _means(c, p)
        if calm == math.inf:
            continue
        for i in range(n):
            on, until = lo + 2 * p * n + i, lo + (2 * p + 1) * n + i
            while k >= st[until]:
                st[on] = 1.0 - st[on]
                mean = event if st[on] > 0.0 else calm
                ends = int(st[until])
                h = _mix32(_hash(key, ends & _M32, _PATH_STREAM) ^ _slot(p, i))
                st[until] = ends + _phase_rows(h, mean, iv)


@jit
def _in_event(st: np.ndarray, n: int, p: int, i: int) -> bool:
    return st[path_start(n) + 2 * p * n + i] > 0.0


@jit
def _path_factors(c: np.ndarray, st: np.ndarray, n: int, k: int, work: np.ndarray) -> None:
    """The path at row ``k`` (advanced to it) into ``work``'s W_SPEED, W_LINK and W_POWER: what
    divides each site's throughput and bandwidth and what multiplies its GPUs' draw. All 1
    without [moving] or in a forecast's world, so the round's arithmetic is unchanged there."""
    moving = c[C_MOVING] > 0.0
    if moving:
        _advance_path(c, st, n, k)
    for i in range(n):
        speed = 1.0
        link = 1.0
        power = 1.0
        if moving:
            if _in_event(st, n, P_SLOW, i):
                speed = 1.0 / c[C_SLOW_FACTOR]
            if _in_event(st, n, P_LINK, i):
                link = 1.0 - c[C_LINK_DEPTH]
            if _in_event(st, n, P_CALLBACK, i):
                power = 1.0 - c[C_CALLBACK_DEPTH]
                speed *= power  # the GPUs the site can still power
        work[W_SPEED, i] = speed
        work[W_LINK, i] = link
        work[W_POWER, i] = power


@jit
def _start_batch(c: np.ndarray, data: np.ndarray, n: int) -> None:
    for b in range(data.shape[0]):
        _start_path(c, data[b], n)


@jit
def _now_batch(c: np.ndarray, data: np.ndarray, n: int, out: np.ndarray) -> None:
    for b in range(data.shape[0]):
        _path_factors(c, data[b], n, _row(c, data[b, TIME]), out[b])


def start_paths(params: SimParams, data: np.ndarray) -> None:
    """Fresh episodes' paths (``data`` a batch's state, its key and start set), in place."""
    _start_batch(params.consts, data, params.n_sites)


def without_path(state: SimState) -> SimState:
    """A copy of ``state`` whose path is calm for good, as ``initial_state`` leaves it: what a
    forecast's world plays (``plans.predict_plan``). That world never reads the path, and the
    trajectory it hands a deployable policy must not carry the episode's back to it (which
    sites are in an event now, and the rows at which each phase ends)."""
    data = state.data.copy()
    calm_paths(data, state.n_sites)
    return type(state)(data)


def path_now(params: SimParams, state: SimState) -> np.ndarray:
    """CLAIRVOYANT: (B, 3, N) what each episode's path does to each site now: the factors that
    divide its throughput and its bandwidth and multiply its GPUs' draw (1: calm). A perfect
    monitor's reading, of the present only; the state is not changed."""
    data = state.data.copy()
    n = params.n_sites
    out = np.ones((state.batch, len(WORK_FIELDS), n))
    _now_batch(params.consts, data, n, out)
    return out[:, [W_SPEED, W_LINK, W_POWER]]


def path_of(params: SimParams, state: SimState, rows: int) -> np.ndarray:
    """CLAIRVOYANT: (B, rows, 3, N) ``path_now``'s factors for each of the next ``rows`` rows of
    each episode (row by row from its current one): the path itself, for tests and figures."""
    data = state.data.copy()
    n = params.n_sites
    out = np.ones((state.batch, max(int(rows), 0), 3, n))
    work = np.ones((state.batch, len(WORK_FIELDS), n))
    first = (data[:, TIME] / params.interval_s).astype(np.int64)
    for r in range(out.shape[1]):
        at = np.minimum(first + r, params.rows - 1) * params.interval_s
        data[:, TIME] = at
        _now_batch(params.consts, data, n, work)
        out[:, r] = work[:, [W_SPEED, W_LINK, W_POWER]]
    return out
