"""Hand-coded site-selection policies behind one small interface.

A policy sees what an operator would know when a round starts: each site's power *now* (the
current trace row only), the RTTs to the aggregator, the GPU speeds, and the simulator's what-if
``env.predict_round(mask)``, which assumes current power holds for the round. Every policy here
keeps to that, except ``Clairvoyant``, which is a reference that reads the future trace on
purpose (its name says so) to show how much room the honest policies leave.

Usage::

    policy = make_policy("PowerTrip", n_sites=env.unwrapped.params.n_sites, seed=0)
    obs, info = env.reset(seed=1)
    policy.reset(env)
    mask = policy.act(obs, info)  # (N,) int8 of 0/1

Policies draw no randomness from the environment: ``RandomK`` and ``OortLike`` own their
generators, so the episode's start time and jitter stream stay identical whichever policy runs
(the paired comparison of ``baselines.evaluate`` relies on it).

"Available power" below means the power the job can actually draw at a site now: powered GPUs
times the per-GPU wall power ``p_g``. Headroom beyond the site's GPU count, or less than one
GPU's worth, cannot be turned into training, so it does not count.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from powertrip_env import core

MAX_EXHAUSTIVE_SITES = 16  # MyopicOptimal enumerates 2^N − 1 sets; 2^16 is still one fast call
CHUNK_ROWS = 8192  # candidate sets per predict_round call when enumerating many
_RTT_FLOOR_S = 1e-4  # a hub co-located with a site may have RTT 0; keep power/RTT finite


# --------------------------------------------------------------------------- the interface


class Policy:
    """A site-selection rule: ``reset`` once per episode, then ``act`` once per round.

    Subclasses read the environment through ``self.env`` (the unwrapped ``PowerTripEnv``)
    on every call, never caching its tables, so that what they read is always the env's
    current ``params`` and ``state``.
    """

    name: str = "Policy"

    def __init__(self) -> None:
        self.env: Any = None

    def reset(self, env: Any) -> None:
        """Bind to ``env`` (possibly wrapped) for a new episode, after ``env.reset``."""
        self.env = env.unwrapped

    def act(self, obs: Any, info: dict[str, Any]) -> np.ndarray:
        """The (N,) int8 0/1 mask of sites that take part in the coming round."""
        raise NotImplementedError

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name}>"


@dataclass(frozen=True)
class Now:
    """What is known at decision time, read from the current trace row only."""

    params: core.SimParams
    state: core.SimState
    row: int
    available: np.ndarray  # (N,) bool
    powered: np.ndarray  # (N,) powered GPUs
    rate: np.ndarray  # (N,) samples/s = powered × gpu_rate
    power_w: np.ndarray  # (N,) power the job can draw: powered × p_g

    @classmethod
    def of(cls, env: Any) -> Now:
        params, state = env.params, env.state
        row = int(core.current_row(params, state.time_s)[0])
        powered = np.asarray(params.powered[row], dtype=np.float64)
        return cls(
            params=params,
            state=state,
            row=row,
            available=np.asarray(params.available[row], dtype=bool),
            powered=powered,
            rate=np.asarray(params.rate[row], dtype=np.float64),
            power_w=powered * params.gpu_wall_w,
        )


def _mask(n: int, sites: np.ndarray) -> np.ndarray:
    out = np.zeros(n, dtype=np.int8)
    out[np.asarray(sites, dtype=np.intp)] = 1
    return out


def rank_available(score: np.ndarray, available: np.ndarray) -> np.ndarray:
    """Indices of all sites, available ones first by descending score (ties: lower index)."""
    key = np.where(available, -np.asarray(score, dtype=np.float64), np.inf)
    return np.lexsort((np.arange(key.shape[0]), key))


def prefix_masks(order: np.ndarray) -> np.ndarray:
    """(N, N) bool: row j selects the first j + 1 sites of ``order``."""
    n = order.shape[0]
    masks = np.zeros((n, n), dtype=bool)
    masks[:, order] = np.tri(n, dtype=bool)
    return masks


def first_peak(values: np.ndarray, usable: int) -> int:
    """Index of the first prefix whose successor does not improve (PowerTrip's stopping rule)."""
    for j in range(usable - 1):
        if not values[j + 1] > values[j]:
            return j
    return max(usable - 1, 0)


@functools.cache
def subset_matrix(m: int) -> np.ndarray:
    """(2^m − 1, m) bool: every non-empty subset of m items, built once per m and shared."""
    codes = np.arange(1, 1 << m, dtype=np.int64)
    out = ((codes[:, None] >> np.arange(m)) & 1).astype(bool)
    out.flags.writeable = False
    return out


def _efficiency(env: Any, masks: np.ndarray) -> np.ndarray:
    """Predicted ΔP/T_r of (M, N) candidate sets, in chunks so memory stays bounded."""
    out = np.empty(masks.shape[0])
    for lo in range(0, masks.shape[0], CHUNK_ROWS):
        out[lo : lo + CHUNK_ROWS] = env.predict_round(masks[lo : lo + CHUNK_ROWS]).efficiency
    return out


# --------------------------------------------------------------------------- simple rules


class AllSites(Policy):
    """Every site that can power a GPU now: maximum power, maximum straggler and network risk."""

    name = "AllSites"

    def act(self, obs: Any, info: dict[str, Any]) -> np.ndarray:
        return Now.of(self.env).available.astype(np.int8)


class _TopK(Policy):
    """The k available sites with the highest ``score`` (fewer if fewer are available)."""

    label = "TopK"

    def __init__(self, k: int) -> None:
        super().__init__()
        if k < 1:
            raise ValueError(f"{self.label}: k={k} must be at least 1")
        self.k = int(k)
        self.name = f"{self.label}-{self.k}"

    def score(self, now: Now) -> np.ndarray:
        raise NotImplementedError

    def act(self, obs: Any, info: dict[str, Any]) -> np.ndarray:
        now = Now.of(self.env)
        take = min(self.k, int(now.available.sum()))
        order = rank_available(self.score(now), now.available)
        return _mask(now.params.n_sites, order[:take])


class TopPower(_TopK):
    """The k sites with the most available power (powered GPUs × wall power per GPU).

    Power-only: ignores that a watt buys different throughput on different GPUs, and ignores
    latency, which is what PowerTrip's power-to-cost score adds.
    """

    label = "TopPower"

    def score(self, now: Now) -> np.ndarray:
        return now.power_w


class Nearest(_TopK):
    """The k available sites with the smallest RTT to the aggregator: latency-only."""

    label = "Nearest"

    def score(self, now: Now) -> np.ndarray:
        return -now.params.rtt_s


class FastestK(_TopK):
    """The k sites with the highest throughput now (powered GPUs × per-GPU samples/s).

    GPU-aware where TopPower is not: an H100 site beats a V100 site drawing the same power.
    """

    label = "FastestK"

    def score(self, now: Now) -> np.ndarray:
        return now.rate


class RandomK(Policy):
    """k available sites drawn uniformly at random each round.

    The generator is the policy's own, seeded at ``reset`` from ``(seed, episode counter)``: runs
    are reproducible per seed, and the environment's ``np_random`` (start times, jitter) is never
    touched, which keeps comparisons with other policies paired.
    """

    def __init__(self, k: int, seed: int = 0) -> None:
        super().__init__()
        if k < 1:
            raise ValueError(f"RandomK: k={k} must be at least 1")
        self.k = int(k)
        self.seed = int(seed)
        self.name = "RandomK"
        self.episode = 0
        self.rng = np.random.default_rng([self.seed, 0])

    def reset(self, env: Any) -> None:
        super().reset(env)
        self.rng = np.random.default_rng([self.seed, self.episode])
        self.episode += 1

    def act(self, obs: Any, info: dict[str, Any]) -> np.ndarray:
        now = Now.of(self.env)
        idx = np.flatnonzero(now.available)
        take = min(self.k, idx.shape[0])
        return _mask(now.params.n_sites, self.rng.choice(idx, size=take, replace=False))


# --------------------------------------------------------------------------- PowerTrip


class PowerTrip(Policy):
    """The paper's dynamic greedy (Mehboob et al., SoCC '25), recomputed every round.

    1. Rank the available sites by power-to-cost: available power (powered GPUs × wall power per
       GPU, i.e. what the job can draw now) over the RTT to the aggregator.
    2. Predict the efficiency ΔP/T_r (progress per second, ``predict_round``) of every prefix of
       that ranking, all N prefixes in one vectorised call.
    3. Keep adding sites while efficiency rises; stop at the first prefix whose successor does
       not improve it. That is the point where the next site's network cost and straggler risk
       cancel the power it brings.

    The rule is greedy, not a search: a later prefix could be better still, and keeping that
    blind spot is what makes this the paper's heuristic rather than ``MyopicOptimal``.
    """

    name = "PowerTrip"

    def ranking(self, now: Now) -> np.ndarray:
        score = now.power_w / np.maximum(now.params.rtt_s, _RTT_FLOOR_S)
        return rank_available(score, now.available)

    def act(self, obs: Any, info: dict[str, Any]) -> np.ndarray:
        now = Now.of(self.env)
        n_avail = int(now.available.sum())
        if n_avail == 0:
            return np.zeros(now.params.n_sites, dtype=np.int8)
        order = self.ranking(now)
        eff = self.env.predict_round(prefix_masks(order)).efficiency
        return _mask(now.params.n_sites, order[: first_peak(eff, n_avail) + 1])


# --------------------------------------------------------------------------- Oort


class OortLike(Policy):
    """Oort's participant selection (Lai et al., OSDI '21) adapted to datacenter sites.

    Utility of site i = statistical utility × speed penalty:

    * Statistical utility. Oort uses ``|B_i| · sqrt(mean loss²)`` over a client's samples. We
      have no per-site losses, so ``|B_i|`` becomes the site's data share and the mean squared
      loss is proxied by staleness: ``1 + (1 − exp(−r_i/τ))`` for a site absent ``r_i`` rounds,
      the same forgetting curve the scenario's coverage model uses (τ = ``coverage_tau``). The
      model has drifted away from a long-absent site's data, so its loss there is higher.
    * Speed penalty. With ``d_i`` the site's predicted duration for a round on its own
      (``predict_round``, including join and network) and the preferred round duration ``T`` the
      median of the available sites' ``d_i``, a site slower than ``T`` has its utility
      multiplied by ``(T / d_i)^α`` with α = 2.

    How many: K is chosen by predicted efficiency (the best ΔP/T_r over the prefixes of the
    utility ranking, one vectorised call), not fixed, because a fixed K ignores that power
    changes. Which: Oort's exploration/exploitation split, ``floor((1 − ε)·K)`` sites by
    utility and the rest uniformly at random from the other available sites, with ε decaying
    linearly from 0.9 to 0.3 as the accuracy progresses toward the target (Oort decays it per
    round; progress spans the whole episode regardless of how long rounds are). The random
    draws come from the policy's own seeded generator.
    """

    name = "OortLike"
    alpha = 2.0
    preferred_quantile = 0.5
    eps_start, eps_end = 0.9, 0.3

    def __init__(self, seed: int = 0) -> None:
        super().__init__()
        self.seed = int(seed)
        self.episode = 0
        self.rng = np.random.default_rng([self.seed, 0, 1])

    def reset(self, env: Any) -> None:
        super().reset(env)
        self.rng = np.random.default_rng([self.seed, self.episode, 1])
        self.episode += 1

    def utility(self, now: Now) -> np.ndarray:
        """(N,) utility of each site now; 0 for unavailable sites."""
        p, n = now.params, now.params.n_sites
        staleness = now.state.absent_rounds[0]
        loss_sq = 1.0 + (1.0 - np.exp(-staleness / p.coverage_tau))
        stat = p.data_share * np.sqrt(loss_sq)
        duration = self.env.predict_round(np.eye(n, dtype=bool)).round_time_s
        avail = now.available
        preferred = float(np.quantile(duration[avail], self.preferred_quantile))
        penalty = np.where(duration > preferred, (preferred / duration) ** self.alpha, 1.0)
        return np.where(avail, stat * penalty, 0.0)

    def epsilon(self, now: Now) -> float:
        p = now.params
        done = (float(now.state.accuracy[0]) - p.a0) / (p.a_target - p.a0)
        return self.eps_start + (self.eps_end - self.eps_start) * min(max(done, 0.0), 1.0)

    def act(self, obs: Any, info: dict[str, Any]) -> np.ndarray:
        now = Now.of(self.env)
        n, n_avail = now.params.n_sites, int(now.available.sum())
        if n_avail == 0:
            return np.zeros(n, dtype=np.int8)
        order = rank_available(self.utility(now), now.available)
        eff = self.env.predict_round(prefix_masks(order)).efficiency
        k = int(np.argmax(eff[:n_avail])) + 1
        exploit = math.floor((1.0 - self.epsilon(now)) * k)
        chosen = list(order[:exploit])
        pool = order[exploit:n_avail]
        explore = self.rng.choice(pool, size=min(k - exploit, pool.shape[0]), replace=False)
        return _mask(n, np.concatenate([chosen, explore]))


# --------------------------------------------------------------------------- exhaustive


class MyopicOptimal(Policy):
    """The best predicted efficiency ΔP/T_r over every non-empty set of available sites.

    An upper bound for any rule that trusts ``predict_round`` and looks one round ahead:
    PowerTrip's greedy searches N prefixes of one ranking, this searches all 2^m − 1 subsets of
    the m available sites, in one vectorised ``predict_round`` call (chunked above
    ``CHUNK_ROWS``). The subset matrix is built once per m. Refuses N > 16.
    """

    name = "MyopicOptimal"

    def __init__(self, max_sites: int = MAX_EXHAUSTIVE_SITES) -> None:
        super().__init__()
        self.max_sites = max_sites

    def reset(self, env: Any) -> None:
        n = env.unwrapped.params.n_sites
        if n > self.max_sites:
            raise ValueError(
                f"MyopicOptimal enumerates all 2^N − 1 site sets and supports N <= "
                f"{self.max_sites}; this scenario has N = {n}"
            )
        super().reset(env)

    def act(self, obs: Any, info: dict[str, Any]) -> np.ndarray:
        now = Now.of(self.env)
        n = now.params.n_sites
        idx = np.flatnonzero(now.available)
        if idx.shape[0] == 0:
            return np.zeros(n, dtype=np.int8)
        sub = subset_matrix(idx.shape[0])
        masks = np.zeros((sub.shape[0], n), dtype=bool)
        masks[:, idx] = sub
        best = int(np.argmax(_efficiency(self.env, masks)))
        return masks[best].astype(np.int8)


# --------------------------------------------------------------------------- clairvoyant


def _repeat_state(state: core.SimState, times: int) -> core.SimState:
    """A batch of ``times`` copies of each episode in ``state`` (episode-major)."""
    fields = {
        name: np.repeat(getattr(state, name), times, axis=0)
        for name in core.SimState.__dataclass_fields__
    }
    return core.SimState(**fields)


class Clairvoyant(Policy):
    """REFERENCE ONLY — READS THE FUTURE POWER TRACE. Not a deployable policy.

    A receding-horizon planner that scores candidate sets with the true simulator
    (``core.step_round`` on the real future trace, jitter set to zero) instead of the what-if
    prediction:

    1. Candidates: every non-empty subset of the available sites when N ≤ 12; otherwise the
       prefixes of several rankings (power/RTT, throughput, power, single-site efficiency, and
       throughput with the previous set first).
    2. Screening, to keep the true simulation cheap: the ``screen`` best candidates by predicted
       efficiency as things stand (joins paid now) and the ``screen`` best as if every site had
       already joined (the steady state a set settles into), plus the previous set.
    3. Each survivor is run through the true simulator for ``horizon`` rounds as a fixed set.
       The horizon is what lets the planner pay a join (or skip a slow site) for the rounds
       that follow, and see a site's power falling before the round that suffers it; a
       one-round criterion sees neither.
    4. It picks the plan with the shortest estimated time to the target: the time at which the
       plan reaches it, or else the plan's time scaled by remaining over planned progress
       (equivalently, the highest true progress per second over the horizon).

    Receding horizon, re-planned when something changes: a new plan is made when the trace
    moves to a new interval (power changed), when the set that actually ran differs from the
    plan (a site dropped out), and at least every ``replan_every`` rounds; in between the
    planner follows its plan, which is exactly what the plan assumed. This keeps it affordable
    (a ``horizon``-round rollout per plan) without changing its decisions much.

    It knows future power but not the jitter, so it is a strong reference rather than an exact
    optimum; on the default scenario its mean TTA is below MyopicOptimal's.
    """

    name = "Clairvoyant"

    def __init__(
        self, horizon: int = 32, screen: int = 8, replan_every: int = 8, max_exhaustive: int = 12
    ) -> None:
        super().__init__()
        if min(horizon, screen, replan_every) < 1:
            raise ValueError(
                f"Clairvoyant: horizon={horizon}, screen={screen} and replan_every={replan_every} "
                "must all be >= 1"
            )
        self.horizon = horizon
        self.screen = screen
        self.replan_every = replan_every
        self.max_exhaustive = max_exhaustive
        self._plan: tuple[np.ndarray, int, int] | None = None  # (mask, trace row, rounds used)

    def reset(self, env: Any) -> None:
        super().reset(env)
        self._plan = None

    def candidates(self, now: Now) -> np.ndarray:
        """(M, N) bool candidate sets, each a non-empty subset of the available sites."""
        n = now.params.n_sites
        idx = np.flatnonzero(now.available)
        if idx.shape[0] <= self.max_exhaustive:
            sub = subset_matrix(idx.shape[0])
            masks = np.zeros((sub.shape[0], n), dtype=bool)
            masks[:, idx] = sub
            return masks
        single = self.env.predict_round(np.eye(n, dtype=bool)).efficiency
        prev = now.state.prev_selected[0] & now.available
        scores = (
            now.power_w / np.maximum(now.params.rtt_s, _RTT_FLOOR_S),
            now.rate,
            now.power_w,
            single,
            now.rate + prev * (now.rate.max() + 1.0),
        )
        rows = [prefix_masks(rank_available(s, now.available))[: idx.shape[0]] for s in scores]
        return np.unique(np.concatenate(rows), axis=0)

    def shortlist(self, now: Now, masks: np.ndarray) -> np.ndarray:
        """The candidates worth simulating (step 2 of the class docstring)."""
        prev = now.state.prev_selected[0] & now.available
        if prev.any():
            masks = np.concatenate([masks, prev[None, :]])
        if masks.shape[0] <= 2 * self.screen + 1:
            return masks
        joined = dataclasses.replace(now.state, prev_selected=now.available[None, :])
        as_is = _efficiency(self.env, masks)
        settled = core.predict_round(now.params, joined, masks[None]).efficiency[0]
        keep = np.concatenate(
            [np.argsort(-as_is, kind="stable")[: self.screen],
             np.argsort(-settled, kind="stable")[: self.screen]]
        )  # fmt: skip
        if prev.any():
            keep = np.append(keep, masks.shape[0] - 1)
        return masks[np.unique(keep)]

    def act(self, obs: Any, info: dict[str, Any]) -> np.ndarray:
        now = Now.of(self.env)
        if self._plan is not None:
            mask, row, used = self._plan
            ran_as_planned = np.array_equal(now.state.prev_selected[0], mask.astype(bool))
            if used < self.replan_every and row == now.row and ran_as_planned:
                self._plan = (mask, row, used + 1)
                return mask.copy()
        mask = self.plan(now)
        self._plan = (mask, now.row, 1)
        return mask.copy()

    def plan(self, now: Now) -> np.ndarray:
        """The best set by true rollouts from the current state (steps 1-4 above)."""
        p, n = now.params, now.params.n_sites
        if not now.available.any():
            return np.zeros(n, dtype=np.int8)
        plans = self.shortlist(now, self.candidates(now))
        m = plans.shape[0]
        p0 = float(now.state.progress[0])
        need = core.progress_needed(p) - p0
        zeros = np.zeros((m, n + 1))
        state = _repeat_state(now.state, m)
        spent = np.zeros(m)
        reached_at = np.full(m, np.inf)
        for _ in range(self.horizon):
            result = core.step_round(p, state, plans, zeros)
            state = result.state
            spent = spent + result.round_time_s
            reached_at = np.where(
                np.isinf(reached_at) & (state.progress - p0 >= need), spent, reached_at
            )
            if np.isfinite(reached_at).all():
                break
        gained = state.progress - p0
        with np.errstate(divide="ignore", invalid="ignore"):
            extrapolated = np.where(gained > 0, spent * need / gained, np.inf)
        time_to_go = np.where(np.isfinite(reached_at), reached_at, extrapolated)
        return plans[int(np.argmin(time_to_go))].astype(np.int8)


# --------------------------------------------------------------------------- trained agents


class SB3Policy(Policy):
    """A saved Stable-Baselines3 agent behind the same interface as the hand-coded policies.

    For MaskablePPO the env's current ``action_masks()`` are passed, as during training.
    """

    def __init__(self, model: Any, name: str, deterministic: bool = True) -> None:
        super().__init__()
        self.model = model
        self.name = name
        self.deterministic = deterministic
        self.maskable = "action_masks" in inspect.signature(model.predict).parameters

    def act(self, obs: Any, info: dict[str, Any]) -> np.ndarray:
        extra = {"action_masks": self.env.action_masks()} if self.maskable else {}
        action, _ = self.model.predict(obs, deterministic=self.deterministic, **extra)
        return (np.asarray(action).reshape(-1) > 0.5).astype(np.int8)


# --------------------------------------------------------------------------- registry


def _myopic(n_sites: int, seed: int) -> Policy:
    if n_sites > MAX_EXHAUSTIVE_SITES:
        raise ValueError(
            f"MyopicOptimal supports N <= {MAX_EXHAUSTIVE_SITES} sites; this scenario has {n_sites}"
        )
    return MyopicOptimal()


POLICIES: dict[str, Callable[..., Policy]] = {
    "PowerTrip": lambda n_sites, seed: PowerTrip(),
    "AllSites": lambda n_sites, seed: AllSites(),
    "RandomK": lambda n_sites, seed: RandomK(max(1, n_sites // 2), seed),
    "OortLike": lambda n_sites, seed: OortLike(seed),
    "MyopicOptimal": _myopic,
    "Clairvoyant": lambda n_sites, seed: Clairvoyant(),
}
"""Fixed-name policies: ``factory(n_sites, seed) -> Policy``. ``RandomK`` takes N // 2 sites."""

SIZED: dict[str, Callable[[int, int], Policy]] = {
    "TopPower": lambda k, seed: TopPower(k),
    "Nearest": lambda k, seed: Nearest(k),
    "FastestK": lambda k, seed: FastestK(k),
    "RandomK": lambda k, seed: _named(RandomK(k, seed), f"RandomK-{k}"),
}
"""Policies named ``<family>-<k>`` for 1 ≤ k ≤ N, e.g. ``TopPower-3``."""

_SIZED_NAME = re.compile(r"^(?P<family>[A-Za-z]+)-(?P<k>\d+)$")


def _named(policy: Policy, name: str) -> Policy:
    policy.name = name
    return policy


def policy_names(n_sites: int) -> list[str]:
    """Every valid policy name for a scenario of ``n_sites`` sites."""
    names = [name for name in POLICIES if name != "MyopicOptimal" or n_sites <= 16]
    for family in SIZED:
        names.extend(f"{family}-{k}" for k in range(1, n_sites + 1))
    return names


def _describe_valid(n_sites: int) -> str:
    fixed = [name for name in POLICIES if name != "MyopicOptimal" or n_sites <= 16]
    sized = [f"{family}-k" for family in SIZED]
    return f"{', '.join(fixed)}, and {', '.join(sized)} with 1 <= k <= {n_sites}"


def make_policy(name: str, n_sites: int, seed: int = 0) -> Policy:
    """Build the policy called ``name`` for a scenario with ``n_sites`` sites.

    Raises ``ValueError`` naming every valid choice when ``name`` is unknown or its k is out of
    range.
    """
    if name in POLICIES:
        return POLICIES[name](n_sites=n_sites, seed=seed)
    match = _SIZED_NAME.match(name)
    if match and match["family"] in SIZED:
        k = int(match["k"])
        if 1 <= k <= n_sites:
            return SIZED[match["family"]](k, seed)
        raise ValueError(
            f"policy {name!r}: k = {k} is out of range; this scenario has {n_sites} sites, so "
            f"1 <= k <= {n_sites}"
        )
    raise ValueError(f"unknown policy {name!r}; valid names: {_describe_valid(n_sites)}")


def default_policy_names(n_sites: int) -> list[str]:
    """What ``--policies all`` runs: PowerTrip, the baselines and the references."""
    names = ["PowerTrip", "AllSites", "RandomK"]
    names += [f"TopPower-{k}" for k in (1, 2, 4) if k <= n_sites]
    names += [f"Nearest-{k}" for k in (2, 4) if k <= n_sites]
    names += [f"FastestK-{k}" for k in (4,) if k <= n_sites]
    names += ["OortLike"]
    if n_sites <= MAX_EXHAUSTIVE_SITES:
        names.append("MyopicOptimal")
    names.append("Clairvoyant")
    return names
