"""The what-if: candidate sets' next round judged from the forecast issued now.

docs/model.md, "What a policy may know". Each site's round on its own comes from its forecast
(`_forecast_site`), once per episode; a candidate set then only adds up its sites through the
barrier the true round uses (``round._tally_site``, ``round._barrier``). No jitter, no future
actuals, and the state does not change.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, NamedTuple

import numpy as np

from powertrip_env.dynamics.jit import jit
from powertrip_env.dynamics.layout import (
    ACC,
    C_FIXED_TIME,
    C_IV,
    C_ROUND_S,
    FORECAST_FIELDS,
    FS_AVAILABLE,
    FS_DROP,
    FS_DROPPED,
    FS_FINISH,
    FS_SAMPLES,
    JOINED,
    PROGRESS,
    S_QUOTA,
    TIME,
    U_NOISE,
    U_PACE,
    U_THROUGHPUT,
)
from powertrip_env.dynamics.learning import _accuracy, _coverage, _delta_progress
from powertrip_env.dynamics.round import (
    _barrier,
    _fetch_end,
    _fetches,
    _global_batch,
    _joins_fetching,
    _tally_fetch,
    _tally_site,
    _tally_start,
)
from powertrip_env.dynamics.state import _c_bool
from powertrip_env.dynamics.tables import _row
from powertrip_env.dynamics.unknowns import _join_s, _link, _site_factor, belief_rows

if TYPE_CHECKING:
    from powertrip_env.dynamics.params import SimParams
    from powertrip_env.dynamics.state import SimState


class RoundPrediction(NamedTuple):
    """What-if outcome of candidate sets; arrays shaped like the masks without the site axis."""

    round_time_s: np.ndarray
    compute_s: np.ndarray
    comm_s: np.ndarray
    delta_progress: np.ndarray
    delta_accuracy: np.ndarray

    @property
    def efficiency(self) -> np.ndarray:
        """Predicted progress per second: the quantity PowerTrip's greedy compares."""
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.where(self.round_time_s > 0, self.delta_progress / self.round_time_s, 0.0)


# the rows of what the kernel writes, (len(RoundPrediction._fields), B, M)
P_ROUND_S, P_COMPUTE_S, P_COMM_S, P_DELTA_PROGRESS, P_DELTA_ACC = range(
    len(RoundPrediction._fields)
)


@jit
def _forecast_samples(fc, edges, iv, i, x):
    """Forecast cumulative samples of site ``i`` at ``x`` seconds into the current row."""
    horizons = fc.shape[0]
    h = min(max(int(x / iv), 0), horizons)
    return edges[h] + fc[min(h, horizons - 1), i] * (x - h * iv)


@jit
def _forecast_site(c, site, fc, st, u, i, steady, edges, out):
    """Site ``i``'s predicted round on its own from the forecast ``fc`` (H, N) issued now, into
    ``out`` (layout.FORECAST_FIELDS), with its join and throughput as the belief ``u`` has them.

    The forecast rate of row k + h (h = 0 the current row's actual) holds piecewise over the
    coming rows and the last forecast row beyond them; a site's compute time integrates it, as
    the true round integrates the trace. ``steady`` leaves out the join.
    """
    iv = c[C_IV]
    horizons = fc.shape[0]
    t = st[TIME]
    k = _row(c, t)
    available = fc[0, i] > 0.0
    edges[0] = 0.0
    for h in range(horizons):  # cumulative samples at the start of each forecast row
        edges[h + 1] = edges[h] + fc[h, i] * iv
    joining = available and st[JOINED + i] < 1.0 and not steady
    x_begin = (t - k * iv) + (_join_s(site, u, i) if joining else 0.0)
    s_begin = _forecast_samples(fc, edges, iv, i, x_begin)
    samples = 0.0
    if c[C_FIXED_TIME] > 0.0:
        x_end = x_begin + c[C_ROUND_S]
        samples = _forecast_samples(fc, edges, iv, i, x_end) - s_begin
    else:
        target = s_begin + site[S_QUOTA, i] / _site_factor(u, site.shape[1], U_THROUGHPUT, i)
        h = 0
        while h < horizons and edges[h + 1] < target:
            h += 1
        r = fc[min(h, horizons - 1), i]  # the last row's rate continues
        x_end = h * iv + (target - edges[h]) / r if r > 0.0 else math.inf
    first_out = 0
    while first_out < horizons and fc[first_out, i] > 0.0:
        first_out += 1
    drop_x = first_out * iv if first_out < horizons else math.inf
    out[FS_AVAILABLE] = available
    out[FS_FINISH] = k * iv + x_end
    out[FS_DROP] = k * iv + drop_x
    out[FS_DROPPED] = available and drop_x < x_end  # compared before the row's start is added
    out[FS_SAMPLES] = samples


