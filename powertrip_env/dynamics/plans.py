"""Plans played to the end: one loop over ``step_round`` for every what-if that looks rounds ahead.

A plan is a site set per round (or one set for every round). ``play_plans`` plays M of them as a
batch of episodes on whatever world ``params`` describes: the true trace with the episode's
jitter for the clairvoyant references (``powertrip_env.clairvoyant``), or the forecast issued
now without jitter for the deployable planners (``forecast_world`` in ``params.py``, the world
``predict_plan`` below plays). Both go through ``step_round``, so a plan means the same thing in
either. ``play_rule`` plays a candidate rule after a first set through the same loop: the
rollouts of a clairvoyant teacher.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, NamedTuple

import numpy as np

from powertrip_env.dynamics.candidates import build_candidates
from powertrip_env.dynamics.formulas import progress_needed
from powertrip_env.dynamics.layout import G_PER_J, POWERED, PV_W, RATE
from powertrip_env.dynamics.params import CARBON_FORECASTS, carbon_sources, forecast_world
from powertrip_env.dynamics.paths import without_path
from powertrip_env.dynamics.round import step_round
from powertrip_env.dynamics.tables import current_row
from powertrip_env.dynamics.unknowns import belief_rows, with_belief
from powertrip_env.units import S_PER_H, per_j_to_per_kwh

if TYPE_CHECKING:
    from powertrip_env.dynamics.params import SimParams
    from powertrip_env.dynamics.state import SimState


@dataclass(frozen=True)
class Trajectory:
    """Where each of M simulated plans ended up."""

    state: SimState  # (M episodes) after the last round played, or where each ended
    success: np.ndarray  # (M,) bool: reached the target accuracy
    ended: np.ndarray  # (M,) bool: the episode ended (success or out of budget or rounds)
    tta_h: np.ndarray  # (M,) elapsed hours at success, the time budget otherwise
    # (M,) the progress the target needs at the coverage each plan ended with: a plan that
    # leaves label-skewed sites out can lower the accuracy's ceiling (coverage_ceiling) and so
    # need more progress than at full coverage, or be unable to reach the target (inf)
    progress_needed: np.ndarray


def play_plans(
    params: SimParams,
    state: SimState,
    plan: np.ndarray,
    rounds: int | None = None,
    jitter: np.ndarray | None = None,
) -> Trajectory:
    """Play M plans from ``state`` (M episodes, or one copied M times).

    ``plan`` is (M, N) bool, one set requested every round, or (M, R, N), a set per round. At
    most ``rounds`` rounds are played (default: R, or until every plan's episode ends); an
    episode that ends stops there. ``jitter`` (N + 1,) factors replace every round's (default:
    each episode's own, from its key).
    """
    plan = np.asarray(plan, dtype=bool)
    per_round = plan.ndim == 3
    limit = plan.shape[1] if per_round else params.max_rounds
    limit = limit if rounds is None else min(limit, rounds)

    def choose(r: int, live: np.ndarray, now: SimState) -> np.ndarray:
        return plan[live, r] if per_round else plan[live]

    return _play(params, state, plan.shape[0], choose, limit, jitter)


def play_rule(
    params: SimParams,
    state: SimState,
    first: np.ndarray,
    rule: tuple[float, float],
    rounds: int | None = None,
) -> Trajectory:
    """Play M first sets (M, N) from ``state`` (M episodes, or one copied M times), then a
    candidate rule every round after: the ``(horizon, margin)`` slot of ``build_candidates``,
    which each episode judges from the forecast issued at its own time. At most ``rounds``
    rounds (default: until each episode ends)."""
    first = np.asarray(first, dtype=bool)
    limit = params.max_rounds if rounds is None else rounds

    def choose(r: int, live: np.ndarray, now: SimState) -> np.ndarray:
        if r == 0:
            return first[live]
        return build_candidates(params, now, (rule,)).masks[:, 1]

    return _play(params, state, first.shape[0], choose, limit, None)


def _play(
    params: SimParams,
    state: SimState,
    m: int,
    choose: Callable[[int, np.ndarray, SimState], np.ndarray],
    limit: int,
    jitter: np.ndarray | None,
) -> Trajectory:
    """The loop both share: round r of the live episodes requests ``choose(r, live, now)``."""
    if state.batch != m:
        state = state.take(np.zeros(m, dtype=np.intp))
    ended = np.zeros(m, dtype=bool)
    success = np.zeros(m, dtype=bool)
    for r in range(limit):
        live = np.flatnonzero(~ended)
        if live.size == 0:
            break
        now = state.take(live)
        given = None if jitter is None else np.broadcast_to(jitter, (live.size, jitter.size))
        result = step_round(params, now, choose(r, live, now), given)
        state = state.put(live, result.state)
        ended[live] = result.terminated | result.truncated
        success[live] = result.terminated
    elapsed = np.where(success, state.time_s - state.start_s, state.budget_s)
    need = progress_needed(params, state.coverage)
    return Trajectory(state, success, ended, elapsed / S_PER_H, need)


def predict_plan(
    params: SimParams,
    state: SimState,
    plan: np.ndarray,
    rounds: int | None = None,
    belief: np.ndarray | None = None,
    carbon_forecast: str = "yesterday",
) -> Trajectory:
    """``play_plans`` from episode 0 of ``state`` on the forecast issued now, without jitter, in
    the world ``belief`` describes (``predict_round``'s; by default the scenario's stated values,
    never the episode's drawn unknowns), its grid carbon guessed by ``carbon_forecast``
    (``forecast_world``).

    The plans run on ``forecast_world`` from the current row to the end of the time budget (so
    no round outruns its tables); the returned state is moved back onto the calendar's clock.
    Its unknowns are the belief's and its [moving] path is calm (``paths.without_path``): the
    episode's draw and path stay out of what a deployable policy is handed.
    """
    iv = params.interval_s
    row = int(current_row(params, state.time_s[:1])[0])
    offset = row * iv
    end = float(state.start_s[0] + state.budget_s[0])
    rows = int(np.ceil((end - offset) / iv)) + 2
    world = forecast_world(params, row, rows, carbon_forecast)
    here = state.take(np.zeros(1, dtype=np.intp))
    here = here.replace(time_s=here.time_s - offset, start_s=here.start_s - offset)
    # the belief's world, not the draw, and no path: the forecast knows neither, and the
    # trajectory goes back to the policy that asked (a static world's path is calm already)
    here = with_belief(here, belief_rows(belief, 1, params.n_sites))
    if params.moving:
        here = without_path(here)
    out = play_plans(world, here, plan, rounds)
    moved = out.state.replace(time_s=out.state.time_s + offset, start_s=out.state.start_s + offset)
    return Trajectory(moved, out.success, out.ended, out.tta_h, out.progress_needed)


POWER_FORECASTS = ("hold", "week")  # beyond the power forecast's horizon (rows_ahead)


class RowsAhead(NamedTuple):
    """Per trace row from the one holding the clock to the one holding the deadline, and per
    site: what a row-by-row planner prices (``baselines/carbon_planner.py``). Row 0 is the
    current row, whole (``start_s[0]`` is before the clock unless a row has just begun)."""

    start_s: np.ndarray  # (R,) s on the episode's clock at which each row begins
    rate: np.ndarray  # (R, N) samples/s the site's powered GPUs compute in the row
    power_w: np.ndarray  # (R, N) W those GPUs draw busy (powered GPUs × wall power per GPU)
    pv_w: np.ndarray  # (R, N) W of on-site PV, used before the grid
    grid_g_per_kwh: np.ndarray  # (R, N) g CO2eq per kWh of the site's grid


def rows_ahead(
    params: SimParams,
    state: SimState,
    carbon_forecast: str = "week",
    power_forecast: str = "hold",
) -> RowsAhead:
    """The rows from episode 0 of ``state``'s current row to its deadline's (``RowsAhead``), as
    the forecast issued now sees them: the world ``predict_plan`` plays (``forecast_world``),
    the power forecast issued now and the grid's intensity and PV as ``carbon_forecast``
    (``CARBON_FORECASTS``) guesses them from the past, so a deployable policy may read them.
    Beyond the power forecast's horizon, ``power_forecast`` "hold" holds its last row (as
    ``predict_plan`` does); "week" takes the mean of the same time of day over the last
    ``WEEK_DAYS`` days already past of the actual power (samples/s and powered GPUs; the rows
    ``carbon_sources`` names, all at most the current one): a seasonal forecast from past data
    only. ``clairvoyant_rows_ahead`` gives the true rows instead.
    """
    if carbon_forecast not in CARBON_FORECASTS:
        raise ValueError(
            f"carbon_forecast={carbon_forecast!r}: allowed: {', '.join(CARBON_FORECASTS)}"
        )
    return _rows_ahead(params, state, carbon_forecast, power_forecast)


def clairvoyant_rows_ahead(params: SimParams, state: SimState) -> RowsAhead:
    """CLAIRVOYANT: the true trace's rows from episode 0 of ``state``'s current row to its
    deadline's (``RowsAhead``), for ``Clairvoyant.rows`` only."""
    return _rows_ahead(params, state, None, "hold")


def _rows_ahead(
    params: SimParams, state: SimState, carbon_forecast: str | None, power_forecast: str
) -> RowsAhead:
    """``rows_ahead`` (``carbon_forecast`` one of ``CARBON_FORECASTS``) or, with None, the true
    rows (``clairvoyant_rows_ahead``)."""
    if power_forecast not in POWER_FORECASTS:
        raise ValueError(
            f"power_forecast={power_forecast!r}: allowed: {', '.join(POWER_FORECASTS)}"
        )
    iv = params.interval_s
    row = int(current_row(params, state.time_s[:1])[0])
    end = float(state.start_s[0] + state.budget_s[0])
    rows = max(int(np.ceil((end - row * iv) / iv)), 1)
    if carbon_forecast is None:
        table = params.table[np.minimum(row + np.arange(rows), params.rows - 1)]
    else:
        table = forecast_world(params, row, rows, carbon_forecast).table[:rows]
    rate, powered = table[:, RATE].copy(), table[:, POWERED].copy()
    horizon = params.forecast_rate.shape[1]
    if carbon_forecast is not None and power_forecast == "week" and rows > horizon:
        past = carbon_sources(params, row, rows, "week")[horizon:]  # (R - H, D), all <= row
        rate[horizon:] = params.table[past, RATE].mean(axis=1)
        powered[horizon:] = params.table[past, POWERED].mean(axis=1)
    return RowsAhead(
        start_s=(row + np.arange(rows)) * iv,
        rate=rate,
        power_w=powered * params.gpu_wall_w,
        pv_w=table[:, PV_W].copy(),
        grid_g_per_kwh=per_j_to_per_kwh(table[:, G_PER_J]),
    )
