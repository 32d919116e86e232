"""The carbon bound: a carbon cost that no policy can beat, whatever it knows.

On the carbon tasks (``PowerTrip-Carbon-v2``, ``PowerTrip-Carbon-Measured-v2``) a policy's cost
is the episode's grid carbon, plus ``carbon_ref_kg`` if it misses the deadline (the time budget
from the episode's start; ``carbon_references.carbon_cost_kg``). ``carbon_bound_kg`` is a lower
bound on that cost from the env's current state, the carbon counterpart of
``lower_bound.lower_bound_h``: the benchmark brackets every policy's carbon cost between it and
the clairvoyant ``CarbonOptimiser``. Clairvoyant: it reads the true trace, the episode's jitter
and, on the measured track, the episode's drawn unknowns (folded into ``future.params``)
through ``env.unwrapped.clairvoyant()``.

The relaxation has three steps, each in the policy's favour:

1. **Batch units** (``batch_units_needed``). However the rounds are played, reaching the
   target takes a total global batch, summed over the rounds, of at least ``U_min``: progress
   per unit of batch is largest in small rounds at low progress, and no round does better.
2. **Carbon per unit** (``cells``). A site delivers its ``site_batch`` to a round's global batch
   for the quota it computes, so each sample it computes in a trace row is worth at most
   ``site_batch / (quota · ε_min)`` units, at that row's busy grid carbon per sample. Idle
   draw, joins, communication, drop-outs and cut rounds only add carbon or take units away.
3. **Fractional knapsack** (``least_grams``). The cheapest cells from now to the deadline that
   hold ``U_min`` units: no policy's completed rounds can cost less.

A second, tighter bound keeps what the knapsack gives away: a round's sites compute together
and the round waits for its slowest and pays its exchange, the time to the deadline is shared by
rounds one after another, and a large round teaches less per sample. ``round_lp_grams`` is a
linear programme over (time block, completing site set) and (progress covered, set), each of its
steps in the policy's favour as argued in its docstring; ``carbon_bound_kg`` takes the larger of
the two (up to ``ROUND_LP_MAX_SITES`` sites, on a static world).

A policy that misses the deadline pays ``carbon_ref_kg`` on top of what it emits, and every
policy pays what the episode has emitted already, so the bound is that plus the smaller of the
knapsack and ``carbon_ref_kg`` (the knapsack is infinite if the cells before the deadline
cannot hold ``U_min``: then every policy misses).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from powertrip_env.dynamics.formulas import comm_time_s, noise_scale_array
from powertrip_env.units import g_to_kg

CARBON_BOUND = "CarbonBound"
"""The label of the bound's rows in ``carbon_bound_rows``, in the benchmark's frame as in the
time bound's ``headroom.BOUND``."""
PROGRESS_CELLS = 4096
"""Cells of the lower Riemann sum over progress in ``batch_units_needed``. Each cell takes the
integrand's smaller endpoint, so the sum stays below the integral at any resolution; 4096 keeps
it within a few 1e-4 of it for the shipped curves."""


def carbon_bound_kg(env: Any) -> float:
    """A carbon cost (kg) that no policy can beat from the env's current state.

    The cost of a policy is the episode's grid carbon (``info["carbon_kg"]``), plus
    ``carbon_ref_kg`` if the episode ends without reaching the target. Every policy has already
    emitted ``state.carbon_g``; from here a successful one must complete rounds whose global
    batches sum to at least ``batch_units_needed``, computed in trace rows before the deadline,
    and each unit costs at least its cell's grams (``least_grams``); a missing one pays
    ``carbon_ref_kg``. So the bound is the emitted carbon plus the smaller of the two.

    Valid for rounds of equal steps (``fixed_quota``). In ``fixed_time`` rounds a site's
    contribution to the batch is the samples it processed, not a fixed batch per quota, so the
    units-per-sample step does not hold as written: the bound is then the trivial 0.0.
    ``env`` is the environment or its ``unwrapped`` (the benchmark calls it right after
    ``env.reset``).
    """
    future = getattr(env, "unwrapped", env).clairvoyant()
    p, state = future.params, future.state
    if p.fixed_time:
        return 0.0
    emitted_kg = g_to_kg(float(state.carbon_g[0]))
    units = batch_units_needed(future)
    grams = least_grams(future, units)
    if p.n_sites <= ROUND_LP_MAX_SITES and not p.moving and math.isfinite(grams):
        grams = max(grams, round_lp_grams(future))
    return emitted_kg + min(g_to_kg(grams), p.carbon_ref_kg)


