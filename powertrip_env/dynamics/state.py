"""The Python face of the kernel's packed arrays: a batch of episodes and a round's outcome.

The kernel reads and writes one float64 array per batch (layout.STATE_FIELDS) and two per
round (layout.RECORD_FIELDS, layout.SITE_RECORD); ``SimState`` and ``RoundResult`` name their
columns for everyone else.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from powertrip_env.dynamics.layout import (
    ACC,
    BUDGET,
    CARBON,
    COVERAGE,
    DROPPED,
    ENERGY,
    JOINED,
    KEY,
    LAST_PACE,
    LAST_ROUND,
    PATH_FIELDS,
    POWERED_NOW,
    PROGRESS,
    R_CARBON_G,
    R_COMM_S,
    R_COMPUTE_S,
    R_CUT,
    R_DELTA_ACC,
    R_ENERGY_J,
    R_IDLE,
    R_INVALID,
    R_OVER,
    R_ROUND_S,
    R_STRAGGLER,
    R_TERMINATED,
    R_TRUNCATED,
    RECORD_FIELDS,
    ROUNDS,
    SEEN_FIELDS,
    SELECTED,
    SITE_RECORD,
    START,
    STATE_BLOCKS,
    STATE_FIELDS,
    TIME,
    UNKNOWN_SCALARS,
    V_ROUND,
    path_start,
    seen_start,
    share_start,
    state_width,
    unknowns_start,
    unknowns_width,
)
from powertrip_env.dynamics.learning import _rewards

if TYPE_CHECKING:
    from powertrip_env.dynamics.params import SimParams


class SimState:
    """A batch of B episodes: ``data`` is (B, len(STATE_FIELDS) + 2N) float64.

    The dynamics never change a state; each step makes a new one, and so must callers (the
    array stays writeable because flipping the flag costs a third of a kernel call). The
    properties give the fields as arrays (views, except the bool ``prev_selected`` and the
    int ``rounds``).
    """

    __slots__ = ("data",)
    FIELDS = (*STATE_FIELDS, "prev_selected", "absent_rounds", "shares")  # the properties

    def __init__(self, data: np.ndarray) -> None:
        self.data = data

    @property
    def batch(self) -> int:
        return self.data.shape[0]

    @property
    def n_sites(self) -> int:
        return (self.data.shape[1] - JOINED - UNKNOWN_SCALARS) // STATE_BLOCKS

    time_s = property(lambda self: self.data[:, TIME], doc="(B,) seconds since row 0")
    start_s = property(lambda self: self.data[:, START], doc="(B,) the episode's start")
    progress = property(lambda self: self.data[:, PROGRESS], doc="(B,) surrogate progress P")
    accuracy = property(lambda self: self.data[:, ACC], doc="(B,)")
    energy_j = property(lambda self: self.data[:, ENERGY], doc="(B,) energy so far")
    last_round_s = property(lambda self: self.data[:, LAST_ROUND], doc="(B,)")
    coverage = property(lambda self: self.data[:, COVERAGE], doc="(B,) of the last round")
    key = property(lambda self: self.data[:, KEY], doc="(B,) the jitter's key")
    carbon_g = property(lambda self: self.data[:, CARBON], doc="(B,) grid carbon so far (g)")
    last_pace = property(
        lambda self: self.data[:, LAST_PACE],
        doc="(B,) progress per second of the last round that taught anything (0: none yet)",
    )
    budget_s = property(
        lambda self: self.data[:, BUDGET],
        doc="(B,) the episode's time budget: its deadline is start_s + budget_s",
    )

    @property
    def rounds(self) -> np.ndarray:
        """(B,) int: rounds played."""
        return self.data[:, ROUNDS].astype(np.int64)

    @property
    def prev_selected(self) -> np.ndarray:
        """(B, N) bool: the sites that completed the last round (joined)."""
        return self.data[:, JOINED : JOINED + self.n_sites] >= 1.0

    @property
    def absent_rounds(self) -> np.ndarray:
        """(B, N) rounds since each site last took part."""
        n = self.n_sites
        return self.data[:, JOINED + n : JOINED + 2 * n]

    @property
    def seen(self) -> np.ndarray:
        """(B, len(SEEN_FIELDS), N) each site's last telemetry: measured over nominal compute,
        exchange and join, and the round it was taken in (-1: never). Measured track only."""
        n = self.n_sites
        lo = seen_start(n)
        return self.data[:, lo : lo + len(SEEN_FIELDS) * n].reshape(-1, len(SEEN_FIELDS), n)

    def take(self, index: np.ndarray) -> SimState:
        """The episodes at ``index`` (an int array, repeats allowed), as a new batch."""
        return SimState(self.data[np.asarray(index)])

    @property
    def shares(self) -> np.ndarray:
        """(B, N) the share of each site's powered GPUs the episode's job holds (1: all, as
        when it runs alone; ``powertrip_env.multijob`` sets it before each round)."""
        n = self.n_sites
        return self.data[:, share_start(n) : share_start(n) + n]

    def replace(self, **fields: Any) -> SimState:
        """A copy with the named fields (``STATE_FIELDS``, ``prev_selected``,
        ``absent_rounds``, ``shares``) set to the given values, broadcast over the batch."""
        data = self.data.copy()
        n = self.n_sites
        for name, value in fields.items():
            if name == "prev_selected":
                data[:, JOINED : JOINED + n] = np.asarray(value, dtype=bool)
            elif name == "absent_rounds":
                data[:, JOINED + n : JOINED + 2 * n] = value
            elif name == "shares":
                data[:, share_start(n) : share_start(n) + n] = _checked_shares(value, n)
            elif name in STATE_FIELDS:
                data[:, STATE_FIELDS.index(name)] = value
            else:
                raise TypeError(f"SimState has no field {name!r}")
        return SimState(data)

    def put(self, index: np.ndarray, part: SimState) -> SimState:
        """A copy with the episodes at ``index`` replaced by those of ``part``."""
        data = self.data.copy()
        data[index] = part.data
        return SimState(data)


def initial_state(
    params: SimParams, start_s: Any, key: Any = 0, unknowns: np.ndarray | None = None
) -> SimState:
    """Fresh episodes starting at ``start_s`` (seconds since row 0) with jitter keys ``key``
    (whole numbers below ``KEY_LIMIT``, drawn from each episode's generator) and ``unknowns``
    ((B, width) factors, ``unknowns.draw_unknowns``; default all 1: the world as stated). Its
    path is calm for good: ``paths.start_paths`` starts a [moving] scenario's from each
    episode's key and start row."""
    start = np.asarray(start_s, dtype=np.float64).reshape(-1)
    n = params.n_sites
    data = np.zeros((start.shape[0], state_width(n)))
    initial_unknowns(data, n, unknowns)
    data[:, TIME] = start
    data[:, START] = start
    data[:, BUDGET] = params.budget_at(start)  # the deadline is start + budget
    data[:, ACC] = params.a0
    data[:, COVERAGE] = 1.0
    data[:, KEY] = key
    return SimState(data)


class RoundResult:
    """The outcome of one simulated round for every episode in the batch.

    ``record`` is (B, len(RECORD_FIELDS)) and ``sites`` (B, 3, N) (``SITE_RECORD``); the
    properties read them as typed arrays.
    """

    __slots__ = ("record", "sites", "state")
    # the properties besides ``state``, by name
    FIELDS = (
        "round_time_s", "compute_s", "comm_s", "delta_accuracy", "energy_j", "straggler",
        "invalid", "idle", "cut", "terminated", "truncated", "selected", "dropped", "powered",
        "carbon_g",
    )  # fmt: skip

    def __init__(self, state: SimState, record: np.ndarray, sites: np.ndarray) -> None:
        self.state, self.record, self.sites = state, record, sites

    round_time_s = property(lambda self: self.record[:, R_ROUND_S])
    compute_s = property(lambda self: self.record[:, R_COMPUTE_S])
    comm_s = property(lambda self: self.record[:, R_COMM_S])
    delta_accuracy = property(
        lambda self: self.record[:, R_DELTA_ACC],
        doc="clipped at the target, so a* − a0 sums exactly on success",
    )
    energy_j = property(lambda self: self.record[:, R_ENERGY_J], doc="of this round")
    carbon_g = property(
        lambda self: self.record[:, R_CARBON_G], doc="grid carbon of this round (g CO2eq)"
    )
    straggler = property(
        lambda self: self.record[:, R_STRAGGLER].astype(np.int64),
        doc="the completing site that finished compute last; -1 if none",
    )
    invalid = property(
        lambda self: self.record[:, R_INVALID].astype(np.int64),
        doc="requested sites that were unavailable",
    )
    idle = property(lambda self: self.record[:, R_IDLE] > 0.0, doc="no site started")
    cut = property(
        lambda self: self.record[:, R_CUT] > 0.0,
        doc="the round was cut at the time budget and taught nothing",
    )
    terminated = property(lambda self: self.record[:, R_TERMINATED] > 0.0)
    truncated = property(lambda self: self.record[:, R_TRUNCATED] > 0.0)
    selected = property(
        lambda self: self.sites[:, SELECTED] > 0.0,
        doc="(B, N) the sites that started the round (selection ∧ available)",
    )
    dropped = property(
        lambda self: self.sites[:, DROPPED] > 0.0,
        doc="(B, N) selected sites that lost all power before finishing",
    )
    powered = property(
        lambda self: self.sites[:, POWERED_NOW], doc="(B, N) powered GPUs at the round's start"
    )

    def with_accuracy(self, params: SimParams, before: Any, after: Any) -> RoundResult:
        """This round taking the accuracy from ``before`` to ``after`` instead (a real
        learner's): the state, the gain, the rewards and whether the episode terminated
        follow it."""
        accuracy = np.asarray(after, dtype=np.float64)
        target = params.a_target
        record = self.record.copy()
        record[:, R_DELTA_ACC] = np.minimum(accuracy, target) - np.minimum(before, target)
        done = accuracy >= target
        record[:, R_TERMINATED] = done
        record[:, R_TRUNCATED] = (record[:, R_OVER] > 0.0) & ~done
        for row in record:
            _rewards(params.consts, row)
        return RoundResult(self.state.replace(accuracy=accuracy), record, self.sites)


def _c_bool(values: np.ndarray) -> np.ndarray:
    """A mask the kernel can read: bool, C-contiguous."""
    return np.ascontiguousarray(values, dtype=np.bool_)


def _round_buffers(params: SimParams, state: SimState) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """What a round writes: a copy of the state, its record and its per-site record."""
    b = state.batch
    record = np.empty((b, len(RECORD_FIELDS)))
    return state.data.copy(), record, np.empty((b, len(SITE_RECORD), params.n_sites))


def _checked_shares(value: Any, n: int) -> np.ndarray:
    """Shares a round can run on: finite, in [0, 1], one per site (or one for all)."""
    shares = np.asarray(value, dtype=np.float64)
    if shares.ndim > 2 or (shares.ndim and shares.shape[-1] not in (1, n)):
        raise ValueError(f"shares: shape {shares.shape} does not give one share per site ({n})")
    if not np.all((shares >= 0.0) & (shares <= 1.0)):
        raise ValueError(f"shares: {shares!r} must each be in [0, 1] (a share of a site's GPUs)")
    return shares


def initial_unknowns(data: np.ndarray, n_sites: int, unknowns: np.ndarray | None) -> None:
    """Write fresh episodes' unknowns (default all 1), "never measured" telemetry and a whole
    share of every site."""
    lo = unknowns_start(n_sites)
    data[:, lo : lo + unknowns_width(n_sites)] = 1.0 if unknowns is None else unknowns
    seen = seen_start(n_sites)
    data[:, seen : seen + len(SEEN_FIELDS) * n_sites] = 1.0
    data[:, seen + V_ROUND * n_sites : seen + (V_ROUND + 1) * n_sites] = -1.0
    calm_paths(data, n_sites)
    data[:, share_start(n_sites) : share_start(n_sites) + n_sites] = 1.0


def calm_paths(data: np.ndarray, n_sites: int) -> None:
    """Set a batch's [moving] paths (PATH_FIELDS, in pairs) calm for good, in place: no site
    in an event, and no phase that ever ends. A fresh episode's until ``paths.start_paths``
    starts a moving scenario's; a forecast's world plays this (``paths.without_path``)."""
    path = path_start(n_sites)
    for p in range(len(PATH_FIELDS) // 2):
        data[:, path + 2 * p * n_sites : path + (2 * p + 1) * n_sites] = 0.0
        data[:, path + (2 * p + 1) * n_sites : path + (2 * p + 2) * n_sites] = np.inf
