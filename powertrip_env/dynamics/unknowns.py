"""What a scheduler cannot know before it measures: the episode's unknowns, and beliefs about them.

docs/model.md, "What is unknown". A scenario states each site's throughput, RTT, bandwidth and
join time and the job's progress curve; a real job departs from them (identical GPUs differ,
links between regions vary, a scaling-law fit has an error). With an ``[unknowns]`` section
the episode's true values are those stated times factors drawn at reset from the episode's key
(``draw_unknowns``: counter-based, so paired evaluation and the vector env keep working). The
factors travel in the state, and the round (``round.py``) applies them; nothing a deployable
policy calls reads them (``predict_round``, ``predict_plan``, the candidates, the decision view
and the observation answer from the stated values, or from a belief the caller passes).

A belief has the unknowns' layout (layout.UNKNOWN_FIELDS, then UNKNOWN_SITE_FIELDS blocks of
N): the nominal belief is all ones, an adaptive rule's is its estimates, and ``Informed`` passes
the draw itself, read through the clairvoyant door.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from powertrip_env.dynamics.jit import jit
from powertrip_env.dynamics.jitter import _hash, _mix32, _uniform
from powertrip_env.dynamics.layout import (
    C_MEASURED,
    C_RTT_FACTOR,
    CONSTS,
    DROPPED,
    ROUNDS,
    S_JOIN,
    S_QUOTA,
    S_RTT,
    S_TX,
    SELECTED,
    SP_BANDWIDTH,
    SP_JOIN,
    SP_NOISE,
    SP_PACE,
    SP_RTT,
    SP_SLOW_FACTOR,
    SP_SLOW_P,
    SP_THROUGHPUT,
    SPREAD_FIELDS,
    T_COMPUTE_S,
    T_JOIN_S,
    T_TRANSFER_S,
    U_BANDWIDTH,
    U_JOIN,
    U_NOISE,
    U_PACE,
    U_RTT,
    U_THROUGHPUT,
    UNKNOWN_FIELDS,
    UNKNOWN_SCALARS,
    UNKNOWN_SITE_FIELDS,
    V_COMPUTE,
    V_JOIN,
    V_ROUND,
    V_TRANSFER,
    W_BEGIN,
    W_END,
    W_FETCH,
    W_JOIN,
    W_LINK,
    seen_start,
    unknowns_start,
    unknowns_width,
)
from powertrip_env.dynamics.tables import _samples_at

if TYPE_CHECKING:
    from powertrip_env.dynamics.params import SimParams
    from powertrip_env.dynamics.state import SimState

_UNKNOWN_STREAM = 7  # the hashes' third word for the draw (jitter.py numbers the others)


@jit
def _unknowns_of(st: np.ndarray, n: int) -> np.ndarray:
    """The unknowns of an episode's state row ``st`` (a view, which the round reads)."""
    lo = unknowns_start(n)
    return st[lo : lo + unknowns_width(n)]


@jit
def _site_factor(u: np.ndarray, n: int, field: int, i: int) -> float:
    """Site ``i``'s factor ``field`` (layout.UNKNOWN_SITE_FIELDS) of unknowns or a belief ``u``."""
    return u[UNKNOWN_SCALARS + field * n + i]


@jit
def _join_s(site, u, i):
    """Site ``i``'s join time: the stated one times its factor in ``u`` (`unknowns.fold`
    multiplies in the same order)."""
    return site[S_JOIN, i] * _site_factor(u, site.shape[1], U_JOIN, i)


@jit
def _link(site, u, i):
    """Site ``i``'s RTT and ``M / bw_i`` with the factors of the unknowns (or belief) ``u``, in
    the order `unknowns.fold` multiplies them."""
    n = site.shape[1]
    return (
        site[S_RTT, i] * _site_factor(u, n, U_RTT, i),
        site[S_TX, i] / _site_factor(u, n, U_BANDWIDTH, i),
    )


@jit
def _own_exchange(c, site, u, i, link):
    """Site ``i``'s own exchange with the hub, before the network jitter: its latency term and
    its update over its link, there and back (what its telemetry measures); ``link`` divides
    its bandwidth now (the path's excursion, ``paths.py``; 1 without)."""
    rtt, tx = _link(site, u, i)
    return c[C_RTT_FACTOR] * rtt + 2.0 * (tx / link)


