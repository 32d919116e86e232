"""The candidate-set agent on the carbon track: its action is one of a few site sets that the
carbon rules would consider this round, and its observation says what each would cost.

The time slots (``powertrip_env.agents.candidates``) are ranked by how fast a set trains; on a
carbon task the question is which set, or none, keeps the deadline with the least carbon. The
best deployable rule there, ``CarbonGreedy``, plays the cleanest prefix of the sites ranked by
the grid carbon of a sample now that is on time at its predicted pace. It never waits and never
looks ahead, though the grid's intensity and the sun move by the hour
(docs/carbon.md): its choices are the ones an agent can improve on by seeing the forecast.

The slots (``SLOT_NAMES``): idle (train nowhere this round), CarbonGreedy's pick, the current
set, the fastest prefix, and the prefixes of the cleanest-sample ranking of 1 to
``MAX_PREFIXES`` sites. Each is described by ``SLOT_FEATURES``: what it costs per progress now
against CarbonGreedy's pick, whether it finishes in time at its pace, how its grams per sample
move over the coming hours on the forecast issued now (``env.forecast_rows``: the power
forecast, the PV forecast and the week-seasonal intensity), its joins. Everything is read from
``decision_view``, ``predict_round`` and the forecast, none of it a future actual. The features
do not depend on N or on the job's scale, so one model acts on any catalogue of at most
``MAX_PREFIXES`` available sites (a prefix beyond them is the whole set, marked not valid).

Built in Python on the env's what-ifs (some 0.6 ms a decision, most of it the forecast), not in
the compiled kernel as the time slots are: the carbon track is one catalogue of six sites.
"""

from __future__ import annotations

import itertools
from typing import Any, NamedTuple

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from powertrip_env.agents.candidates import _as_action, chosen_mask
from powertrip_env.baselines.base import Policy
from powertrip_env.baselines.carbon import (
    TUNED_RESERVE,
    available_prefixes,
    finish_s,
    grams_per_progress,
    greedy_choice,
    grid_g_per_s,
    grid_g_per_sample,
    time_left_s,
)
from powertrip_env.harness.models.registry import ActionInterface, register_action_interface
from powertrip_env.units import per_kwh_to_per_j, s_to_h

MAX_PREFIXES = 8
SLOT_NAMES: tuple[str, ...] = (
    "idle",
    "CarbonGreedy's pick",
    "the current set",
    "the fastest prefix",
    *(f"the cleanest {k} site{'s' if k > 1 else ''}" for k in range(1, MAX_PREFIXES + 1)),
)
N_SLOTS = len(SLOT_NAMES)
IDLE, GREEDY, KEEP, FASTEST, PREFIX0 = range(5)
# Hours ahead over which the forecast's grams per sample are averaged (window edges).
WINDOWS_H: tuple[float, ...] = (0.0, 1.0, 3.0, 6.0, 12.0, 24.0)
SLOT_FEATURES: tuple[str, ...] = (
    "the slot is a set of its own (not a stand-in for a missing prefix)",
    "log of its grams per progress now over CarbonGreedy's pick's",
    "its time to the target at its predicted pace over the time left (after one idle round, "
    "for idle: the fastest prefix's)",
    "sites in the set over N",
    "share of the set's sites that must join",
    "overlap with the current set (Jaccard)",
    *(
        f"log of its forecast grams per sample {a:g}-{b:g} h ahead over now's"
        for a, b in itertools.pairwise(WINDOWS_H)
    ),
    "share of its powered GPUs' draw the PV covers now",
)
GLOBAL_FEATURES: tuple[str, ...] = (
    "progress towards the target",
    "time left to the deadline over the time budget",
    "the fastest prefix's time to the target over the time left",
    "grid carbon so far over carbon_ref_kg",
    "available sites over N",
    "log(1 + last round's length / 600 s)",
)
N_FEATURES = N_SLOTS * len(SLOT_FEATURES) + len(GLOBAL_FEATURES)
FEATURE_LIMIT = 10.0  # every feature is clipped to [-FEATURE_LIMIT, FEATURE_LIMIT]