def batch_units_needed(future: Any) -> float:
    """The least total global batch (summed over rounds) that takes the progress from now to
    the target's (``future.progress_needed``): ``U_min``.

    A round starting at progress P with global batch B and coverage ``cover`` ≤ 1 teaches
    ``ΔP = L·η·cover / (1 + B_n(P)/B)`` (``dynamics.learning._delta_progress``; L local steps,
    η with the episode's pace, ``B_n(P) = B0·(1 + P/P_B)^γ`` with its noise factor; on the
    measured track these are folded into ``future.params``, whose state's factors are 1).
    Solved for the batch,
    ``B = ΔP·(B + B_n(P))/(L·η·cover) ≥ ΔP·(b_min + B_n(P))/(L·η)``: a round that teaches
    anything has at least one completing site, so ``B ≥ b_min``, the smallest site batch.

    Progress never falls (coverage is in [0, 1]), so every P in [P_now, need] lies in the span
    [P_r, P_r + ΔP_r] of some round r, and ``P_r ≥ max(P − ΔP_max, P_now)`` with ``ΔP_max =
    L·η / (1 + B_n(P_now)/B_all)``, the most any round can teach (B_all every site's batch;
    ``B_n`` only grows with P, γ ≥ 0). Summing over the rounds,
    ``Σ B_r ≥ (1/(L·η)) ∫_{P_now}^{need} b_min + B_n(max(P − ΔP_max, P_now)) dP``. The integral
    is taken as a lower Riemann sum (each cell at the smaller of its ends' values, right for a
    monotone integrand whichever way it runs), so it stays a lower bound.
    """
    p, state = future.params, future.state
    p_now, need = float(state.progress[0]), float(future.progress_needed)
    if not need > p_now:
        return 0.0
    per_round = p.local_steps * p.eta_local  # ΔP as B → ∞ at full coverage

    b_all = float(np.sum(p.site_batch))
    dp_max = per_round / (1.0 + float(noise_scale_array(p, p_now)) / b_all)
    knots = np.linspace(p_now, need, PROGRESS_CELLS + 1)
    integrand = float(np.min(p.site_batch)) + noise_scale_array(
        p, np.maximum(knots - dp_max, p_now)
    )
    lower = np.minimum(integrand[:-1], integrand[1:])
    return float(np.sum(lower * np.diff(knots)) / per_round)


def compute_jitter_min(future: Any) -> float:
    """The smallest compute jitter factor of the episode's remaining rounds (1 without jitter):
    a site computes ``quota · ε`` samples of the trace for its quota, at least ``quota · ε_min``
    (as ``lower_bound.rate_bound_h``'s ``compute_min``)."""
    p, state = future.params, future.state
    jitter = future.jitter(p.max_rounds - int(state.rounds[0]))
    return float(jitter[:, : p.n_sites].min()) if jitter.size else 1.0


def cells(future: Any) -> tuple[np.ndarray, np.ndarray]:
    """(units, grams), both (rows, N): per trace row from the one holding the clock to the one
    holding the deadline (whole rows), and site, the most batch units the site can deliver in
    the row and the busy grid carbon (g) of delivering them.

    In a ``fixed_quota`` round site i computes its quota (the folded one on the measured track,
    ``quota / throughput``, counted in samples of the trace's rate: ``dynamics.round._run_sites``)
    times its jitter factor ε and adds ``site_batch[i]`` to the global batch. A sample computed
    in row j is thus worth at most ``site_batch / (quota · ε_min)`` units; the row holds
    ``rate · interval`` samples of the powered GPUs, whose busy draw above the row's PV output
    emits ``max(busy_w − pv_w, 0) · g_per_j · interval`` grams (``params._power_table``,
    ``tables._busy_carbon_at``), the same per sample whatever part of the row is used. A row
    without a powered GPU holds nothing. Counting whole rows, and the deadline's row to its end,
    only adds capacity; a deadline past the calendar's last row (whose rate the kernel
    extends) stretches that row to it.
    """
    p, state = future.params, future.state
    iv, rows = p.interval_s, p.rows
    now = float(state.time_s[0])
    deadline = float(state.start_s[0] + state.budget_s[0])
    first = min(int(now / iv), rows - 1)  # tables._row
    last = min(int(deadline / iv), rows - 1)
    span = np.arange(first, last + 1)
    length = np.full(span.shape, iv)
    length[-1] = max(iv, deadline - last * iv)  # past the calendar: the last row goes on
    samples = p.rate[span] * length[:, None]
    grid_w = np.maximum(p.powered[span] * p.gpu_wall_w - p.pv_w[span], 0.0)
    grams = grid_w * p.g_per_j[span] * length[:, None]
    units = samples * (p.site_batch / (p.quota * compute_jitter_min(future)))
    return units, grams


