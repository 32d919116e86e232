"""Hand-coded site-selection policies behind one small interface
(``powertrip_env.baselines.base.Policy``).

A policy sees what an operator would know when a round starts: each site's power *now* (the
current trace row only), the power forecast issued now, the RTTs to the aggregator, the GPU
speeds, and the simulator's what-if ``env.predict_round(mask)``, which judges a round from that
forecast. Every policy here keeps to that. The clairvoyant references, which read the future on
purpose, are in ``baselines/references.py`` and say so in their names' documentation.

Usage (``powertrip_env.baselines.registry`` builds any policy or reference by name)::

    from powertrip_env.baselines.registry import make_policy

    policy = make_policy("PowerTrip", n_sites=env.unwrapped.n_sites, seed=0)
    obs, info = env.reset(seed=1)
    policy.reset(env)
    mask = policy.act(obs, info)  # (N,) int8 of 0/1

Policies draw no randomness from the environment: ``RandomK`` and ``OortLike`` own their
generators, so the episode's start time and jitter stream stay identical whichever policy runs
(the paired comparison of ``powertrip_env.harness.evaluation.evaluate`` relies on it).

"Available power" below means the power the job can actually draw at a site now: powered GPUs
times the per-GPU wall power ``p_g``. Headroom beyond the site's GPU count, or less than one
GPU's worth, cannot be turned into training, so it does not count.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from powertrip_env.baselines.base import (
    MAX_EXHAUSTIVE_SITES,
    Policy,
    _efficiency,
    _mask,
    first_peak,
    prefix_masks,
    rank_available,
    subset_matrix,
)
from powertrip_env.view import DecisionView

_RTT_FLOOR_S = 1e-4  # a hub co-located with a site may have RTT 0; keep power/RTT finite


# --------------------------------------------------------------------------- simple rules


class AllSites(Policy):
    """Every site that can power a GPU now: maximum power, maximum straggler and network risk."""

    name = "AllSites"

    def act(self, obs: Any, info: dict[str, Any]) -> np.ndarray:
        return self.env.decision_view().available.astype(np.int8)


class _TopK(Policy):
    """The k available sites with the highest ``score`` (fewer if fewer are available)."""

    label = "TopK"

    def __init__(self, k: int) -> None:
        super().__init__()
        if k < 1:
            raise ValueError(f"{self.label}: k={k} must be at least 1")
        self.k = int(k)
        self.name = f"{self.label}-{self.k}"

    def score(self, now: DecisionView) -> np.ndarray:
        raise NotImplementedError

    def act(self, obs: Any, info: dict[str, Any]) -> np.ndarray:
        now = self.env.decision_view()
        take = min(self.k, int(now.available.sum()))
        order = rank_available(self.score(now), now.available)
        return _mask(now.n_sites, order[:take])


class TopPower(_TopK):
    """The k sites with the most available power (powered GPUs × wall power per GPU).

    Power-only: ignores that a watt buys different throughput on different GPUs, and ignores
    latency, which is what PowerTrip's power-to-cost score adds.
    """

    label = "TopPower"

    def score(self, now: DecisionView) -> np.ndarray:
        return now.power_w


class Nearest(_TopK):
    """The k available sites with the smallest RTT to the aggregator: latency-only."""

    label = "Nearest"

    def score(self, now: DecisionView) -> np.ndarray:
        return -now.rtt_s


class FastestK(_TopK):
    """The k sites with the highest throughput now (powered GPUs × per-GPU samples/s).

    GPU-aware where TopPower is not: an H100 site beats a V100 site drawing the same power.
    """

    label = "FastestK"

    def score(self, now: DecisionView) -> np.ndarray:
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
        now = self.env.decision_view()
        idx = np.flatnonzero(now.available)
        take = min(self.k, idx.shape[0])
        return _mask(now.n_sites, self.rng.choice(idx, size=take, replace=False))


# --------------------------------------------------------------------------- PowerTrip


class PowerTrip(Policy):
    """The paper's dynamic greedy (Mehboob et al., SoCC '25), recomputed every round.

    1. Rank the available sites by power-to-cost: the power the site's GPUs can use now
       (powered GPUs × wall power per GPU) over the network cost it adds to a round
       (``DecisionView.exchange_s``: its round trips plus the transfer of its update over its
       link). The paper's abstract names the cost "network latency"; the latency a round pays
       is the largest RTT among its sites, so the RTT of the aggregator's own site to itself (a
       few milliseconds) is never what a round with a second site pays, and the cost floors it
       at the next site's. Dividing by that self-RTT instead ranks the hub's site first by
       7–120× whatever its GPUs, which ``PowerTripRTT`` keeps for comparison.
    2. Predict the efficiency ΔP/T_r (progress per second, ``predict_round``) of every prefix of
       that ranking, all N prefixes in one vectorised call.
    3. Keep adding sites while efficiency rises; stop at the first prefix whose successor does
       not improve it. That is the point where the next site's network cost and straggler risk
       cancel the power it brings.

    The prefixes are compared at their steady-state efficiency (``steady_state=True``): the
    round a set runs once its sites have joined, without the one-off join time. A rule that
    charged the join to a single round would find every absent site unprofitable in that round
    and, after one round without a site, never take it back, however much power it regains.
    The rule is greedy, not a search: a later prefix could be better still, and keeping that
    blind spot is what makes this the paper's heuristic rather than ``MyopicOptimal``.
    """

    name = "PowerTrip"

    def score(self, now: DecisionView) -> np.ndarray:
        return now.power_w / now.exchange_s

    def ranking(self, now: DecisionView) -> np.ndarray:
        return rank_available(self.score(now), now.available)

    def act(self, obs: Any, info: dict[str, Any]) -> np.ndarray:
        now = self.env.decision_view()
        n_avail = int(now.available.sum())
        if n_avail == 0:
            return np.zeros(now.n_sites, dtype=np.int8)
        order = self.ranking(now)
        eff = self.env.predict_round(prefix_masks(order), steady_state=True).efficiency
        return _mask(now.n_sites, order[: first_peak(eff, n_avail) + 1])


class PowerTripRTT(PowerTrip):
    """PowerTrip with the abstract's score read literally: available power over the RTT to the
    aggregator. The aggregator's own site, a few milliseconds from itself, then always ranks
    first; kept to show what that costs (docs/evaluation.md)."""

    name = "PowerTripRTT"

    def score(self, now: DecisionView) -> np.ndarray:
        return now.power_w / np.maximum(now.rtt_s, _RTT_FLOOR_S)


class FedZeroLike(PowerTrip):
    """Forecast-aware selection in the spirit of FedZero (Wiesner et al., e-Energy '24).

    FedZero picks the clients with the most forecast excess energy over the coming round. Here a
    site's score is its forecast usable power (the GPUs the forecast can power, at their wall
    power) averaged over the trace rows the coming round is expected to span, from the forecast
    issued now. The round is expected to last as long as the last one; before the first, as
    long as the quickest single site's predicted round. Sites about to lose their power score
    low, sites about to gain it high. How many sites: PowerTrip's stopping rule on the ranked
    prefixes. It reads forecasts, never future actuals.
    """

    name = "FedZeroLike"

    def ranking(self, now: DecisionView) -> np.ndarray:
        expected_s = now.last_round_s
        if expected_s <= 0.0 and now.available.any():
            alone = np.eye(now.n_sites, dtype=bool)[now.available]
            expected_s = float(self.env.predict_round(alone).round_time_s.min())
        horizon = now.forecast_power_w.shape[0]
        rows = min(max(math.ceil((now.into_row_s + expected_s) / now.interval_s), 1), horizon)
        score = now.forecast_power_w[:rows].mean(axis=0)
        return rank_available(score, now.available)


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

    def utility(self, now: DecisionView) -> np.ndarray:
        """(N,) utility of each site now; 0 for unavailable sites."""
        n = now.n_sites
        loss_sq = 1.0 + (1.0 - np.exp(-now.absent_rounds / now.coverage_tau_rounds))
        stat = now.data_share * np.sqrt(loss_sq)
        duration = self.env.predict_round(np.eye(n, dtype=bool)).round_time_s
        avail = now.available
        preferred = float(np.quantile(duration[avail], self.preferred_quantile))
        penalty = np.where(duration > preferred, (preferred / duration) ** self.alpha, 1.0)
        return np.where(avail, stat * penalty, 0.0)

    def epsilon(self, now: DecisionView) -> float:
        done = min(max(now.progress, 0.0), 1.0)
        return self.eps_start + (self.eps_end - self.eps_start) * done

    def act(self, obs: Any, info: dict[str, Any]) -> np.ndarray:
        now = self.env.decision_view()
        n, n_avail = now.n_sites, int(now.available.sum())
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

    def __init__(self, exhaustive_limit: int = MAX_EXHAUSTIVE_SITES) -> None:
        super().__init__()
        self.exhaustive_limit = exhaustive_limit  # not the env's max_sites (its padding)

    def reset(self, env: Any) -> None:
        n = env.unwrapped.decision_view().n_sites
        if n > self.exhaustive_limit:
            raise ValueError(
                f"MyopicOptimal enumerates all 2^N − 1 site sets and supports N <= "
                f"{self.exhaustive_limit}; this scenario has N = {n}"
            )
        super().reset(env)

    def act(self, obs: Any, info: dict[str, Any]) -> np.ndarray:
        now = self.env.decision_view()
        n = now.n_sites
        idx = np.flatnonzero(now.available)
        if idx.shape[0] == 0:
            return np.zeros(n, dtype=np.int8)
        sub = subset_matrix(idx.shape[0])
        masks = np.zeros((sub.shape[0], n), dtype=bool)
        masks[:, idx] = sub
        best = int(np.argmax(_efficiency(self.env, masks)))
        return masks[best].astype(np.int8)