@jit
def _telemetry(c, site, table, st, u, srec, work, comm_jitter, cut):
    """What each started site's round measured, into ``srec``: its compute and own exchange if
    it completed (with the round's jitter: a measurement is noisy), the join it paid. On the
    measured track (``measured``) each completing site's last measurement is also kept in the
    state as measured over nominal (layout.SEEN_FIELDS): for the compute, the work the stated
    throughput would have done in the measured time over the quota, which is the time ratio
    for the same work however the site's power moved (1 / its throughput factor, times the
    jitter)."""
    n = site.shape[1]
    seen = seen_start(n)
    measured = c[C_MEASURED] > 0.0
    for i in range(n):
        srec[T_COMPUTE_S, i] = 0.0
        srec[T_TRANSFER_S, i] = 0.0
        srec[T_JOIN_S, i] = work[W_JOIN, i] if srec[SELECTED, i] > 0.0 else 0.0
        done = srec[SELECTED, i] > 0.0 and srec[DROPPED, i] == 0.0 and work[W_FETCH, i] < 0.0
        if not done:
            continue
        begin = work[W_BEGIN, i]
        compute = work[W_END, i] - begin
        transfer = _own_exchange(c, site, u, i, work[W_LINK, i]) * comm_jitter
        srec[T_COMPUTE_S, i] = compute
        srec[T_TRANSFER_S, i] = transfer
        if not measured or cut:
            continue
        # the samples the stated throughput would have processed in the measured time, over
        # the quota: a time ratio for the same work, whatever the power did meanwhile
        stated_work = _samples_at(c, table, work[W_END, i], i) - _samples_at(c, table, begin, i)
        stated = c[C_RTT_FACTOR] * site[S_RTT, i] + 2.0 * site[S_TX, i]
        if stated_work > 0.0:
            st[seen + V_COMPUTE * n + i] = stated_work / site[S_QUOTA, i]
        if stated > 0.0:
            st[seen + V_TRANSFER * n + i] = transfer / stated
        if work[W_JOIN, i] > 0.0 and site[S_JOIN, i] > 0.0:
            st[seen + V_JOIN * n + i] = work[W_JOIN, i] / site[S_JOIN, i]
        st[seen + V_ROUND * n + i] = st[ROUNDS]


@jit
def _lognormal(key: int, slot: int, sigma: float) -> float:
    """``exp(σ z)`` with z standard normal (Box–Muller), hashed from the key and a slot."""
    if sigma <= 0.0:
        return 1.0
    h = _hash(key, slot & 0xFFFFFFFF, _UNKNOWN_STREAM)
    radius = math.sqrt(-2.0 * math.log(_uniform(_mix32(h ^ 1))))
    angle = 2.0 * math.pi * _uniform(_mix32(h ^ 2))
    return math.exp(sigma * radius * math.cos(angle))


@jit
def _draw_batch(spreads: np.ndarray, keys: np.ndarray, n: int, out: np.ndarray) -> None:
    """Each episode's unknowns from its key, into ``out`` (B, width); ``spreads`` is
    SPREAD_FIELDS in order. Slot numbers keep every factor's stream apart."""
    for b in range(keys.shape[0]):
        key = int(keys[b])
        u = out[b]
        u[U_PACE] = _lognormal(key, 0, spreads[SP_PACE])
        u[U_NOISE] = _lognormal(key, 1, spreads[SP_NOISE])
        # in UNKNOWN_SITE_FIELDS' order
        sigmas = (spreads[SP_THROUGHPUT], spreads[SP_RTT], spreads[SP_BANDWIDTH], spreads[SP_JOIN])
        for f in range(len(UNKNOWN_SITE_FIELDS)):
            for i in range(n):
                u[UNKNOWN_SCALARS + f * n + i] = _lognormal(key, 2 + f * 4096 + i, sigmas[f])
        if spreads[SP_SLOW_P] > 0.0 and spreads[SP_SLOW_FACTOR] > 1.0:
            for i in range(n):
                h = _hash(key, 3 + 4 * 4096 + i, _UNKNOWN_STREAM)
                if _uniform(h) < spreads[SP_SLOW_P]:
                    u[UNKNOWN_SCALARS + U_THROUGHPUT * n + i] /= spreads[SP_SLOW_FACTOR]


def draw_unknowns(spreads: np.ndarray, keys: np.ndarray, n_sites: int) -> np.ndarray:
    """(B, width) unknowns of the episodes with jitter keys ``keys``: all ones when every
    spread is 0 (the known track)."""
    keys = np.asarray(keys, dtype=np.int64).reshape(-1)
    out = np.ones((keys.shape[0], unknowns_width(n_sites)))
    if np.any(np.asarray(spreads) > 0.0):
        _draw_batch(np.asarray(spreads, dtype=np.float64), keys, n_sites, out)
    return out


def nominal_belief(n_sites: int) -> np.ndarray:
    """The belief that the world is as the scenario states it: every factor 1."""
    return np.ones(unknowns_width(n_sites))


@functools.cache
def _nominal_rows(n_sites: int) -> np.ndarray:
    """``nominal_belief`` as the kernel takes it, (1, width), made once per N and read-only: the
    what-ifs of every policy that passes no belief read it (a fresh array would cost more than
    a one-set ``predict_round`` itself)."""
    rows = nominal_belief(n_sites)[None, :]
    rows.flags.writeable = False
    return rows


def belief_rows(belief: Any, batch: int, n_sites: int) -> np.ndarray:
    """A belief as the kernel takes it, (1 or B, width) float64: ``None`` is the nominal one, a
    ``UnknownFactors`` or (width,) array one for every episode, (B, width) one per episode."""
    if belief is None:
        return _nominal_rows(n_sites)
    if isinstance(belief, UnknownFactors):
        belief = belief.vector
    out = np.ascontiguousarray(np.asarray(belief, dtype=np.float64))
    width = unknowns_width(n_sites)
    if out.ndim == 1:
        out = out[None, :]
    if out.ndim != 2 or out.shape[1] != width or out.shape[0] not in (1, batch):
        raise ValueError(
            f"belief of shape {np.shape(belief)}: expected ({width},) or ({batch}, {width}) "
            f"(layout.UNKNOWN_FIELDS, then {len(UNKNOWN_SITE_FIELDS)} blocks of {n_sites} sites)"
        )
    if not _all_positive_finite(out):
        raise ValueError("belief: every factor must be a finite number > 0")
    return out