@jit
def _predict_batch(c, site, forecast, state, belief, masks, steady, out):
    """What-if of the candidate sets ``masks`` (B, M, N) into ``out`` (fields, B, M): the
    prediction's fields in `RoundPrediction` order, in the world the belief (1 or B, width)
    describes, never the episode's unknowns in the state.

    A candidate's round is the true round's barrier (`_tally_site`, `_barrier`) over its sites'
    forecast rounds, with no jitter; unavailable sites are left out as the true round leaves
    them out, and a site the forecast sees losing power before it finishes counts as dropped.
    """
    n = site.shape[1]
    horizons = forecast.shape[1]
    edges = np.empty(horizons + 1)
    fs = np.empty((n, len(FORECAST_FIELDS)))
    absent = np.empty(n)
    rtt = np.empty(n)
    tx = np.empty(n)
    fetching = _joins_fetching(c, steady)
    for b in range(state.shape[0]):
        st = state[b]
        u = belief[b if belief.shape[0] > 1 else 0]
        t = st[TIME]
        fc = forecast[_row(c, t)]
        for i in range(n):
            _forecast_site(c, site, fc, st, u, i, steady, edges, fs[i])
            rtt[i], tx[i] = _link(site, u, i)
        for m in range(masks.shape[1]):
            mask = masks[b, m]
            n_sel = 0
            tally = _tally_start()
            for i in range(n):
                absent[i] = st[JOINED + n + i] + 1.0
                if not (mask[i] and fs[i, FS_AVAILABLE] > 0.0):
                    continue
                n_sel += 1
                if _fetches(fetching, st, i):  # fetches, adds nothing
                    tally = _tally_fetch(tally, _fetch_end(site, st, u, t, i))
                    continue
                dropped = fs[i, FS_DROPPED] > 0.0
                finish, drop_at, samples = fs[i, FS_FINISH], fs[i, FS_DROP], fs[i, FS_SAMPLES]
                tally = _tally_site(
                    c, site, tally, i, finish, drop_at, dropped, samples, rtt[i], tx[i]
                )
                if not dropped:
                    absent[i] = 0.0
            compute_s, comm_s, round_s = _barrier(c, t, n_sel, tally, 1.0)
            cover = _coverage(c, site, absent)
            batch = _global_batch(c, tally)
            dp = _delta_progress(c, u[U_PACE], u[U_NOISE], st[PROGRESS], batch, cover)
            out[P_ROUND_S, b, m] = round_s
            out[P_COMPUTE_S, b, m] = compute_s
            out[P_COMM_S, b, m] = comm_s
            out[P_DELTA_PROGRESS, b, m] = dp
            out[P_DELTA_ACC, b, m] = _accuracy(c, st[PROGRESS] + dp, cover) - st[ACC]


def predict_round(
    params: SimParams,
    state: SimState,
    mask: np.ndarray,
    *,
    steady_state: bool = False,
    belief: np.ndarray | None = None,
) -> RoundPrediction:
    """Round time and progress of candidate sets, judged from the forecast issued now.

    ``mask`` is ``(B, N)`` or ``(B, M, N)`` (M candidate sets per episode). Unavailable sites in
    a candidate are dropped, as `step_round` would, and sites the forecast sees losing power
    before they finish count as dropped out. No jitter, no future actuals; the state does not
    change. ``steady_state=True`` leaves the one-off join time out (a set's round once all its
    sites have joined), which is how PowerTrip ranks its prefixes.

    ``belief`` (``unknowns.belief_rows``: None, (width,) or (B, width)) is the world the what-if
    assumes: by default the scenario's stated values, never the episode's drawn unknowns.
    """
    mask = _c_bool(mask)
    squeeze = mask.ndim == 2
    if squeeze:
        mask = mask[:, None, :]
    out = np.empty((len(RoundPrediction._fields), mask.shape[0], mask.shape[1]))
    rows = belief_rows(belief, mask.shape[0], params.n_sites)
    _predict_batch(
        params.consts,
        params.site,
        params.forecast_rate,
        state.data,
        rows,
        mask,
        bool(steady_state),
        out,
    )
    if squeeze:
        out = out[:, :, 0]
    return RoundPrediction(*out)
