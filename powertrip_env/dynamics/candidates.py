"""Candidate site sets for the coming round, built inside the kernel for a whole batch.

A per-site action asks a policy to find, among 2^N − 1 sets, one whose round is short and whose
sites will stay. The candidate-set agent (``agents/candidates.py``) and the horizon rule
(``powertrip_env.baselines.lookahead.HorizonRule``) instead choose among a few sets that
``predict_round`` already ranks well. A site that sat out the last round pays a join before it
trains; charged to one round, the join makes every absent site look unprofitable, left out it makes
every set look free to change. The right charge is the join spread over the rounds the set will be
kept, which depends on where the power is going: a horizon.

Each round, a pool of at most 4m + 1 sets of the m available sites (the prefixes of three
rankings, the current set with each site added or removed, and the current set) is predicted
twice, with and without joins. Slot 0 is the current set ("keep"); the next slots are the
pool's best set with the joins spread over ``HORIZONS[j]`` rounds; then the best at steady
state (joins ignored); then the best at ``STICKY_HORIZONS[j]`` unless it beats the current set
by less than ``STICKY_MARGIN``; last, the tuned horizon rule's choice (``TUNED_RULE``). Each
slot is described by ``SLOT_FEATURES``, which do not depend on N or on the job's scale, so one
model acts on any catalogue.

This is one compiled pass per batch of episodes (``build_candidates``): one call per vector
step, not per env. It reads only what ``decision_view`` shows (power now, the forecast issued
now, who is joined) and the what-if of ``predict._predict_batch``; no future actual.
``tests/candidates_reference.py`` keeps the same construction written in numpy, and the tests
check the two agree bit for bit.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, NamedTuple

import numpy as np

from powertrip_env.dynamics.estimates import EstimateRows, _update_from_state
from powertrip_env.dynamics.jit import jit
from powertrip_env.dynamics.layout import (
    ACC,
    C_A0,
    C_TARGET,
    JOINED,
    LAST_ROUND,
    TIME,
    unknowns_width,
)
from powertrip_env.dynamics.predict import P_DELTA_PROGRESS, P_ROUND_S, _predict_batch
from powertrip_env.dynamics.tables import _row
from powertrip_env.dynamics.unknowns import belief_rows

if TYPE_CHECKING:
    from powertrip_env.dynamics.params import SimParams
    from powertrip_env.dynamics.state import SimState

# Rounds over which a joining site's one-off cost is spread when slots are ranked. Doubling
# steps cover a set kept for one round (MyopicOptimal's charge, h = 1) to one kept for about an
# hour on the flagship (rounds of a few minutes); the steady-state slot is h = ∞.
HORIZONS: tuple[int, ...] = (1, 2, 4, 8, 16)
# The same, but the current set stays unless the best set beats it by STICKY_MARGIN at that
# horizon: a deterministic rule for "do not change sets for a small predicted gain", which a
# forecast's error would eat (measured on PowerTrip-v0, 30 test episodes: h = 8 with no margin
# 26.72 h, h = 10 with 5% 26.33 h, against MyopicOptimal's 28.30 h).
STICKY_HORIZONS: tuple[int, ...] = (4, 8, 16, 32)
STICKY_MARGIN = 0.05
# The last slot is the horizon rule as tuned on the flagship's train days (6 rounds, 2%:
# powertrip_env.baselines.lookahead.TUNED["HorizonRule"], which a test keeps equal): the strongest
# cheap deployable rule, so a model that learns when to leave it starts from it.
TUNED_RULE: tuple[float, float] = (6.0, 0.02)
N_SLOTS = 3 + len(HORIZONS) + len(STICKY_HORIZONS)  # keep, horizons, steady, sticky, tuned
SLOT_FEATURES: tuple[str, ...] = (
    "efficiency over the pool's best (joins charged to this round)",
    "steady-state efficiency over the pool's best",
    "predicted progress over the pool's best",
    "log of the round time over the best steady-state set's round time",
    "share of the round time spent joining",
    "sites in the set over N",
    "share of the set's sites that must join",
    "overlap with the current set (Jaccard)",
    "forecast power over the coming hour over power now, summed over the set's sites",
    "lowest forecast over power now among the set's sites",
    "log efficiency over the current set's, joins spread over 8 rounds",
    "log steady-state efficiency over the current set's",
)
GLOBAL_FEATURES: tuple[str, ...] = (
    "progress towards the target",
    "the current set is non-empty (slot 0 is a real keep)",
    "available sites over N",
    "current set's size over N",
    "log(1 + last round's length / 600 s)",
)
N_FEATURES = N_SLOTS * len(SLOT_FEATURES) + len(GLOBAL_FEATURES)
_N_SLOT_FEATURES = len(SLOT_FEATURES)  # a compile-time constant in the kernel
FEATURE_LIMIT = 10.0  # every feature is clipped to [-FEATURE_LIMIT, FEATURE_LIMIT]

# The layout of the candidates (their slots and features), which policies and agents may read;
# nothing else of this module is for code outside the engine.
LAYOUT = (
    "GLOBAL_FEATURES", "HORIZONS", "N_FEATURES", "N_SLOTS", "SLOT_FEATURES", "SLOT_RULES",
    "STICKY_HORIZONS", "STICKY_MARGIN", "TUNED_RULE",
)  # fmt: skip

# Slots 1.. as (horizon, margin) rules; slot 0 is the current set.
SLOT_RULES: tuple[tuple[float, float], ...] = (
    *((float(h), 0.0) for h in (*HORIZONS, math.inf)),
    *((float(h), STICKY_MARGIN) for h in STICKY_HORIZONS),
    TUNED_RULE,
)
_SLOT_HORIZONS = np.array([h for h, _ in SLOT_RULES], dtype=np.float64)
_SLOT_MARGINS = np.array([m for _, m in SLOT_RULES], dtype=np.float64)

# The pool's predicted rounds, (len(POOL_FIELDS), B, 4N + 1) in ``CandidateBatch.pool_times``.
POOL_FIELDS = ("round_s", "steady_round_s", "progress", "steady_progress")
PL_T_FULL, PL_T_STEADY, PL_GAIN, PL_GAIN_STEADY = range(len(POOL_FIELDS))


class CandidateBatch(NamedTuple):
    """A batch's candidates for the coming round. ``masks`` (B, N_SLOTS, N) bool: slot 0 keeps
    the current set; ``features`` (B, N_FEATURES) float32. The pool they were picked from:
    ``pool`` (B, 4N + 1, N) bool, its first ``pool_size[b]`` rows real, and ``pool_times``
    (len(POOL_FIELDS), B, 4N + 1)."""

    masks: np.ndarray
    features: np.ndarray
    pool: np.ndarray
    pool_size: np.ndarray
    pool_times: np.ndarray


@jit
def _argmax(values, n):
    """``np.argmax(values[:n])``: the first largest, or the first NaN (numpy's NaN is largest)."""
    best = 0
    for j in range(n):
        v = values[j]
        if v != v:
            return j
        if v > values[best]:
            best = j
    return best


@jit
def _join(t_full, t_steady):
    """The part of a round spent joining, ``np.maximum(t_full − t_steady, 0)`` (NaN stays)."""
    d = t_full - t_steady
    return d if (d > 0.0 or d != d) else 0.0


@jit
def _efficiency(times, m, horizon, out):
    """Progress per second of the pool's first ``m`` sets with their joins spread over
    ``horizon`` rounds (1: charged to this round, as MyopicOptimal does; ∞: ignored, PowerTrip's
    steady state). A join costs time (blocking joins: everyone waits for the joiner's fetch) or
    progress (non-blocking joins: the joiner adds nothing to its first round); both one-off
    costs are spread: a set kept h rounds gains ``steady + (first − steady) / h`` a round and
    lasts ``steady + join / h`` (``Pool.efficiency`` in ``tests/candidates_reference.py``, the
    numpy oracle, computes the same)."""
    for j in range(m):
        t_steady = times[PL_T_STEADY, j]
        t = t_steady + _join(times[PL_T_FULL, j], t_steady) / horizon
        gain = times[PL_GAIN_STEADY, j] + (times[PL_GAIN, j] - times[PL_GAIN_STEADY, j]) / horizon
        out[j] = gain / t if t > 0.0 else 0.0


@jit
def _keep(pool, m, current, n, times, scratch):
    """Row of the current set in the pool; with none joined, the best set at horizon 1."""
    any_current = False
    for i in range(n):
        any_current = any_current or current[i]
    if any_current:
        for j in range(m):
            if _same_set(pool[j], current, n):
                return j
    _efficiency(times, m, 1.0, scratch)
    return _argmax(scratch, m)


@jit
def _same_set(a, b, n):
    """Whether the masks ``a`` and ``b`` select the same of the ``n`` sites."""
    for i in range(n):
        if a[i] != b[i]:
            return False
    return True


@jit
def _commit(pool, rows, keys):
    """Keep row ``rows`` of ``pool`` if it is a non-empty set not already among the rows before
    it (then return ``rows + 1``); otherwise clear it. ``keys`` holds each kept row's sites as a
    bit pattern (site i as bit i mod 63), so only rows whose patterns agree are compared in full.
    """
    n = pool.shape[1]
    key = 0
    for i in range(n):
        if pool[rows, i]:
            key |= 1 << (i % 63)
    repeat = key == 0  # the empty set is never kept
    for j in range(rows):
        if repeat:
            break
        repeat = keys[j] == key and _same_set(pool[j], pool[rows], n)
    if repeat:
        pool[rows, :] = False
        return rows
    keys[rows] = key
    return rows + 1


@jit
def _fill_pool(available, current, power_w, exchange_s, rate, pool):
    """The pool of the module's docstring into ``pool`` (≥ 4m + 1 rows, zeroed); returns its size.

    Three rankings of the available sites (PowerTrip's power over exchange cost, the fastest
    first, the joined then the fastest), each ranking's prefixes; the current set with each
    available site flipped; the current set. Empty sets and repeats are dropped (the rankings'
    prefixes often coincide: about half the rows on the flagship), the first of each kept in
    order, so every slot picks the set it would pick among the repeats.
    """
    n = available.shape[0]
    idx = np.empty(n, dtype=np.int64)
    m = 0
    for i in range(n):
        if available[i]:
            idx[m] = i
            m += 1
    keys = np.empty(pool.shape[0], dtype=np.int64)
    key = np.empty(n)
    order = np.empty(m, dtype=np.int64)
    rows = 0
    for r in range(3):
        for j in range(m):
            i = idx[j]
            if r == 0:
                score = power_w[i] / exchange_s[i]
            elif r == 1:
                score = rate[i]
            else:
                score = rate[i] * (1.0 + 10.0 * (1.0 if current[i] else 0.0))
            key[j] = -score
            order[j] = j
        for j in range(1, m):  # a stable sort of -score (np.argsort(kind="stable"))
            x = order[j]
            k = j - 1
            while k >= 0 and key[order[k]] > key[x]:
                order[k + 1] = order[k]
                k -= 1
            order[k + 1] = x
        for p in range(m):  # prefix p: the first p + 1 of the ranking
            for q in range(p + 1):
                pool[rows, idx[order[q]]] = True
            rows = _commit(pool, rows, keys)
    for j in range(m):
        i = idx[j]
        for s in range(n):
            pool[rows, s] = current[s] != (s == i)
        rows = _commit(pool, rows, keys)
    for s in range(n):
        pool[rows, s] = current[s]
    return _commit(pool, rows, keys)


@jit
def _ratio_into(values, m, out, col, rows_out):
    """``values / max(values, initial=0)`` at the chosen rows, into column ``col`` of ``out``;
    zeros where the best is not positive (or NaN)."""
    best = 0.0
    for j in range(m):
        v = values[j]
        if v != v:
            best = v
            break
        if v > best:
            best = v
    for s in range(rows_out.shape[0]):
        out[s, col] = values[rows_out[s]] / best if best > 0.0 else 0.0


@jit
def _log(x):
    """``np.log`` of a float: -inf at 0, NaN below it (``math.log`` raises there when the
    kernel runs as Python, ``NUMBA_DISABLE_JIT=1``)."""
    if x != x or x < 0.0:
        return math.nan
    if x == 0.0:
        return -math.inf
    return math.log(x)


@jit
def _log_ratio(value, reference, has_reference):
    """log(value / reference) in [-3, 3]; 0 where there is nothing to compare with."""
    if not has_reference or not reference > 0.0:
        return 0.0
    v = value if (value > 0.0 or value != value) else 0.0
    x = _log(v / reference)
    if x != x or x == -math.inf:
        return -3.0
    if x == math.inf:
        return 3.0
    return min(max(x, -3.0), 3.0)


@jit
def _build_one(c, site, forecast, available_tab, rate_tab, powered_tab, wall_w, gpu_rate,
               exchange_s, state, belief, b, horizons, margins, masks, features, pool,
               times):  # fmt: skip
    """Episode ``b``'s candidates into ``masks[b]``, ``features[b]``, ``pool[b]`` and
    ``times[:, b]``; returns the pool's size."""
    n = wall_w.shape[0]
    n_feat = _N_SLOT_FEATURES
    n_slots = masks.shape[1]
    st = state[b]
    row = _row(c, st[TIME])
    available = available_tab[row]
    rate = rate_tab[row]
    power_w = np.empty(n)
    joined = np.empty(n, dtype=np.bool_)
    current = np.empty(n, dtype=np.bool_)
    n_avail = 0
    n_current = 0
    for i in range(n):
        power_w[i] = powered_tab[row, i] * wall_w[i]
        joined[i] = st[JOINED + i] >= 1.0
        current[i] = joined[i] and available[i]
        n_avail += 1 if available[i] else 0
        n_current += 1 if current[i] else 0
    g = n_slots * n_feat
    features[b, g] = np.float32(
        (st[ACC] - c[C_A0]) / (c[C_TARGET] - c[C_A0])
    )  # progress, as decision_view computes it
    features[b, g + 1] = 1.0 if n_current > 0 else 0.0
    features[b, g + 2] = np.float32(n_avail / n)
    features[b, g + 3] = np.float32(n_current / n)
    features[b, g + 4] = np.float32(math.log1p(st[LAST_ROUND] / 600.0))
    if n_avail == 0:
        return 0
    sets = pool[b : b + 1]
    m = _fill_pool(available, current, power_w, exchange_s, rate, sets[0])
    out = np.empty((5, 1, m))
    mine = belief[b : b + 1] if belief.shape[0] > 1 else belief
    _predict_batch(c, site, forecast, state[b : b + 1], mine, sets[:, :m], False, out)
    for j in range(m):
        times[PL_T_FULL, b, j] = out[P_ROUND_S, 0, j]
        times[PL_GAIN, b, j] = out[P_DELTA_PROGRESS, 0, j]
    _predict_batch(c, site, forecast, state[b : b + 1], mine, sets[:, :m], True, out)
    for j in range(m):
        times[PL_T_STEADY, b, j] = out[P_ROUND_S, 0, j]
        times[PL_GAIN_STEADY, b, j] = out[P_DELTA_PROGRESS, 0, j]
    tb = times[:, b]
    scratch = np.empty(m)
    keep = _keep(sets[0], m, current, n, tb, scratch)
    chosen = np.empty(n_slots, dtype=np.int64)
    chosen[0] = keep
    for s in range(1, n_slots):
        _efficiency(tb, m, horizons[s - 1], scratch)
        best = _argmax(scratch, m)
        if margins[s - 1] > 0.0 and scratch[best] < (1.0 + margins[s - 1]) * scratch[keep]:
            best = keep
        chosen[s] = best
    for s in range(n_slots):
        for i in range(n):
            masks[b, s, i] = sets[0, chosen[s], i]
    _describe(sets[0], m, tb, available, joined, current, power_w, forecast[row], gpu_rate,
              wall_w, keep, n_current > 0, chosen, features[b])  # fmt: skip
    return m


@jit
def _describe(sets, m, tb, available, joined, current, power_w, fc_rate, gpu_rate, wall_w, keep,
              has_current, chosen, feat):  # fmt: skip
    """The chosen rows' ``SLOT_FEATURES`` into ``feat`` (float32, clipped), in slot order."""
    n = available.shape[0]
    n_slots = chosen.shape[0]
    n_feat = _N_SLOT_FEATURES
    horizons = fc_rate.shape[0]
    eff_full = np.empty(m)
    eff_steady = np.empty(m)
    gain = np.empty(m)
    for j in range(m):
        t_full, t_steady = tb[PL_T_FULL, j], tb[PL_T_STEADY, j]
        eff_full[j] = tb[PL_GAIN, j] / t_full if t_full > 0.0 else 0.0
        eff_steady[j] = tb[PL_GAIN_STEADY, j] / t_steady if t_steady > 0.0 else 0.0
        gain[j] = tb[PL_GAIN, j]
    t_ref = tb[PL_T_STEADY, _argmax(eff_steady, m)]
    # the forecast's power now and over the coming rows, per site
    power = np.empty(n)
    coming = np.zeros(n)
    low = np.empty(n)
    for i in range(n):
        power[i] = power_w[i] if available[i] else 0.0
    for i in range(n):  # each forecast power once: its mean and its lowest
        lowest = math.inf
        for h in range(horizons):
            watts = (fc_rate[h, i] / gpu_rate[i]) * wall_w[i]
            coming[i] += watts
            lowest = min(lowest, watts)
        coming[i] = coming[i] / horizons
        low[i] = lowest / power[i] if power[i] > 0.0 else 0.0
    slot = np.empty((n_slots, n_feat))
    _ratio_into(eff_full, m, slot, 0, chosen)
    _ratio_into(eff_steady, m, slot, 1, chosen)
    _ratio_into(gain, m, slot, 2, chosen)
    ts_k = tb[PL_T_STEADY, keep]
    eff8_keep = tb[PL_GAIN, keep] / (ts_k + _join(tb[PL_T_FULL, keep], ts_k) / 8.0)
    for s in range(n_slots):
        j = chosen[s]
        t_full, t_steady = tb[PL_T_FULL, j], tb[PL_T_STEADY, j]
        join = _join(t_full, t_steady)
        size = 0
        joining = 0
        inter = 0
        union = 0
        on_power = 0.0
        on_coming = 0.0
        lowest = math.inf
        for i in range(n):
            if sets[j, i]:
                size += 1
                joining += 0 if joined[i] else 1
                on_power += power[i]
                on_coming += coming[i]
                lowest = min(lowest, low[i])
            inter += 1 if (sets[j, i] and current[i]) else 0
            union += 1 if (sets[j, i] or current[i]) else 0
        slot[s, 3] = _log(t_full / t_ref if t_full > 0.0 else 1.0)
        slot[s, 4] = join / t_full if t_full > 0.0 else 0.0
        slot[s, 5] = size / n
        slot[s, 6] = joining / max(size, 1)
        slot[s, 7] = inter / union if union > 0 else 0.0
        trend = on_coming / on_power if on_power > 0.0 else 0.0
        slot[s, 8] = min(trend, 3.0) if trend == trend else trend
        slot[s, 9] = min(lowest, 1.0) if lowest == lowest else lowest
        eff8 = tb[PL_GAIN, j] / (t_steady + join / 8.0)
        slot[s, 10] = _log_ratio(eff8, eff8_keep, has_current)
        slot[s, 11] = _log_ratio(eff_steady[j], eff_steady[keep], has_current)
    for s in range(n_slots):
        for f in range(n_feat):
            x = np.float32(slot[s, f])
            if x == x:
                x = min(max(x, np.float32(-FEATURE_LIMIT)), np.float32(FEATURE_LIMIT))
            feat[s * n_feat + f] = x
    g = n_slots * n_feat
    for f in range(g, feat.shape[0]):
        x = feat[f]
        if x == x:
            feat[f] = min(max(x, np.float32(-FEATURE_LIMIT)), np.float32(FEATURE_LIMIT))


@jit
def _build_batch(
    c,
    site,
    forecast,
    available_tab,
    rate_tab,
    powered_tab,
    wall_w,
    gpu_rate,
    exchange_s,
    state,
    belief,
    horizons,
    margins,
    masks,
    features,
    pool,
    pool_size,
    times,
):
    for b in range(state.shape[0]):
        pool_size[b] = _build_one(
            c,
            site,
            forecast,
            available_tab,
            rate_tab,
            powered_tab,
            wall_w,
            gpu_rate,
            exchange_s,
            state,
            belief,
            b,
            horizons,
            margins,
            masks,
            features,
            pool,
            times,
        )


def build_candidates(
    params: SimParams,
    state: SimState,
    rules: Sequence[tuple[float, float]] | None = None,
    belief: np.ndarray | None = None,
    estimates: EstimateRows | None = None,
) -> CandidateBatch:
    """Every episode's candidates for the coming round, in one compiled call for the batch.

    ``rules`` are the slots after slot 0 (the current set) as ``(horizon, margin)`` pairs: the
    pool's best set with its joins spread over ``horizon`` rounds, kept unless it beats the
    current set by ``margin``; by default the agent's slots (``SLOT_RULES``). The what-ifs assume
    ``belief`` (``predict_round``'s): by default the scenario's stated values. With
    ``estimates`` (a policy's, ``dynamics.estimates``) they assume what those estimates believe
    once they have read the telemetry now, which this folds into them first.
    """
    if estimates is not None and belief is not None:
        raise ValueError("build_candidates: pass a belief or estimates, not both")
    horizons, margins = _SLOT_HORIZONS, _SLOT_MARGINS
    if rules is not None:
        pairs = np.asarray(rules, dtype=np.float64).reshape(-1, 2)
        horizons, margins = pairs[:, 0].copy(), pairs[:, 1].copy()
    b, n = state.data.shape[0], params.n_sites
    n_slots = 1 + horizons.shape[0]
    rows = 4 * n + 1
    masks = np.zeros((b, n_slots, n), dtype=np.bool_)
    features = np.zeros((b, n_slots * len(SLOT_FEATURES) + len(GLOBAL_FEATURES)), np.float32)
    pool = np.zeros((b, rows, n), dtype=np.bool_)
    pool_size = np.zeros(b, dtype=np.int64)
    times = np.zeros((len(POOL_FIELDS), b, rows))
    world = (
        params.consts,
        params.site,
        params.forecast_rate,
        params.available,
        params.rate,
        params.powered,
        params.gpu_wall_w,
        params.gpu_rate,
        params.exchange_s,
        state.data,
    )
    out = (horizons, margins, masks, features, pool, pool_size, times)
    if estimates is None:
        _build_batch(*world, belief_rows(belief, b, n), *out)
    else:  # the estimates' update and the build in one call: it runs before every decision
        est = (estimates.cfg, estimates.consts, estimates.est, estimates.played)
        _build_batch_estimating(*world, *est, np.empty((b, unknowns_width(n))), *out)
    return CandidateBatch(masks, features, pool, pool_size, times)


@jit
def _build_batch_estimating(
    c,
    site,
    forecast,
    available_tab,
    rate_tab,
    powered_tab,
    wall_w,
    gpu_rate,
    exchange_s,
    state,
    cfg,
    consts,
    est,
    played,
    belief,
    horizons,
    margins,
    masks,
    features,
    pool,
    pool_size,
    times,
):
    """``_build_batch`` on the beliefs of estimates that first read the telemetry in
    ``state`` (and the sets ``played`` since their last read): ``dynamics.estimates``. A
    function of its own, not a branch of ``_build_batch``: the update writes the belief, and
    the belief ``_build_batch`` is otherwise given may be read-only (the nominal one is), which
    numba types apart."""
    n = masks.shape[2]
    _update_from_state(cfg, consts, est, c, available_tab, state, n, played, belief)
    _build_batch(
        c,
        site,
        forecast,
        available_tab,
        rate_tab,
        powered_tab,
        wall_w,
        gpu_rate,
        exchange_s,
        state,
        belief,
        horizons,
        margins,
        masks,
        features,
        pool,
        pool_size,
        times,
    )
