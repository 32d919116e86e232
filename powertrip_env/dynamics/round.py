"""One synchronous round of every episode in a batch, on the true power trace.

`_round` is docs/model.md's "A round", step by step. The barrier's arithmetic, what each
completing, dropped or fetching site adds to when the round ends and what it teaches
(`_tally_site`, `_barrier`), is shared with the what-if of candidate sets (``predict.py``),
which runs the same round on the forecast instead of the trace.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, NamedTuple

import numpy as np

from powertrip_env.dynamics.jit import jit
from powertrip_env.dynamics.jitter import _factor, _round_seed
from powertrip_env.dynamics.layout import (
    ACC,
    BUDGET,
    C_AGG,
    C_CARBON,
    C_FIXED_TIME,
    C_GRACE,
    C_HUB_TX,
    C_IDLE_S,
    C_LOCAL_STEPS,
    C_MAX_ROUNDS,
    C_MOVING,
    C_NONBLOCKING,
    C_RING,
    C_ROUND_S,
    C_RTT_FACTOR,
    C_TARGET,
    CARBON,
    COVERAGE,
    DROPPED,
    ENERGY,
    JOINED,
    KEY,
    LAST_PACE,
    LAST_ROUND,
    NO_JITTER,
    OUTAGE_S,
    POWERED,
    POWERED_NOW,
    PROGRESS,
    R_CARBON_G,
    R_COMM_S,
    R_COMPUTE_S,
    R_CUT,
    R_DELTA_ACC,
    R_DELTA_PROGRESS,
    R_ENERGY_J,
    R_IDLE,
    R_INVALID,
    R_N_SELECTED,
    R_OVER,
    R_ROUND_S,
    R_STRAGGLER,
    R_TERMINATED,
    R_TRUNCATED,
    ROUNDS,
    S_BATCH,
    S_IDLE_W,
    S_QUOTA,
    SELECTED,
    START,
    TIME,
    U_NOISE,
    U_PACE,
    U_THROUGHPUT,
    W_BEGIN,
    W_END,
    W_FETCH,
    W_JOIN,
    W_LINK,
    W_POWER,
    W_SPEED,
    WORK_FIELDS,
    share_start,
)
from powertrip_env.dynamics.learning import _accuracy, _coverage, _delta_progress, _rewards
from powertrip_env.dynamics.paths import _path_factors
from powertrip_env.dynamics.state import RoundResult, SimState, _c_bool, _round_buffers
from powertrip_env.dynamics.tables import (
    _busy_carbon_at,
    _gpu_energy_at,
    _row,
    _samples_at,
    _samples_in,
    _steady_carbon,
    _time_to_reach,
)
from powertrip_env.dynamics.unknowns import (
    _join_s,
    _link,
    _site_factor,
    _telemetry,
    _unknowns_of,
)

if TYPE_CHECKING:
    from powertrip_env.dynamics.params import SimParams

_JUST_BELOW_1 = 1.0 - 2.0**-30  # a fetch not yet done never reads as joined

# --------------------------------------------------------------------------- the barrier


class Tally(NamedTuple):
    """What the started sites add up to at the barrier, which the true round and the what-if
    both count (`_tally_site`). Immutable, so that the compiled loops keep it in registers."""

    completing: float  # sites that finish their compute with power
    latest: float  # the last completing site's compute end (-inf: none)
    straggler: float  # that site (-1: none)
    last_drop: float  # the last drop-out's time (-inf: none)
    rtt: float  # the largest RTT among the completing sites
    site_tx: float  # their largest M / bw_i
    batch: float  # their summed batch; fixed_time rounds: the samples they processed
    first_fetch: float  # non-blocking joins: the first fetch's end (inf: none)


@jit
def _tally_start() -> Tally:
    """No site completing, dropped or fetching yet."""
    return Tally(0.0, -math.inf, -1.0, -math.inf, 0.0, 0.0, 0.0, math.inf)


@jit
def _joins_fetching(c: np.ndarray, steady: bool) -> bool:
    """Whether a joining site fetches the training state through the round instead of
    training (non-blocking joins); ``steady`` assumes every site has joined. Callers read this
    once per batch: the loops over sites then unswitch on it."""
    return c[C_NONBLOCKING] > 0.0 and not steady


@jit
def _fetches(fetching: bool, st: np.ndarray, i: int) -> bool:
    """Whether started site ``i`` spends the round fetching (`_joins_fetching`, not joined)."""
    return fetching and st[JOINED + i] < 1.0


@jit
def _fetch_end(site, st, u, t, i):
    """When site ``i``'s fetch of the training state is done if it goes on from ``t``
    (non-blocking joins: the joined slot holds the share already fetched), its join time as
    the unknowns (or belief) ``u`` make it."""
    return t + (1.0 - st[JOINED + i]) * _join_s(site, u, i)


@jit
def _tally_fetch(t: Tally, fetch_end: float) -> Tally:
    """Add a started site that fetches the training state until ``fetch_end``."""
    first = min(t.first_fetch, fetch_end)
    return Tally(t.completing, t.latest, t.straggler, t.last_drop, t.rtt, t.site_tx, t.batch, first)


@jit
def _tally_site(c, site, t, i, finish, drop_at, dropped, samples, rtt, tx):
    """``t`` with started site ``i`` (not fetching) added: it completes unless ``dropped``.

    A site that lost its power (at ``drop_at``) holds the round at most until then. One that
    completes at ``finish`` may be the straggler, brings its RTT and link to the exchange, and
    its batch to the update: ``site_batch``, or in fixed_time rounds the ``samples`` it
    processed. The caller decides ``dropped``: the true round from the trace's next outage, the
    what-if from the forecast's. ``rtt`` and ``tx`` are its RTT and ``M / bw_i`` as the episode's
    unknowns (or the what-if's belief) make them (`_link`), which the what-if works out once
    per episode rather than once per candidate set.
    """
    if dropped:
        last_drop = max(t.last_drop, drop_at)
        return Tally(
            t.completing,
            t.latest,
            t.straggler,
            last_drop,
            t.rtt,
            t.site_tx,
            t.batch,
            t.first_fetch,
        )
    later = finish > t.latest
    return Tally(
        t.completing + 1.0,
        finish if later else t.latest,
        float(i) if later else t.straggler,
        t.last_drop,
        max(t.rtt, rtt),
        max(t.site_tx, tx),
        t.batch + (samples if c[C_FIXED_TIME] > 0.0 else site[S_BATCH, i]),
        t.first_fetch,
    )


@jit
def _global_batch(c: np.ndarray, t: Tally) -> float:
    """The round's global batch ``B_r``: fixed_time rounds count the samples processed in
    units of ``local_steps``."""
    if c[C_FIXED_TIME] > 0.0:
        return t.batch / c[C_LOCAL_STEPS]
    return t.batch


@jit
def _comm_time(c, n_done, rtt, site_tx):
    """The exchange among ``n_done`` completing sites whose largest RTT and largest ``M/bw_i``
    are ``rtt`` and ``site_tx``, before the network jitter (see `_barrier`)."""
    if c[C_RING] > 0.0:
        if n_done > 1:
            return c[C_RTT_FACTOR] * rtt + 2.0 * (n_done - 1) / n_done * site_tx
        return 0.0
    return c[C_RTT_FACTOR] * rtt + 2.0 * max(site_tx, n_done * c[C_HUB_TX])


@jit
def _comm_time_many(c, n_done, rtt, site_tx, out):
    for j in range(out.shape[0]):
        out[j] = _comm_time(c, n_done[j], rtt[j], site_tx[j])


@jit
def _barrier(c, t, n_sel, tally, comm_jitter):
    """(compute, communication, round) seconds of a round that began at ``t``.

    The round ends at the barrier: the last completing site's compute end, then the exchange of
    the pseudo-gradients among the completing sites times the network jitter, then aggregation.
    Through the hub (a parameter server) every update goes up and the result comes down,
    through the slower of the sites' links and the hub's shared one:
    ``rtt_factor · max RTT + 2 · max(max M/bw_i, |S| · M/bw_hub)``. A ring all-reduce moves
    ``2 (|S| − 1) / |S|`` updates through every site's link, so the slowest link sets it:
    ``rtt_factor · max RTT + 2 (|S| − 1) / |S| · max M/bw_i``, nothing for a lone site. If every
    started site dropped out it ends at the last drop-out, with no communication, or, if some
    are fetching the training state (non-blocking joins), when the first fetch is done and no
    earlier than the last drop-out; with none of the ``n_sel`` started it is an idle round of
    ``idle_s``.
    """
    if tally.completing > 0:
        compute_s = tally.latest - t
        comm_s = _comm_time(c, tally.completing, tally.rtt, tally.site_tx) * comm_jitter
        return compute_s, comm_s, compute_s + comm_s + c[C_AGG]
    last_drop = tally.last_drop
    if tally.first_fetch < math.inf:
        until = max(tally.first_fetch, last_drop) - t
        return until, 0.0, until
    if n_sel > 0:
        return last_drop - t, 0.0, last_drop - t
    return 0.0, 0.0, c[C_IDLE_S]


# --------------------------------------------------------------------------- the round


@jit
def _shares(st, n, moving, work):
    """The job's share of each site's powered GPUs (1 alone; ``layout.SHARE_FIELDS``) into
    ``work``: fewer GPUs process the quota more slowly and draw less, as a power callback's."""
    lo = share_start(n)
    for i in range(n):
        share = st[lo + i]
        if moving:
            work[W_SPEED, i] *= share
            work[W_POWER, i] *= share
        else:
            work[W_SPEED, i] = share
            work[W_POWER, i] = share


@jit
def _start_sites(table, k, mask, srec, work):
    """Step 1: the requested sites with a powered GPU in row ``k``, of which the job holds a
    share, start; (requested, started)."""
    n_req = 0
    n_sel = 0
    for i in range(mask.shape[0]):
        powered = table[k, POWERED, i]
        chosen = mask[i] != 0
        n_req += chosen
        sel = chosen and powered > 0.0 and work[W_POWER, i] > 0.0
        n_sel += sel
        srec[SELECTED, i] = sel
        srec[DROPPED, i] = 0.0
        srec[POWERED_NOW, i] = powered
    return n_req, n_sel


@jit
def _run_sites(c, site, table, st, u, jitter, seed, k, srec, work):
    """Steps 2 to 4 for every started site: it joins (or fetches), computes, and completes or
    drops out, into ``work`` and ``srec`` (the drop-outs); the barrier's tally of them. The
    episode's unknowns ``u`` set each site's join, throughput and exchange."""
    t = st[TIME]
    n = site.shape[1]
    fixed = c[C_FIXED_TIME] > 0.0
    fetching = _joins_fetching(c, False)
    tally = _tally_start()
    for i in range(site.shape[1]):
        work[W_FETCH, i] = -1.0  # not fetching
        work[W_JOIN, i] = 0.0
        if srec[SELECTED, i] == 0.0:
            continue
        if _fetches(fetching, st, i):  # fetches through the round, trains next round
            work[W_FETCH, i] = _fetch_end(site, st, u, t, i)
            tally = _tally_fetch(tally, work[W_FETCH, i])
            work[W_BEGIN, i] = t
            work[W_END, i] = t
            continue
        work[W_JOIN, i] = 0.0 if st[JOINED + i] >= 1.0 else _join_s(site, u, i)
        begin = t + work[W_JOIN, i]
        k_begin = _row(c, begin)
        s_begin = _samples_in(c, table, begin, i, k_begin)
        if fixed:  # a slow window stops at the grace deadline: the update goes as it is
            end = begin + c[C_ROUND_S] * min(_factor(c, jitter, seed, i), 1.0 + c[C_GRACE])
        else:  # the quota at the site's true throughput: the stated quota over its factor,
            # then over the path's (1 when calm: the same number as before)
            quota = site[S_QUOTA, i] / _site_factor(u, n, U_THROUGHPUT, i) / work[W_SPEED, i]
            target = s_begin + quota * _factor(c, jitter, seed, i)
            end = _time_to_reach(c, table, target, i, k_begin)
        drop_at = table[k, OUTAGE_S, i]  # the next row without power; the current row has some
        dropped = drop_at < end
        srec[DROPPED, i] = dropped
        samples = 0.0
        if fixed and not dropped:  # on the share of the GPUs the job holds
            share = st[share_start(n) + i]
            samples = share * (_samples_at(c, table, min(end, drop_at), i) - s_begin)
        rtt, tx = _link(site, u, i)
        tx = tx / work[W_LINK, i]
        tally = _tally_site(c, site, tally, i, end, drop_at, dropped, samples, rtt, tx)
        work[W_BEGIN, i] = begin
        work[W_END, i] = end
    return tally


@jit
def _charge(c, site, table, k, t, t_end, srec, work, st, rec):
    """The round's energy and grid carbon, into the record and the episode's totals.

    Energy: busy GPUs from the end of the join to the end of compute (or the outage, or the
    cut), and joined GPUs waiting at idle power through the join and after they finish, until
    the round ends. A site that dropped out has no powered GPU left to wait with. Carbon, over
    the same intervals: at each row the site's PV output covers its draw first and the rest
    comes from its grid at the row's intensity (docs/model.md, "Carbon"); zero without carbon
    data."""
    carbon = c[C_CARBON] != 0.0
    busy_j = 0.0
    idle_j = 0.0
    grams = 0.0
    for i in range(site.shape[1]):
        if srec[SELECTED, i] == 0.0:
            continue
        begin = work[W_BEGIN, i]
        drop_at = table[k, OUTAGE_S, i]
        stop = min(min(work[W_END, i], drop_at), t_end)
        busy_s = max(stop - begin, 0.0)
        share = work[W_POWER, i]  # of its GPUs a power callback leaves it (1 without)
        if busy_s > 0.0:
            busy_j += share * (
                _gpu_energy_at(c, table, site, stop, i)
                - _gpu_energy_at(c, table, site, min(begin, stop), i)
            )
        held_until = min(drop_at, t_end) if srec[DROPPED, i] > 0.0 else t_end
        waiting_s = max(held_until - t - busy_s, 0.0)
        idle_w = site[S_IDLE_W, i] * srec[POWERED_NOW, i] * share
        idle_j += idle_w * waiting_s
        if carbon:  # the waiting splits into [t, start of compute) and [stop, held_until)
            start = min(begin, stop)
            if busy_s > 0.0:
                grams += share * (
                    _busy_carbon_at(c, table, site, stop, i)
                    - _busy_carbon_at(c, table, site, start, i)
                )
            grams += _steady_carbon(c, table, idle_w, t, start, i)
            grams += _steady_carbon(c, table, idle_w, stop, held_until, i)
    energy_j = busy_j + idle_j
    st[ENERGY] += energy_j
    st[CARBON] += grams
    rec[R_ENERGY_J] = energy_j
    rec[R_CARBON_G] = grams


@jit
def _settle_sites(site, st, u, srec, fetch, t, t_end, idle):
    """Each site's joined slot and rounds absent once the round ends at ``t_end``.

    A site that completed has joined and is no longer absent; one that dropped out or sat out
    must join again, and counts a round more away (unless nobody trained: an idle round
    releases every site but forgets no data). A fetch longer than the round leaves the share
    fetched in the joined slot, never quite 1.
    """
    n = site.shape[1]
    for i in range(n):
        started = srec[SELECTED, i] > 0.0
        if not idle:
            done = started and srec[DROPPED, i] == 0.0 and fetch[i] < 0.0
            st[JOINED + n + i] = 0.0 if done else st[JOINED + n + i] + 1.0
        if not started or srec[DROPPED, i] > 0.0:
            st[JOINED + i] = 0.0
        elif fetch[i] < 0.0 or fetch[i] <= t_end:
            st[JOINED + i] = 1.0
        else:
            st[JOINED + i] = min(st[JOINED + i] + (t_end - t) / _join_s(site, u, i), _JUST_BELOW_1)


@jit
def _round(c, site, table, st, mask, jitter, rec, srec, work):
    """One round of one episode, in the order docs/model.md gives it; ``st`` is updated.

    1. Requested sites without a powered GPU now (or none of whose GPUs the job holds, when jobs
       share the sites) are dropped (``invalid``); the rest start. None
       starting is an idle round: the clock moves ``idle_s``, nothing is learned, every site is
       released.
    2. A site that did not complete the previous round first joins: ``join_s`` (fixed cost plus
       fetching the training state over its WAN link).
    3. Each site processes its quota on the GPUs it can power, integrated over the trace.
    4. A site whose power falls to no GPU before it finishes drops out at that moment: its work
       is lost and the barrier does not wait for it, but the energy it spent counts.
    5. The round ends at the barrier (`_barrier`).
    6. A round that would end after the episode's time budget is cut there and teaches nothing
       (a synchronous update lands only at the round's end).

    With non-blocking joins (``[network] join_mode``), step 2 differs: a joining site fetches
    the training state while the others train, delays nothing and adds nothing to the round (a
    zero pseudo-gradient); it has joined once its fetch is done, and a fetch longer than the
    round goes on in the next. A round in which every started site is fetching ends when the
    first fetch does.

    ``jitter`` holds the episode's factors (N + 1), or is empty to draw its own (`_factor`);
    ``work`` (WORK_FIELDS, N) is scratch.
    """
    n = site.shape[1]
    t = st[TIME]
    k = _row(c, t)
    u = _unknowns_of(st, n)
    seed = _round_seed(st[KEY], int(st[ROUNDS]))
    moving = c[C_MOVING] > 0.0
    if moving:  # the world's moving part, as it stands at the start
        _path_factors(c, st, n, k, work)
    _shares(st, n, moving, work)
    n_req, n_sel = _start_sites(table, k, mask, srec, work)
    tally = _run_sites(c, site, table, st, u, jitter, seed, k, srec, work)
    comm_jitter = _factor(c, jitter, seed, n) if tally.completing > 0 else 1.0
    compute_s, comm_s, round_s = _barrier(c, t, n_sel, tally, comm_jitter)
    deadline = st[START] + st[BUDGET]  # step 6: the episode's deadline
    budget_left = deadline - t
    cut = round_s > budget_left
    round_s = min(round_s, budget_left)
    compute_s = min(compute_s, round_s)
    comm_s = min(comm_s, round_s - compute_s)
    # A round that reaches the budget ends exactly at it: t + (deadline − t) can round below
    # the deadline, and the episode would then never see its budget run out.
    t_end = deadline if round_s >= budget_left else t + round_s
    batch = 0.0 if cut else _global_batch(c, tally)
    for i in range(n):  # a fetching site whose power fails before it is done starts again
        if work[W_FETCH, i] >= 0.0 and table[k, OUTAGE_S, i] < min(work[W_FETCH, i], t_end):
            srec[DROPPED, i] = 1.0
    _charge(c, site, table, k, t, t_end, srec, work, st, rec)

    idle = n_sel == 0
    _telemetry(c, site, table, st, u, srec, work, comm_jitter, cut)
    _settle_sites(site, st, u, srec, work[W_FETCH], t, t_end, idle)
    cover = st[COVERAGE] if idle else _coverage(c, site, st[JOINED + n : JOINED + 2 * n])
    gained = _delta_progress(c, u[U_PACE], u[U_NOISE], st[PROGRESS], batch, cover)
    progress = st[PROGRESS] + gained
    acc = _accuracy(c, progress, cover)
    target = c[C_TARGET]
    rec[R_DELTA_ACC] = min(acc, target) - min(st[ACC], target)
    _advance(st, t_end, progress, acc, round_s, cover, gained)

    rec[R_DELTA_PROGRESS] = gained
    rec[R_ROUND_S] = round_s
    rec[R_COMPUTE_S] = compute_s
    rec[R_COMM_S] = comm_s
    rec[R_STRAGGLER] = tally.straggler
    rec[R_INVALID] = n_req - n_sel
    rec[R_IDLE] = idle
    rec[R_CUT] = cut
    rec[R_N_SELECTED] = n_sel
    over = t_end >= deadline or st[ROUNDS] >= c[C_MAX_ROUNDS]
    rec[R_OVER] = over
    rec[R_TERMINATED] = acc >= target
    rec[R_TRUNCATED] = over and not acc >= target
    _rewards(c, rec)


@jit
def _advance(st, t_end, progress, acc, round_s, cover, gained):
    """The episode's scalars after a round that ended at ``t_end`` and taught ``gained``."""
    st[TIME] = t_end
    st[PROGRESS] = progress
    st[ACC] = acc
    st[ROUNDS] += 1.0
    st[LAST_ROUND] = round_s
    st[COVERAGE] = cover
    if gained > 0.0 and round_s > 0.0:  # the pace a carbon task's observation extrapolates
        st[LAST_PACE] = gained / round_s


@jit
def _step_batch(c, site, table, state, masks, jitter, rec, srec):
    """Every episode of ``state`` (updated in place) one round on; ``jitter`` (B, N + 1) gives
    the factors, or is empty to take each episode's own from its key."""
    n = site.shape[1]
    work = np.empty((len(WORK_FIELDS), n))
    work[W_SPEED : W_POWER + 1] = 1.0  # a static world's path: a moving one's rounds set it
    own = np.empty(0)
    for b in range(state.shape[0]):
        given = jitter[b] if jitter.shape[0] > 0 else own
        _round(c, site, table, state[b], masks[b], given, rec[b], srec[b], work)


def step_round(
    params: SimParams, state: SimState, mask: np.ndarray, jitter: np.ndarray | None = None
) -> RoundResult:
    """Simulate one round of every episode on the true power trace (see `_round`).

    ``mask`` (B, N) bool is the requested set. The jitter is each episode's own, from its key;
    ``jitter`` (B, N + 1) factors replace it (tests and what-ifs).
    """
    data, record, sites = _round_buffers(params, state)
    given = NO_JITTER if jitter is None else np.ascontiguousarray(jitter, dtype=np.float64)
    _step_batch(params.consts, params.site, params.table, data, _c_bool(mask), given, record, sites)
    return RoundResult(SimState(data), record, sites)
