"""The carbon bound: a carbon cost that no policy can beat, whatever it knows.

On the carbon tasks (``PowerTrip-Carbon-v1``, ``PowerTrip-Carbon-Measured-v1``) a policy's cost
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

A policy that misses the deadline pays ``carbon_ref_kg`` on top of what it emits, and every
policy pays what the episode has emitted already, so the bound is that plus the smaller of the
knapsack and ``carbon_ref_kg`` (the knapsack is infinite if the cells before the deadline
cannot hold ``U_min``: then every policy misses).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd

from powertrip_env.dynamics.formulas import noise_scale_array
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
    deadline = float(state.start_s[0]) + p.time_budget_s
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
