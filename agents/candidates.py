"""Actions over a few candidate site sets, built each round from ``predict_round``.

A per-site action space asks the agent to find, among 2^N − 1 sets, one whose round is short
and whose sites will stay: it has to learn from scratch what ``predict_round`` already knows.
``CandidateSets`` hands the agent that knowledge instead and asks only the question no
one-round prediction answers: how long will the sites chosen now stay chosen? A site that sat
out the last round pays a join (starting a worker and fetching the training state, minutes on
the flagship) before it trains. Charged to one round, the join makes every absent site look
unprofitable (``MyopicOptimal`` re-selects one or two sites every round and pays joins again
and again); left out, it makes every set look free to change (PowerTrip's steady-state rule).
The right charge is the join spread over the rounds the set will be kept, which depends on
where the power is going: a horizon, and choosing it is the agent's job.

Each round, a pool of at most 4m + 1 sets of the m available sites (the prefixes of three
rankings, the current set with each site added or removed, and the current set) is predicted
twice in two vectorised calls, with and without joins. Slot 0 of the action is the current set
("keep"); slot 1 + j is the pool's best set with the joins spread over ``HORIZONS[j]`` rounds;
the last slot is the best at steady state (joins ignored). The cost grows with N, not 2^N, so
it runs on any catalogue, 32 sites and more, where ``MyopicOptimal`` cannot.

The observation describes each slot's set with features that do not depend on N or on the
job's scale (ratios to the pool's best, shares, overlaps, the forecast's trend over the
slot's sites), so one model acts on any catalogue. Only what is known now is read:
``decision_view()`` (power now, the forecast issued now, who is joined) and ``predict_round``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from baselines.base import Policy
from baselines.models import ActionInterface, register_action_interface

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
N_SLOTS = 2 + len(HORIZONS) + len(STICKY_HORIZONS)  # keep, horizons, steady state, sticky
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


@dataclass(frozen=True)
class Candidates:
    """The sets the agent chooses among this round and what it is shown about them."""

    masks: np.ndarray  # (N_SLOTS, N) bool; slot 0 keeps the current set
    features: np.ndarray  # (N_FEATURES,) float32


def _pool(now: Any) -> np.ndarray:
    """(M, N) bool: the sets worth predicting, without enumerating 2^m of them."""
    available = now.available
    current = now.joined & available
    idx = np.flatnonzero(available)
    m, n = idx.size, now.n_sites
    rankings = (
        now.power_w / now.exchange_s,  # PowerTrip's order
        now.rate,  # the fastest first
        now.rate * (1.0 + 10.0 * current),  # the joined sites first, then the fastest
    )
    pool = np.zeros((3 * m + m + 1, n), dtype=bool)
    prefixes = np.tri(m, dtype=bool)  # row i: the first i + 1 of a ranking
    for r, score in enumerate(rankings):
        order = idx[np.argsort(-score[idx], kind="stable")]
        pool[r * m : (r + 1) * m, order] = prefixes
    flips = pool[3 * m : 4 * m]
    flips[:] = current
    flips[np.arange(m), idx] ^= True
    pool[4 * m] = current
    return pool[pool.any(axis=1)]


def _ratio(values: np.ndarray) -> np.ndarray:
    best = values.max(initial=0.0)
    return values / best if best > 0 else np.zeros_like(values)


def build(env: Any) -> Candidates:
    """The candidates of the unwrapped env ``env`` (a ``PowerTripEnv``) for the coming round."""
    now = env.decision_view()
    n = now.n_sites
    current = now.joined & now.available
    masks = np.zeros((N_SLOTS, n), dtype=bool)
    slot_features = np.zeros((N_SLOTS, len(SLOT_FEATURES)), dtype=np.float64)
    global_features = np.array(
        [
            now.progress,
            float(current.any()),
            now.available.sum() / n,
            current.sum() / n,
            np.log1p(now.last_round_s / 600.0),
        ]
    )
    if now.available.any():
        pool = _pool(now)
        full = env.predict_round(pool)
        steady = env.predict_round(pool, steady_state=True)
        t_full = np.asarray(full.round_time_s, dtype=np.float64)
        t_steady = np.asarray(steady.round_time_s, dtype=np.float64)
        gain = np.asarray(full.delta_progress, dtype=np.float64)
        join_s = np.maximum(t_full - t_steady, 0.0)
        with np.errstate(divide="ignore", invalid="ignore"):

            def efficiency(h: float) -> np.ndarray:
                t = t_steady + join_s / h
                return np.where(t > 0, gain / t, 0.0)

            picks = [int(np.argmax(efficiency(h))) for h in (*HORIZONS, np.inf)]
            keep = (
                int(np.flatnonzero((pool == current).all(axis=1))[0]) if current.any() else picks[0]
            )
            for h in STICKY_HORIZONS:
                eff = efficiency(h)
                best = int(np.argmax(eff))
                picks.append(keep if eff[best] < (1.0 + STICKY_MARGIN) * eff[keep] else best)
        rows = np.array([keep, *picks])
        masks[:] = pool[rows]
        times = (t_full, t_steady, join_s)
        slot_features[:] = _describe(now, pool, full, steady, times, current, keep)[rows]
    features = np.concatenate([slot_features.ravel(), global_features]).astype(np.float32)
    return Candidates(masks, np.clip(features, -10.0, 10.0))


def _describe(
    now: Any,
    pool: np.ndarray,
    full: Any,
    steady: Any,
    times: tuple[np.ndarray, np.ndarray, np.ndarray],
    current: np.ndarray,
    keep: int,
) -> np.ndarray:
    """(M, len(SLOT_FEATURES)): each pooled set in the terms of ``SLOT_FEATURES``; ``times``
    are ``build``'s round times with and without joins and their difference."""
    t_full, t_steady, join_s = times
    size = pool.sum(axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        eff_full = np.where(t_full > 0, full.delta_progress / t_full, 0.0)
        eff_steady = np.where(t_steady > 0, steady.delta_progress / t_steady, 0.0)
        t_ref = t_steady[int(np.argmax(eff_steady))]
        log_time = np.log(np.where(t_full > 0, t_full / t_ref, 1.0))
        join_share = np.where(t_full > 0, join_s / t_full, 0.0)
        joining = (pool & ~now.joined).sum(axis=1) / np.maximum(size, 1)
        union = (pool | current).sum(axis=1)
        overlap = np.where(union > 0, (pool & current).sum(axis=1) / union, 0.0)
        power = np.where(now.available, now.power_w, 0.0)
        coming = now.forecast_power_w.mean(axis=0)
        trend = np.where(
            pool @ power > 0, (pool @ coming) / (pool @ power), 0.0
        )  # > 1: the set's power is rising
        low = np.where(power > 0, now.forecast_power_w.min(axis=0) / power, 0.0)
        lowest = np.where(pool, low[None, :], np.inf).min(axis=1)
        eff_8 = full.delta_progress / (t_steady + join_s / 8.0)
        vs_keep_8 = _log_ratio(eff_8, eff_8[keep], current.any())
        vs_keep_steady = _log_ratio(eff_steady, eff_steady[keep], current.any())
    return np.column_stack(
        [
            _ratio(eff_full),
            _ratio(eff_steady),
            _ratio(np.asarray(full.delta_progress, dtype=np.float64)),
            log_time,
            join_share,
            size / now.n_sites,
            joining,
            overlap,
            np.minimum(trend, 3.0),
            np.minimum(lowest, 1.0),
            vs_keep_8,
            vs_keep_steady,
        ]
    )


def _log_ratio(values: np.ndarray, reference: float, has_reference: bool) -> np.ndarray:
    """log(values / reference) in [-3, 3]; 0 where there is nothing to compare with."""
    if not has_reference or not reference > 0:
        return np.zeros_like(values)
    with np.errstate(divide="ignore", invalid="ignore"):
        out = np.log(np.maximum(values, 0.0) / reference)
    return np.clip(np.nan_to_num(out, nan=-3.0, neginf=-3.0, posinf=3.0), -3.0, 3.0)


def _as_action(env: gym.Env, mask: np.ndarray) -> np.ndarray:
    """``mask`` of the N real sites as ``env``'s action: int8, zeros over ``max_sites``' padding."""
    action = np.zeros(env.action_space.shape, dtype=np.int8)
    action[: mask.shape[0]] = mask
    return action


class CandidateSets(gym.Wrapper, gym.utils.RecordConstructorArgs):
    """A ``PowerTripEnv`` whose action is one of ``N_SLOTS`` candidate sets (``build``).

    The observation is the candidates' ``features``; the reward, termination and ``info`` are
    the wrapped env's. ``candidates`` holds this round's sets, so a caller can see what each
    action would select.
    """

    def __init__(self, env: gym.Env) -> None:
        gym.utils.RecordConstructorArgs.__init__(self)
        gym.Wrapper.__init__(self, env)
        self.action_space = spaces.Discrete(N_SLOTS)
        self.observation_space = spaces.Box(-10.0, 10.0, (N_FEATURES,), dtype=np.float32)
        self.candidates: Candidates | None = None

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[np.ndarray, dict[str, Any]]:
        _, info = self.env.reset(seed=seed, options=options)
        self.candidates = build(self.env.unwrapped)
        return self.candidates.features, info

    def step(self, action: Any) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        if self.candidates is None:
            raise RuntimeError("call reset() first")
        if not self.action_space.contains(np.int64(np.asarray(action).reshape(()))):
            raise ValueError(f"action={action!r}: expected an integer in [0, {N_SLOTS})")
        mask = self.candidates.masks[int(np.asarray(action).reshape(()))]
        _, reward, terminated, truncated, info = self.env.step(_as_action(self.env, mask))
        self.candidates = build(self.env.unwrapped)
        return self.candidates.features, reward, terminated, truncated, info

    def action_masks(self) -> np.ndarray:
        """Every slot may be chosen (a slot repeats another when the pool is small); for
        MaskablePPO, which asks every env for masks."""
        return np.ones(N_SLOTS, dtype=bool)


class CandidatePolicy(Policy):
    """A model trained on ``CandidateSets`` behind the baselines' policy interface.

    Deterministic play of an ``MlpPolicy`` (what ``train_agent.py`` trains) runs the actor's
    layers in numpy (``numpy_actor``): SB3's ``predict`` spends some 20 times longer on tensors,
    modes and a distribution object than on the three small products, and a decision's cost
    is what this agent is measured on against ``MyopicOptimal``. Other networks go through
    ``predict``.
    """

    def __init__(self, model: Any, name: str, deterministic: bool = True) -> None:
        super().__init__()
        self.model = model
        self.name = name
        self.deterministic = deterministic
        policy = getattr(model, "policy", None)
        self.actor = numpy_actor(policy) if deterministic and policy is not None else None

    def act(self, obs: Any, info: dict[str, Any]) -> np.ndarray:
        candidates = build(self.env)
        if self.actor is not None:
            slot = self.actor(candidates.features)
        else:
            action, _ = self.model.predict(candidates.features, deterministic=self.deterministic)
            slot = int(np.asarray(action).reshape(()))
        mask = candidates.masks[slot]
        return _as_action(self.env, mask)


def numpy_actor(policy: Any) -> Callable[[np.ndarray], int] | None:
    """The most likely action of an SB3 ``ActorCriticPolicy`` over a flat observation with a
    categorical action, computed in numpy; None for any other network (then use ``predict``)."""
    from stable_baselines3.common.distributions import CategoricalDistribution
    from stable_baselines3.common.torch_layers import FlattenExtractor
    from torch import nn

    if not isinstance(getattr(policy, "action_dist", None), CategoricalDistribution):
        return None
    if not isinstance(getattr(policy, "pi_features_extractor", None), FlattenExtractor):
        return None
    if getattr(policy, "normalize_images", False) and len(policy.observation_space.shape) > 1:
        return None
    steps: list[tuple[np.ndarray, np.ndarray] | Callable[[np.ndarray], np.ndarray]] = []
    for module in [*policy.mlp_extractor.policy_net, policy.action_net]:
        if isinstance(module, nn.Linear):
            weight = module.weight.detach().cpu().numpy().T.copy()
            steps.append((weight, module.bias.detach().cpu().numpy().copy()))
        elif isinstance(module, nn.Tanh):
            steps.append(np.tanh)
        elif isinstance(module, nn.ReLU):
            steps.append(lambda x: np.maximum(x, 0.0))
        else:
            return None

    def actor(features: np.ndarray) -> int:
        x = np.asarray(features, dtype=np.float32)
        for step in steps:
            x = x @ step[0] + step[1] if isinstance(step, tuple) else step(x)
        return int(np.argmax(x))

    return actor


# ``python -m baselines.evaluate --model`` (and ``pretrained``) plays a saved candidate agent.
register_action_interface(ActionInterface("candidates", CandidateSets, CandidatePolicy))