def least_grams(future: Any, units_needed: float) -> float:
    """The least busy grid carbon (g) of ``units_needed`` batch units before the deadline: a
    fractional knapsack over ``cells``, the cheapest grams per unit first, the last cell in
    part. ``math.inf`` if every cell together holds fewer units (the target is out of reach
    in time: every policy misses)."""
    if units_needed <= 0.0:
        return 0.0
    units, grams = cells(future)
    units, grams = units.ravel(), grams.ravel()
    held = units > 0.0
    units, grams = units[held], grams[held]
    order = np.argsort(grams / units, kind="stable")
    units, grams = units[order], grams[order]
    filled = np.cumsum(units)
    if filled.size == 0 or filled[-1] < units_needed:
        return math.inf
    k = int(np.searchsorted(filled, units_needed))  # the first cell that completes it
    before = filled[k - 1] if k > 0 else 0.0
    spent = float(np.sum(grams[:k]))
    return spent + grams[k] * (units_needed - before) / units[k]


def carbon_bound_rows(env: Any, episodes: int, seed: int) -> pd.DataFrame:
    """The carbon bound's rows of paired episodes ``0 .. episodes - 1``: for each, ``env``
    reset with ``seed + e`` (the start time, jitter stream and drawn unknowns every policy of
    the run met, as ``headroom.bound_rows`` and ``evaluate`` reset it) and ``carbon_bound_kg``
    of it. Columns ``policy`` (``CARBON_BOUND``), ``episode``, ``seed``, ``cost_kg``."""
    rows = []
    for e in range(episodes):
        env.reset(seed=seed + e)
        cost = carbon_bound_kg(env.unwrapped)
        rows.append({"policy": CARBON_BOUND, "episode": e, "seed": seed + e, "cost_kg": cost})
    return pd.DataFrame(rows, columns=["policy", "episode", "seed", "cost_kg"])


# --------------------------------------------------------------------------- the round LP

ROUND_LP_MAX_SITES = 16
"""``round_lp_grams`` keeps a column per non-empty site set (2^N − 1 of them); above this many
sites ``carbon_bound_kg`` keeps the knapsack alone."""
ROUND_LP_BLOCK_ROWS = 3
"""Trace rows per time block of ``round_lp_grams``: each block's rounds take the cheapest prices
of the rows their work can reach, so shorter blocks are tighter and the LP larger."""
ROUND_LP_SEGMENTS = 64
"""Progress segments of ``round_lp_grams``: a round starting in a segment is credited the
progress of one starting at the segment's lower end."""