@jit
def _all_positive_finite(rows: np.ndarray) -> bool:
    """Whether every factor is a finite number > 0: one compiled pass, since a candidate-set
    agent passes its belief before every decision and numpy's two reductions would cost it a
    fifth of the decision."""
    for b in range(rows.shape[0]):
        for j in range(rows.shape[1]):
            x = rows[b, j]
            if not (x > 0.0 and x < math.inf):
                return False
    return True


@dataclass(frozen=True)
class UnknownFactors:
    """Factors on the scenario's stated values, by name: the episode's draw, or a belief.

    The factors themselves, not the spreads they are drawn with (the scenario's ``[unknowns]``,
    ``scenario.types.UnknownSpreads``).

    ``pace`` multiplies the job's progress per round and ``noise`` its gradient noise scale;
    ``throughput``, ``rtt``, ``bandwidth`` and ``join`` (N,) multiply each site's samples/s,
    RTT to the hub, WAN bandwidth and join time. All ones is the world as stated.
    """

    pace: float
    noise: float
    throughput: np.ndarray
    rtt: np.ndarray
    bandwidth: np.ndarray
    join: np.ndarray

    @classmethod
    def from_vector(cls, u: np.ndarray) -> UnknownFactors:
        u = np.asarray(u, dtype=np.float64)
        n = (u.shape[0] - UNKNOWN_SCALARS) // len(UNKNOWN_SITE_FIELDS)
        blocks = [
            u[UNKNOWN_SCALARS + f * n : UNKNOWN_SCALARS + (f + 1) * n].copy()
            for f in range(len(UNKNOWN_SITE_FIELDS))
        ]
        return cls(float(u[U_PACE]), float(u[U_NOISE]), *blocks)

    @classmethod
    def nominal(cls, n_sites: int) -> UnknownFactors:
        return cls.from_vector(nominal_belief(n_sites))

    @property
    def vector(self) -> np.ndarray:
        """The kernel's layout (layout.UNKNOWN_FIELDS, then the site blocks)."""
        scalars = [self.pace, self.noise]
        sites = [np.asarray(getattr(self, f), dtype=np.float64) for f in UNKNOWN_SITE_FIELDS]
        return np.concatenate([np.array(scalars, dtype=np.float64), *sites])

    def replace(self, **fields: Any) -> UnknownFactors:
        return dataclasses.replace(self, **fields)


assert UNKNOWN_FIELDS == ("pace", "noise")  # UnknownFactors' scalars, in this order


def episode_unknowns(state: SimState) -> np.ndarray:
    """CLAIRVOYANT: (B, width) each episode's drawn unknowns (a view of the state)."""
    n = state.n_sites
    lo = unknowns_start(n)
    return state.data[:, lo : lo + unknowns_width(n)]


def with_belief(state: SimState, belief: np.ndarray) -> SimState:
    """A copy of ``state`` whose unknowns are ``belief`` (1 or B, width): the world a what-if
    plays (``predict_plan``), so that it reads what its caller believes, not the draw."""
    n = state.n_sites
    lo = unknowns_start(n)
    data = state.data.copy()
    data[:, lo : lo + unknowns_width(n)] = belief
    return type(state)(data)


def fold(params: SimParams, u: np.ndarray) -> SimParams:
    """CLAIRVOYANT: ``params`` with the unknowns ``u`` folded into the stated values: what the
    world of the episode is. The lower bound reads it; the kernel's arithmetic applies the
    factors in the same order (``quota / throughput``, ``rtt · f``, ``M/bw / f``, ``join · f``,
    ``η · pace``, ``B0 · noise``), so the folded world computes the same numbers as the state's
    factors do."""
    f = UnknownFactors.from_vector(u)
    site = params.site.copy()
    site[S_QUOTA] = site[S_QUOTA] / f.throughput
    site[S_RTT] = site[S_RTT] * f.rtt
    site[S_TX] = site[S_TX] / f.bandwidth
    site[S_JOIN] = site[S_JOIN] * f.join
    site.flags.writeable = False
    consts = params.consts.copy()
    consts[CONSTS.index("eta_local")] *= f.pace
    consts[CONSTS.index("noise_b0")] *= f.noise
    consts.flags.writeable = False
    return dataclasses.replace(params, site=site, consts=consts)


__all__ = [
    "SPREAD_FIELDS",
    "U_BANDWIDTH",
    "U_JOIN",
    "U_RTT",
    "U_THROUGHPUT",
    "UnknownFactors",
    "belief_rows",
    "draw_unknowns",
    "episode_unknowns",
    "fold",
    "nominal_belief",
    "unknowns_width",
    "with_belief",
]