class CarbonCandidates(NamedTuple):
    """One round's slots: ``masks`` (N_SLOTS, N) bool (slot 0, idle, selects nothing),
    ``valid`` (N_SLOTS,) bool and ``features`` (N_FEATURES,) float32."""

    masks: np.ndarray
    valid: np.ndarray
    features: np.ndarray


def _log_ratio(a: np.ndarray, b: np.ndarray | float) -> np.ndarray:
    """log(a / b), 0 where both are 0 and ±FEATURE_LIMIT where one is (clipped later)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        out = np.log(np.asarray(a, dtype=np.float64) / b)
    return np.nan_to_num(out, nan=0.0, posinf=FEATURE_LIMIT, neginf=-FEATURE_LIMIT)


def _forecast_windows(env: Any, masks: np.ndarray, clock_s: float) -> np.ndarray:
    """(K, W) each set's grid grams per sample averaged over ``WINDOWS_H``'s windows, on the
    rows the forecast issued now sees (rows past the deadline: the last one's)."""
    rows = env.forecast_rows()
    grams_s = per_kwh_to_per_j(np.maximum(rows.power_w - rows.pv_w, 0.0) * rows.grid_g_per_kwh)
    with np.errstate(divide="ignore", invalid="ignore"):
        per_sample = (grams_s @ masks.T) / (rows.rate @ masks.T)  # (R, K)
    per_sample = np.where(np.isfinite(per_sample), per_sample, np.nan)
    ahead_h = s_to_h(np.maximum(rows.start_s - clock_s, 0.0))  # row 0 holds the clock
    out = np.empty((masks.shape[0], len(WINDOWS_H) - 1))
    for w, (a, b) in enumerate(itertools.pairwise(WINDOWS_H)):
        inside = (ahead_h >= a) & (ahead_h < b)
        picked = per_sample[inside] if inside.any() else per_sample[-1:]
        with np.errstate(invalid="ignore"):
            out[:, w] = np.nanmean(picked, axis=0) if np.isfinite(picked).any() else np.nan
    return out


def build(env: Any) -> CarbonCandidates:
    """This round's carbon slots of the unwrapped env ``env`` (a carbon task's)."""
    with np.errstate(divide="ignore", invalid="ignore"):  # no time left, no pace: inf, clipped
        return _build(env)


def _build(env: Any) -> CarbonCandidates:
    now = env.decision_view()
    n = now.n_sites
    _, prefixes = available_prefixes(now, -grid_g_per_sample(now))
    k_avail = prefixes.shape[0]
    masks = np.zeros((N_SLOTS, n), dtype=bool)
    valid = np.zeros(N_SLOTS, dtype=bool)
    valid[IDLE] = True
    if k_avail == 0:  # nothing can train: every slot is idle
        return CarbonCandidates(masks, valid, np.zeros(N_FEATURES, dtype=np.float32))
    current = now.joined & now.available
    # every slot's set is a prefix or the current set: one what-if for them all
    known = np.vstack([prefixes, current[None]]) if current.any() else prefixes
    known_pace = env.predict_round(known, steady_state=True).efficiency
    pace = known_pace[:k_avail]
    finish = finish_s(now, pace)
    greedy = greedy_choice(now, prefixes, pace, TUNED_RESERVE)
    fastest = int(np.argmin(finish))
    # slots 1.. as rows of ``known``
    rows = np.array(
        [greedy, k_avail if current.any() else greedy, fastest]
        + [min(k, k_avail - 1) for k in range(MAX_PREFIXES)]
    )
    masks[1:] = known[rows]
    valid[[GREEDY, FASTEST]] = True
    valid[KEEP] = bool(current.any())
    valid[PREFIX0:] = np.arange(MAX_PREFIXES) < k_avail
    sets = masks[1:]
    set_pace = known_pace[rows]
    left = time_left_s(now, 0.0)
    slot = np.zeros((N_SLOTS, len(SLOT_FEATURES)))
    slot[:, 0] = valid
    per_progress = grams_per_progress(now, sets, set_pace)
    slot[1:, 1] = _log_ratio(per_progress, per_progress[GREEDY - 1])
    slot[1:, 2] = finish_s(now, set_pace) / left
    slot[IDLE, 2] = (finish[fastest] + now.interval_s) / left
    slot[1:, 3] = sets.sum(axis=1) / n
    size = np.maximum(sets.sum(axis=1), 1)
    slot[1:, 4] = (sets & ~now.joined).sum(axis=1) / size
    slot[1:, 5] = (sets & current).sum(axis=1) / np.maximum((sets | current).sum(axis=1), 1)
    ahead = _forecast_windows(env, sets, now.clock_s)
    per_sample_now = (sets @ grid_g_per_s(now)) / np.maximum(sets @ now.rate, 1e-30)
    slot[1:, 6 : 6 + ahead.shape[1]] = np.nan_to_num(_log_ratio(ahead, per_sample_now[:, None]))
    slot[IDLE, 6 : 6 + ahead.shape[1]] = slot[GREEDY, 6 : 6 + ahead.shape[1]]
    draw = sets @ now.power_w
    slot[1:, -1] = (sets @ np.minimum(now.pv_w, now.power_w)) / np.maximum(draw, 1e-30)
    budget = max(now.time_budget_s, 1e-9)
    glob = np.array(
        [
            now.progress,
            left / budget,
            finish[fastest] / left if left > 0 else FEATURE_LIMIT,
            now.carbon_kg / now.scenario.episode.carbon_ref_kg,
            k_avail / n,
            np.log1p(now.last_round_s / 600.0),
        ]
    )
    features = np.concatenate([slot.ravel(), glob])
    features = np.clip(np.nan_to_num(features, nan=0.0), -FEATURE_LIMIT, FEATURE_LIMIT)
    return CarbonCandidates(masks, valid, features.astype(np.float32))


class CarbonSlots(gym.Wrapper, gym.utils.RecordConstructorArgs):
    """A carbon task's ``PowerTripEnv`` whose action is one of ``N_SLOTS`` carbon slots
    (``build``). The observation is the slots' ``features``; reward, termination and ``info``
    are the wrapped env's; ``action_masks`` marks the slots that are sets of their own (a
    stand-in plays the largest prefix, so PPO without masks loses nothing by choosing it)."""

    def __init__(self, env: gym.Env) -> None:
        gym.utils.RecordConstructorArgs.__init__(self)
        gym.Wrapper.__init__(self, env)
        self.action_space = spaces.Discrete(N_SLOTS)
        self.observation_space = spaces.Box(
            -FEATURE_LIMIT, FEATURE_LIMIT, (N_FEATURES,), dtype=np.float32
        )
        self.candidates: CarbonCandidates | None = None

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[np.ndarray, dict[str, Any]]:
        _, info = self.env.reset(seed=seed, options=options)
        if not self.env.unwrapped.decision_view().carbon_known:
            raise ValueError(
                "CarbonSlots needs a carbon task (a scenario with a carbon intensity file, "
                "such as PowerTrip-Carbon-v2)"
            )
        self.candidates = build(self.env.unwrapped)
        return self.candidates.features, info

    def step(self, action: Any) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        if self.candidates is None:
            raise RuntimeError("call reset() first")
        mask = chosen_mask(self.candidates.masks, action)
        _, reward, terminated, truncated, info = self.env.step(_as_action(self.env, mask))
        self.candidates = build(self.env.unwrapped)
        return self.candidates.features, reward, terminated, truncated, info

    def action_masks(self) -> np.ndarray:
        """The slots that are sets of their own this round, for MaskablePPO."""
        if self.candidates is None:
            return np.ones(N_SLOTS, dtype=bool)
        return self.candidates.valid.copy()


class CarbonSlotPolicy(Policy):
    """A model trained on ``CarbonSlots`` behind the baselines' policy interface."""

    def __init__(self, model: Any, name: str, deterministic: bool = True) -> None:
        super().__init__()
        self.model, self.name, self.deterministic = model, name, deterministic

    def act(self, obs: Any, info: dict[str, Any]) -> np.ndarray:
        candidates = build(self.env)
        action, _ = self.model.predict(candidates.features, deterministic=self.deterministic)
        return _as_action(self.env, candidates.masks[int(np.asarray(action).reshape(()))])


# ``powertrip evaluate --model`` plays a saved carbon-slot agent.
register_action_interface(ActionInterface("carbon_slots", CarbonSlots, CarbonSlotPolicy))