def round_lp_grams(
    future: Any, block_rows: int = ROUND_LP_BLOCK_ROWS, segments: int = ROUND_LP_SEGMENTS
) -> float:
    """The least grid carbon (g) of the rounds that take the progress to the target before the
    deadline, as a linear programme over (time block, completing site set) and (progress
    segment, set); ``math.inf`` if no such rounds fit (every policy misses). Rounds of equal
    steps (``fixed_quota``) on a static world.

    Every round a policy plays from now is described by the set S of sites that complete it
    (those that drop out, fetch or sit out add carbon and no batch; a round none completes adds
    no progress), the time block c its start falls in (blocks of ``block_rows`` trace rows, cut
    at now and at the deadline: ``_RoundLPGrid``) and the progress segment j its start progress
    falls in. The LP counts them: ``u[S, c]`` rounds by block and ``v[S, j]`` by segment, the
    same number for each S (``Σ_c u[S, c] = Σ_j v[S, j]``: any pairing of blocks and segments
    is allowed, which drops the order of time and progress, in the policy's favour). With the
    least compute jitter ε_min, the largest ε_max, and the network's least factor, each piece
    argues its own step in the policy's favour: the least time of a round (``_round_times``),
    its least idle grams (``_idle_grams``) and busy grams (``_sample_cells``), and the most
    progress it teaches (``_progress_rates``).

    Every policy's rounds satisfy these constraints and cost at least the LP's grams for them,
    so the LP's least cost (``_solve_round_lp``: ``scipy.optimize.linprog``, HiGHS) is a lower
    bound.
    """
    p, state = future.params, future.state
    iv = p.interval_s
    now = float(state.time_s[0])
    deadline = float(state.start_s[0] + state.budget_s[0])
    p_now, need = float(state.progress[0]), float(future.progress_needed)
    if not need > p_now:
        return 0.0
    if deadline >= (p.rows - 1) * iv or now >= deadline:
        return math.inf if now >= deadline else 0.0  # past the calendar: left to the knapsack
    g = _RoundLPGrid.of(future, now, deadline, block_rows)
    duration, can, slowest, tail = _round_times(g)
    latest, idle = _idle_grams(g, slowest, tail)
    knots, kappa = _progress_rates(p, g.membership, p_now, need, segments)
    samples = _sample_cells(g, latest)
    return _solve_round_lp(g, duration, can, idle, knots, kappa, samples)


@dataclass(frozen=True)
class _RoundLPGrid:
    """What the pieces of ``round_lp_grams`` share: the clock, the deadline and their rows, the
    episode's jitter extremes, the time blocks ``[start_c, end_c)`` (rows ``r0 .. r1`` each,
    cut at now and at the deadline, empty ones dropped) and the site sets (``membership``, one
    row per non-empty set S)."""

    p: Any
    future: Any
    now: float
    deadline: float
    first: int  # the row holding the clock
    last: int  # the row holding the deadline
    eps_min: float  # the least compute jitter
    eps_max: float  # the largest compute jitter
    comm_min: float  # the least network jitter
    comm_max: float  # the largest network jitter
    r0: np.ndarray  # (C,) each block's first row
    r1: np.ndarray  # (C,) each block's last row
    start_c: np.ndarray  # (C,)
    end_c: np.ndarray  # (C,)
    membership: np.ndarray  # (K, N) bool

    @classmethod
    def of(cls, future: Any, now: float, deadline: float, block_rows: int) -> _RoundLPGrid:
        p, state = future.params, future.state
        n, iv = p.n_sites, p.interval_s
        last = int(deadline / iv)
        first = int(now / iv)
        jitter = future.jitter(p.max_rounds - int(state.rounds[0]))
        eps_min = float(jitter[:, :n].min()) if jitter.size else 1.0
        eps_max = float(jitter[:, :n].max()) if jitter.size else 1.0
        comm_min = float(jitter[:, n].min()) if jitter.size else 1.0
        comm_max = float(jitter[:, n].max()) if jitter.size else 1.0
        # the blocks: [start_c, end_c) of rows first + c·block_rows ...
        r0 = np.arange(first, last + 1, block_rows)
        r1 = np.minimum(r0 + block_rows - 1, last)
        start_c = np.maximum(r0 * iv, now)
        end_c = np.minimum((r1 + 1) * iv, deadline)
        keep = end_c > start_c
        membership = ((np.arange(1, 1 << n)[:, None] >> np.arange(n)[None, :]) & 1).astype(bool)
        return cls(
            p=p,
            future=future,
            now=now,
            deadline=deadline,
            first=first,
            last=last,
            eps_min=eps_min,
            eps_max=eps_max,
            comm_min=comm_min,
            comm_max=comm_max,
            r0=r0[keep],
            r1=r1[keep],
            start_c=start_c[keep],
            end_c=end_c[keep],
            membership=membership,
        )

    @property
    def n_blocks(self) -> int:
        return int(self.r0.size)

    @property
    def work_min(self) -> np.ndarray:
        """(N,) the least samples a member computes for its quota: ``quota · ε_min``."""
        return self.p.quota * self.eps_min


