"""What an environment reports after a round: the numbers of ``info``, in the step's own call.

Both environments report the same keys at reset and after every round (``interface.INFO_KEYS``).
Computing them here, in compiled code beside the round, means they are written once: the single
env, the vector env and the reset (a reset reports as after a round that did nothing) read the
same three arrays (``Info``), and the single env's step pays for no numpy arithmetic of its own.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np

from powertrip_env.dynamics.jit import jit
from powertrip_env.dynamics.layout import (
    ACC,
    BUDGET,
    C_T0,
    CARBON,
    DROPPED,
    ENERGY,
    I_ACC,
    I_CARBON_KG,
    I_COMM_S,
    I_COMPUTE_S,
    I_CUT,
    I_DELTA_PROGRESS,
    I_ELAPSED,
    I_IDLE,
    I_INVALID,
    I_KWH,
    I_N_SELECTED,
    I_ROUND_CARBON_KG,
    I_ROUND_KWH,
    I_ROUND_S,
    I_ROUNDS,
    I_START,
    I_STRAGGLER,
    I_SUCCESS,
    I_TRACE_TIME,
    I_TTA_H,
    IF_AVAILABLE,
    IF_DROPPED,
    IF_SELECTED,
    INFO_FIELDS,
    INFO_SITE_FLAGS,
    INFO_TELEMETRY,
    POWERED,
    POWERED_NOW,
    R_CARBON_G,
    R_COMM_S,
    R_COMPUTE_S,
    R_CUT,
    R_DELTA_PROGRESS,
    R_ENERGY_J,
    R_IDLE,
    R_INVALID,
    R_N_SELECTED,
    R_ROUND_S,
    R_STRAGGLER,
    R_TERMINATED,
    R_TRUNCATED,
    RECORD_FIELDS,
    ROUNDS,
    SELECTED,
    SITE_RECORD,
    START,
    T_COMPUTE_S,
    TIME,
)
from powertrip_env.dynamics.state import RoundResult
from powertrip_env.dynamics.tables import _row
from powertrip_env.units import G_PER_KG, J_PER_KWH, S_PER_H

if TYPE_CHECKING:
    from powertrip_env.dynamics.params import SimParams
    from powertrip_env.dynamics.state import SimState


class Info(NamedTuple):
    """The kernel's report of a batch of episodes: ``values`` (B, len(INFO_FIELDS)) float64,
    ``flags`` (B, len(INFO_SITE_FLAGS), width) bool, ``powered`` (B, width) int64 and
    ``telemetry`` (B, len(INFO_TELEMETRY), width) float64, the per-site parts padded with zeros
    to the environment's width."""

    values: np.ndarray
    flags: np.ndarray
    powered: np.ndarray
    telemetry: np.ndarray


def info_buffers(batch: int, width: int) -> Info:
    """Fresh arrays for ``_fill_info`` to write, which writes every entry."""
    return Info(
        np.empty((batch, len(INFO_FIELDS))),
        np.empty((batch, len(INFO_SITE_FLAGS), width), dtype=np.bool_),
        np.empty((batch, width), dtype=np.int64),
        np.empty((batch, len(INFO_TELEMETRY), width)),
    )


@jit
def _fill_info(c, table, state, rec, srec, values, flags, powered, telemetry):
    """Each episode's info after the round whose record is ``rec`` and ``srec``.

    ``tta_h`` is the elapsed time on success and the time budget on failure, so every policy's
    mean counts a failed episode alike (an episode cut short by the round limit would otherwise
    look fast); it and ``success`` are 0 until the episode ends. The elapsed time never reads
    past the budget: the kernel stops a round that reaches it at start + budget, and that sum
    minus the start can come back one rounding step above it.
    """
    n = srec.shape[2]
    for b in range(state.shape[0]):
        st, r, v = state[b], rec[b], values[b]
        budget = st[BUDGET]
        elapsed = st[TIME] - st[START]
        if elapsed > budget:
            elapsed = budget
        v[I_ROUND_S] = r[R_ROUND_S]
        v[I_COMPUTE_S] = r[R_COMPUTE_S]
        v[I_COMM_S] = r[R_COMM_S]
        v[I_ELAPSED] = elapsed
        v[I_START] = st[START]
        v[I_TRACE_TIME] = c[C_T0] + st[TIME]
        v[I_ACC] = st[ACC]
        v[I_N_SELECTED] = r[R_N_SELECTED]
        v[I_INVALID] = r[R_INVALID]
        v[I_IDLE] = 1.0 if r[R_IDLE] > 0.0 else 0.0
        v[I_CUT] = 1.0 if r[R_CUT] > 0.0 else 0.0
        v[I_STRAGGLER] = r[R_STRAGGLER]
        v[I_ROUND_KWH] = r[R_ENERGY_J] / J_PER_KWH
        v[I_KWH] = st[ENERGY] / J_PER_KWH
        # 0 without carbon intensity (SimParams.carbon): NaN would be truer, but NaN != NaN,
        # and Gymnasium's checker and every equality test of infos would fail on it
        v[I_ROUND_CARBON_KG] = r[R_CARBON_G] / G_PER_KG
        v[I_CARBON_KG] = st[CARBON] / G_PER_KG
        v[I_ROUNDS] = st[ROUNDS]
        terminated = r[R_TERMINATED] > 0.0
        if terminated:
            v[I_TTA_H] = elapsed / S_PER_H
        elif r[R_TRUNCATED] > 0.0:
            v[I_TTA_H] = budget / S_PER_H
        else:
            v[I_TTA_H] = 0.0
        v[I_SUCCESS] = 1.0 if terminated else 0.0
        v[I_DELTA_PROGRESS] = r[R_DELTA_PROGRESS]
        k = _row(c, st[TIME])
        for i in range(n):
            flags[b, IF_SELECTED, i] = srec[b, SELECTED, i] > 0.0
            flags[b, IF_DROPPED, i] = srec[b, DROPPED, i] > 0.0
            flags[b, IF_AVAILABLE, i] = table[k, POWERED, i] > 0.0
            powered[b, i] = np.int64(srec[b, POWERED_NOW, i])
            for q in range(telemetry.shape[1]):  # SITE_RECORD's telemetry rows, in order
                telemetry[b, q, i] = srec[b, T_COMPUTE_S + q, i]
        for i in range(n, powered.shape[1]):  # padded sites: absent
            flags[b, IF_SELECTED, i] = False
            flags[b, IF_DROPPED, i] = False
            flags[b, IF_AVAILABLE, i] = False
            powered[b, i] = 0
            for q in range(telemetry.shape[1]):
                telemetry[b, q, i] = 0.0