def _round_times(g: _RoundLPGrid) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(duration, can, slowest, tail): per set S and block c (K, C), the least time ``T[S, c]``
    of a round of S starting in c, whether one can start there at all, and its slowest
    member's least compute; per S (K,), its least exchange and aggregation.

    **Time.** A member i of S starting its round at t in block c computes its quota from t or,
    joining, one join later, so the round lasts at least ``f_i(t) = finish(t, quota_i · ε_min)
    − t`` (later starts finish no earlier), then the exchange among S (its own largest RTT and
    link, ``comm_time_s``) and aggregation: ``T[S, c] = max_i min_{t ∈ c} f_i(t) + comm(S) +
    agg``. ``f_i`` is piecewise linear between row boundaries and the starts whose compute ends
    on one, so its least value over a block is the least at those points and the block's ends
    (``_least_compute_s``). Rounds are played back to back, each shrunk to its ``T`` still
    starts in its block and overlaps none, so the rounds starting in block c fill at most its
    length plus the part of the last one past its end (``h_c``, at most the longest ``T`` of a
    block so far) minus the previous block's part in it; the last round ends by the deadline
    (``h`` of the last block is 0: a round cut there teaches nothing; ``_solve_round_lp``). A
    set with a member that has no powered GPU in any row of the block cannot start there, nor
    a round whose ``T`` passes the deadline.
    """
    p, membership = g.p, g.membership
    n = p.n_sites
    f_min = _least_compute_s(
        g.future, p.cum_samples, g.work_min, g.start_c, g.end_c, np.zeros(n), least=True
    )
    size = membership.sum(axis=1)
    rtt_s = np.where(membership, p.rtt_s[None, :], 0.0).max(axis=1)
    tx_s = np.where(membership, p.site_tx_s[None, :], 0.0).max(axis=1)
    tail = comm_time_s(p, size, rtt_s, tx_s) * g.comm_min + p.aggregation_s  # (K,)
    startable = np.empty((g.n_blocks, n), dtype=bool)
    for c in range(g.n_blocks):
        startable[c] = np.any(p.powered[int(g.r0[c]) : int(g.r1[c]) + 1] > 0.0, axis=0)

    # (K, C): the least time of a round of set S starting in block c
    slowest = np.where(membership[:, None, :], f_min[None, :, :], -np.inf).max(axis=2)
    duration = slowest + tail[:, None]
    can = np.all(startable[None, :, :] | ~membership[:, None, :], axis=2)
    can &= g.start_c[None, :] + duration <= g.deadline
    return duration, can, slowest, tail


def _idle_grams(
    g: _RoundLPGrid, slowest: np.ndarray, tail: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """(latest, grams): per block and site (C, N), the latest a member's compute can end from a
    start in the block (no later than the deadline); per set and block (K, C), the least idle
    grid carbon (g) of a round of S starting in c.

    **Grams, idle.** While the round lasts and member i does not compute, its powered GPUs wait
    at idle draw, ``idle_w · P_k`` with ``P_k`` the powered GPUs of the round's start row
    (``round._charge``; at least the block's least nonzero count), at that row's grid carbon
    above PV. It waits at least through the exchange and aggregation, and for the slowest
    member: ``max_j min f_j − max f_i`` (``f_i`` at ε_max and starts up to one join past the
    block, bounded by its values at the same kinds of points, just past each:
    ``_least_compute_s``); each second at no less than the least idle grid carbon of the rows
    up to the latest end of a round starting in the block. Joins, drop-outs and what a round
    spends beyond those only add.
    """
    p, membership = g.p, g.membership
    n, iv, deadline = p.n_sites, p.interval_s, g.deadline
    work_max = p.quota * g.eps_max
    f_max = _least_compute_s(
        g.future, p.cum_samples, work_max, g.start_c, g.end_c, p.join_s, least=False
    )
    # the latest a member's compute can end, from a start at the block's end one join later
    latest = g.future.finish_s(g.end_c[:, None] + p.join_s[None, :], work_max)  # (C, N)
    latest = np.minimum(latest, deadline)
    tail_max = (
        float(comm_time_s(p, n, float(p.rtt_s.max()), float(p.site_tx_s.max())) * g.comm_max)
        + p.aggregation_s
    )
    round_end = np.minimum(latest.max(axis=1) + tail_max, deadline)  # (C,)

    idle_g = np.empty((g.n_blocks, n))
    for c in range(g.n_blocks):
        lo = int(g.r0[c])
        block = p.powered[lo : int(g.r1[c]) + 1]  # (rows, N) of the block
        startable = np.any(block > 0.0, axis=0)
        least_powered = np.where(block > 0.0, block, np.inf).min(axis=0)
        idle_w = p.idle_w_per_gpu * np.where(startable, least_powered, 0.0)
        hi = min(int(round_end[c] / iv), p.rows - 1)
        span = slice(lo, hi + 1)
        idle_g[c] = (np.maximum(idle_w[None, :] - p.pv_w[span], 0.0) * p.g_per_j[span]).min(axis=0)

    # (K, C): the least idle grams of a round of set S starting in block c
    wait = np.maximum(slowest[:, :, None] - f_max[None, :, :], 0.0) + tail[:, None, None]
    grams = np.where(membership[:, None, :], wait * idle_g[None, :, :], 0.0).sum(axis=2)
    return latest, grams


def _progress_rates(
    p: Any, membership: np.ndarray, p_now: float, need: float, segments: int
) -> tuple[np.ndarray, np.ndarray]:
    """(knots, kappa): the segments' ends ``a_0 < … < a_M`` (M + 1,) and, per set and segment
    (K, M), the rounds per unit of progress ``κ[S, j]`` of a round of S starting in it.

    **Progress.** A round of S starting at progress P ≥ a_j teaches at most ``ΔP(a_j, B_S) =
    L·η / (1 + B_noise(a_j) / B_S)`` (full coverage, B_S its members' batches, ``B_noise``
    rising in P). Progress never falls, so the rounds starting below a_(m+1) carry it there:
    ``Σ_{j ≤ m} Σ_S ΔP(a_j, B_S) · v[S, j] ≥ a_(m+1) − P_now`` for every m.
    """
    # progress segments: a round of S covers progress at no more than 1 / κ[S, j] per round
    knots = np.linspace(p_now, need, segments + 1)
    batch = membership @ p.site_batch  # (K,)
    per_round = p.local_steps * p.eta_local
    most = per_round / (1.0 + float(noise_scale_array(p, p_now)) / batch)  # (K,) ΔP_max of S
    lowest = np.maximum(knots[None, :-1] - most[:, None], p_now)  # (K, M)
    kappa = (1.0 + noise_scale_array(p, lowest) / batch[:, None]) / per_round
    return knots, kappa


def _sample_cells(g: _RoundLPGrid, latest: np.ndarray) -> tuple[np.ndarray, ...]:
    """(site, block, row, cost), each (Y,): the cells ``y[i, c, r]`` of the samples site i
    computes in row r for rounds starting in block c, and their grams per sample.

    **Grams, busy.** Member i computes at least ``quota_i · ε_min`` samples, each at no less
    than the least busy grid carbon per sample (``max(P·wall − pv, 0) · g / rate``) of the rows
    from the block's start to the latest its compute can end (``finish(end of block + join,
    quota · ε_max)``, ``latest``); a row without power holds none.
    """
    p = g.p
    n, iv = p.n_sites, p.interval_s
    busy_w = p.powered * p.gpu_wall_w
    busy_g = np.maximum(busy_w - p.pv_w, 0.0) * p.g_per_j  # g/s per row and site
    # the samples a site computes in a row for rounds starting in a block: rows from the
    # block's start to the latest its compute can end, with power
    y_site, y_block, y_row = [], [], []
    for c in range(g.n_blocks):
        for i in range(n):
            rows_ci = np.arange(int(g.r0[c]), min(int(latest[c, i] / iv), p.rows - 1) + 1)
            rows_ci = rows_ci[p.rate[rows_ci, i] > 0.0]
            y_site.append(np.full(rows_ci.size, i))
            y_block.append(np.full(rows_ci.size, c))
            y_row.append(rows_ci)
    y_site, y_block, y_row = (np.concatenate(a) for a in (y_site, y_block, y_row))
    y_cost = busy_g[y_row, y_site] / p.rate[y_row, y_site]
    return y_site, y_block, y_row, y_cost


def _solve_round_lp(
    g: _RoundLPGrid,
    duration: np.ndarray,
    can: np.ndarray,
    idle: np.ndarray,
    knots: np.ndarray,
    kappa: np.ndarray,
    samples: tuple[np.ndarray, ...],
) -> float:
    """The LP's least cost (g), ``math.inf`` if no round can start or the target is out of
    reach. Variables: ``u[S, c]`` only where a round of S can start in c (``can``), at its idle
    grams; ``w[S, j]``, the progress rounds of S cover in segment j; ``h_c``, block c's rounds'
    part past its end; ``y``, the ``_sample_cells`` at their busy grams. The constraints, each
    one of the pieces' arguments: the blocks' time (``_round_times``), every segment covered
    and paid for in rounds (``_progress_rates``), each member's work done in samples of the
    rows it can reach (``_sample_cells``), and no row computing more than it holds between now
    and the deadline.
    """
    from scipy.optimize import linprog

    n_blocks, k_sets, segments = g.n_blocks, g.membership.shape[0], knots.size - 1
    cols = np.flatnonzero(can.ravel())
    if cols.size == 0:
        return math.inf
    y_cost = samples[3]
    n_u, n_w, n_y = cols.size, k_sets * segments, y_cost.size
    n_var = n_u + n_w + n_blocks + n_y
    h_of = n_u + n_w + np.arange(n_blocks)
    cost = np.concatenate([idle.ravel()[cols], np.zeros(n_w + n_blocks), y_cost])
    a_ub, b_ub = _round_lp_constraints(g, cols, duration, knots, kappa, samples, n_var)

    longest = np.maximum.accumulate(np.where(can, duration, 0.0).max(axis=0))
    bounds = np.zeros((n_var, 2))
    bounds[:, 1] = np.inf
    bounds[h_of, 1] = longest
    bounds[h_of[-1], 1] = 0.0
    result = linprog(
        cost,
        A_ub=a_ub,
        b_ub=b_ub,
        bounds=bounds,
        method="highs",
    )
    if result.status == 2:  # infeasible: no rounds reach the target before the deadline
        return math.inf
    if result.status != 0:
        raise RuntimeError(f"round LP: {result.message}")
    return float(result.fun)


def _round_lp_constraints(
    g: _RoundLPGrid,
    cols: np.ndarray,
    duration: np.ndarray,
    knots: np.ndarray,
    kappa: np.ndarray,
    samples: tuple[np.ndarray, ...],
    n_var: int,
) -> tuple[Any, np.ndarray]:
    """(A_ub, b_ub) of ``_solve_round_lp``'s constraints, in its variables' order (u, w, h, y),
    each a step argued by the piece named on it: what every policy's rounds satisfy."""
    from scipy import sparse

    p, membership = g.p, g.membership
    n, iv, now, deadline, first, last = p.n_sites, p.interval_s, g.now, g.deadline, g.first, g.last
    n_blocks, k_sets, segments = g.n_blocks, membership.shape[0], knots.size - 1
    y_site, y_block, y_row, _ = samples
    set_of, block_of = np.divmod(cols, n_blocks)
    n_u, n_w, n_y = cols.size, k_sets * segments, y_row.size
    w_of = n_u + np.arange(n_w).reshape(k_sets, segments)
    h_of = n_u + n_w + np.arange(n_blocks)
    y_of = n_u + n_w + n_blocks + np.arange(n_y)
    rows_, cols_, vals_, rhs = [], [], [], []
    n_con = 0

    def add(r: np.ndarray, c: np.ndarray, v: np.ndarray, b: np.ndarray) -> None:
        nonlocal n_con
        rows_.append(n_con + r)
        cols_.append(c)
        vals_.append(v)
        rhs.append(b)
        n_con += b.size

    # time (_round_times): Σ_S T u[S, c] + h_(c−1) − h_c ≤ length of c
    add(
        np.concatenate([block_of, np.arange(n_blocks), np.arange(1, n_blocks)]),
        np.concatenate([np.arange(n_u), h_of, h_of[:-1]]),
        np.concatenate([duration.ravel()[cols], -np.ones(n_blocks), np.ones(n_blocks - 1)]),
        g.end_c - g.start_c,
    )
    # coverage (_progress_rates): −Σ_S w[S, j] ≤ −(a_(j+1) − a_j)
    add(np.tile(np.arange(segments), k_sets), w_of.ravel(), -np.ones(n_w), -np.diff(knots))
    # rounds: Σ_j κ[S, j] w[S, j] − Σ_c u[S, c] ≤ 0
    add(
        np.concatenate([np.repeat(np.arange(k_sets), segments), set_of]),
        np.concatenate([w_of.ravel(), np.arange(n_u)]),
        np.concatenate([kappa.ravel(), -np.ones(n_u)]),
        np.zeros(k_sets),
    )
    # work (_sample_cells): Σ_(S ∋ i) quota_i ε_min u[S, c] − Σ_r y[i, c, r] ≤ 0
    mem_u = membership[set_of]  # (n_u, N)
    u_idx, u_site = np.nonzero(mem_u)
    add(
        np.concatenate([block_of[u_idx] * n + u_site, y_block * n + y_site]),
        np.concatenate([u_idx, y_of]),
        np.concatenate([g.work_min[u_site], -np.ones(n_y)]),
        np.zeros(n_blocks * n),
    )
    # a row's samples: Σ_c y[i, c, r] ≤ rate · the row's time between now and the deadline
    key = (y_row - first) * n + y_site
    width = np.minimum((np.arange(first, last + 1) + 1) * iv, deadline) - np.maximum(
        np.arange(first, last + 1) * iv, now
    )
    cap = np.full((last - first + 1) * n, 0.0)
    cap[key] = p.rate[y_row, y_site] * width[y_row - first]
    add(key, y_of, np.ones(n_y), cap)
    a_ub = sparse.csr_matrix(
        (np.concatenate(vals_), (np.concatenate(rows_), np.concatenate(cols_))),
        shape=(n_con, n_var),
    )
    return a_ub, np.concatenate(rhs)