def first_info(info: Info, whole: Sequence[np.int64]) -> dict[str, Any]:
    """The first episode's info by key (``interface.INFO_KEYS``, in order), as the single env
    reports it: numpy float64 scalars, int64 scalars for the whole numbers, 0-d bool arrays
    for the yes/no keys (``interface.INFO_FLAGS``) and (width,) per-site arrays.

    The single env pays for this at every step, so it is written out for speed, here beside
    the layout it reads: the row is read into Python once (``tolist``, exact), each float made
    from it (cheaper than indexing the array); a whole number n is ``whole[n + 1]``, a shared
    int64 scalar (``whole`` holds -1, 0, 1, ... up to the round limit and the site count;
    rounds past it are made afresh); the flags are fresh 0-d arrays, since Gymnasium's checker
    warns of an info that shares an array with another.
    """
    v, flags, tm = info.values[0], info.flags[0], info.telemetry[0]
    w, ints, flag = v.tolist(), whole, np.array
    rounds = int(w[I_ROUNDS])
    return {
        "round_time_s": v[I_ROUND_S],
        "compute_s": v[I_COMPUTE_S],
        "comm_s": v[I_COMM_S],
        "elapsed_s": v[I_ELAPSED],
        "start_time_s": v[I_START],
        "trace_time": v[I_TRACE_TIME],
        "accuracy": v[I_ACC],
        "selected": flags[IF_SELECTED],
        "n_selected": ints[int(w[I_N_SELECTED]) + 1],
        "dropped": flags[IF_DROPPED],
        "invalid_selections": ints[int(w[I_INVALID]) + 1],
        "idle": flag(w[I_IDLE] > 0.0),  # 0-d (INFO_FLAGS)
        "cut": flag(w[I_CUT] > 0.0),
        "powered_gpus": info.powered[0],
        "available": flags[IF_AVAILABLE],
        "straggler": ints[int(w[I_STRAGGLER]) + 1],
        "round_energy_kwh": v[I_ROUND_KWH],
        "energy_kwh": v[I_KWH],
        "rounds": ints[rounds + 1] if rounds < len(ints) - 1 else np.int64(rounds),
        "tta_h": v[I_TTA_H],
        "success": flag(w[I_SUCCESS] > 0.0),
        "delta_progress": v[I_DELTA_PROGRESS],
        "measured_compute_s": tm[0],
        "measured_transfer_s": tm[1],
        "measured_join_s": tm[2],
        "round_carbon_kg": v[I_ROUND_CARBON_KG],
        "carbon_kg": v[I_CARBON_KG],
    }


def no_round(batch: int, n_sites: int) -> tuple[np.ndarray, np.ndarray]:
    """The record of a round that did nothing: what a reset reports, so that its info is built
    as a round's is. No time, no site, no straggler (-1), not ended."""
    rec = np.zeros((batch, len(RECORD_FIELDS)))
    rec[:, R_STRAGGLER] = -1.0
    return rec, np.zeros((batch, len(SITE_RECORD), n_sites))


def describe(params: SimParams, result: RoundResult, width: int) -> Info:
    """The info after ``result``, computed apart from the step (a real learner's accuracy)."""
    out = info_buffers(result.state.batch, width)
    _fill_info(params.consts, params.table, result.state.data, result.record, result.sites, *out)
    return out


def report(params: SimParams, state: SimState, width: int) -> Info:
    """The info of episodes that have just started (``state``): as after a round that did
    nothing, so the keys about the last round hold their neutral values."""
    return describe(params, RoundResult(state, *no_round(state.batch, params.n_sites)), width)