def _least_compute_s(
    future: Any,
    cum: np.ndarray,
    work: np.ndarray,
    start_c: np.ndarray,
    end_c: np.ndarray,
    reach: np.ndarray,
    least: bool,
) -> np.ndarray:
    """(C, N): per block and site, the least (``least``) or a bound on the most compute time
    ``finish(t, work) − t`` over starts t in [start_c, end_c + reach_i].

    Between the row boundaries and the starts whose compute ends exactly on a row boundary,
    ``finish`` and ``t`` are both linear (one row's rate at each end), so the extremes over an
    interval are at those points or its ends. ``finish`` (the first time the cumulative
    samples reach the target) can only jump up, at a start whose target lands on a stretch
    without power: the least is its value there, and the most is bounded by its value for a
    hair more work (``finish`` only grows with the work).
    """
    p = future.params
    iv = p.interval_s
    n = p.n_sites
    lo_all, hi_all = float(start_c[0]), float(np.max(end_c + reach.max()))
    extra = 1.0 if least else 1.0 + 1e-9
    out = np.empty((start_c.size, n))
    k_lo = int(lo_all / iv)
    k_hi = min(int(hi_all / iv) + 1, p.rows)
    bounds = iv * np.arange(k_lo, k_hi + 1)
    for i in range(n):
        c_i = cum[:, i]
        # starts whose compute of `work` ends on a row boundary at or after lo_all
        ends = c_i[k_lo:] - work[i]
        ends = ends[(ends >= c_i[k_lo]) & (ends <= c_i[min(k_hi, c_i.size - 1)])]
        k = np.searchsorted(c_i, ends, side="left")  # c[k−1] < y ≤ c[k]
        k = np.maximum(k, 1)
        rate = p.rate[np.minimum(k - 1, p.rate.shape[0] - 1), i]
        with np.errstate(divide="ignore", invalid="ignore"):
            back = (k - 1) * iv + np.where(rate > 0.0, (ends - c_i[k - 1]) / rate, 0.0)
        cand = np.unique(np.concatenate([bounds, back, start_c, end_c + reach[i]]))
        cand = cand[(cand >= lo_all) & (cand <= hi_all)]
        begin = np.zeros((cand.size, n))
        begin[:, i] = cand
        f = future.finish_s(begin, np.where(np.arange(n) == i, work * extra, 0.0))[:, i] - cand
        left = np.searchsorted(cand, start_c, side="left")
        right = np.searchsorted(cand, end_c + reach[i], side="right")
        for c in range(start_c.size):
            part = f[left[c] : right[c]]
            out[c, i] = part.min() if least else part.max()
    return out
