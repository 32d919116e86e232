"""Rewards as small objects: ``reward_mode`` names one, or is one.

A reward is a function of a simulated round (``dynamics.RoundResult``: the accuracy gained,
the round's time, its energy, ...) and the scenario's constants (``dynamics.SimParams``),
applied to the whole batch at once, so the single and the vector env share it. ``ExcessGain``
and ``GainRate`` are the two the environment documents; a user's own is a subclass with a
``name`` and a ``__call__``, passed as ``gym.make(ID, reward_mode=MyReward())``.
"""

from __future__ import annotations

from typing import ClassVar

import numpy as np

from powertrip_env import dynamics


class RewardFn:
    """A reward of a round for every episode of a batch: ``fn(params, result) -> (B,) floats``.

    Both environments call it, the single one with its batch of one, so a reward is computed
    one way whichever env runs it. ``column`` names the simulator's record column a built-in
    reward is computed into (the kernel writes both documented rewards every round), so calling
    one costs a copy of that column; a user's reward leaves it None and overrides ``__call__``.
    """

    name = "reward"
    column: int | None = None
    # the names of ``terms``' keys, which the envs report from reset on (0 before any round),
    # so every info has the same keys
    term_names: tuple[str, ...] = ()
    # a built-in reward's terms as the kernel's record columns, by name (``term_names``' order)
    term_columns: ClassVar[dict[str, int]] = {}

    def __call__(self, params: dynamics.SimParams, result: dynamics.RoundResult) -> np.ndarray:
        if self.column is None:
            raise NotImplementedError
        return result.record[:, self.column].copy()

    def terms(
        self, params: dynamics.SimParams, result: dynamics.RoundResult
    ) -> dict[str, np.ndarray]:
        """The reward's terms, by name, each (B,): they sum to the reward. The envs report each
        in ``info`` as ``reward_<name>``, so a user can weigh them anew; a reward of one term
        reports none."""
        return {name: result.record[:, col].copy() for name, col in self.term_columns.items()}

    def evaluate(
        self, params: dynamics.SimParams, result: dynamics.RoundResult
    ) -> tuple[np.ndarray, dict[str, np.ndarray]]:
        """The reward and its terms in one call, as the envs ask for them each step; a reward
        of several terms overrides it to compute them once."""
        return self(params, result), self.terms(params, result)

    def check(self, params: dynamics.SimParams, where: str) -> None:
        """Refuse a scenario this reward cannot be computed on (``where`` names it)."""

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


class ExcessGain(RewardFn):
    """``(Δa − ρ_ref·T_r) / (a* − a0)`` with ``ρ_ref = (a* − a0) / H_ref``: the accuracy gained
    minus what the reference rate gains in the same time. Its sum over a successful episode is
    exactly ``1 − TTA/H_ref``, so maximising the return minimises the time to accuracy
    (computed by ``dynamics.learning._rewards``)."""

    name = "excess_gain"
    column = dynamics.RECORD_FIELDS.index("excess_gain")


class GainRate(RewardFn):
    """``Δa / (a* − a0) · H_ref / T_r``: the literal gain per unit time. It favours many short
    rounds over a short time to accuracy and is kept for comparison; 0 for a round of no time
    (only an episode already at its budget has one, as the vector env's restarting rows do)
    (computed by ``dynamics.learning._rewards``)."""

    name = "gain_rate"
    column = dynamics.RECORD_FIELDS.index("gain_rate")


class CarbonCost(RewardFn):
    """Reach the target before the deadline with the least grid carbon: per round
    ``−carbon_kg / C_ref``, and ``−1`` in the round that ends the episode without reaching the
    target (the deadline is the scenario's time budget, so running out of it is missing it).

    The formulation of carbon-aware schedulers with a completion deadline (Wiesner et al.,
    "Let's Wait Awhile", Middleware '21; Hanafy et al., CarbonScaler): emissions are the cost,
    the deadline a constraint, here priced at ``C_ref`` = ``[episode] carbon_ref_kg`` so the
    return is one number, ``−(carbon_kg / C_ref + missed)``. ``info`` reports the two terms,
    ``reward_carbon`` and ``reward_deadline``, as Safety-Gymnasium reports a cost beside the
    reward, so a user can price a miss differently or treat it as a constraint. Needs a
    scenario with a carbon intensity file and ``carbon_ref_kg`` (the carbon tasks). The kernel
    computes the terms and their sum into the round's record (``dynamics.learning._rewards``),
    as it does the time rewards."""

    name = "carbon"
    column = dynamics.RECORD_FIELDS.index("carbon_reward")
    term_columns: ClassVar[dict[str, int]] = {
        "carbon": dynamics.RECORD_FIELDS.index("carbon_term"),
        "deadline": dynamics.RECORD_FIELDS.index("deadline_term"),
    }
    term_names = tuple(term_columns)

    def check(self, params: dynamics.SimParams, where: str) -> None:
        if not params.carbon or params.carbon_ref_kg <= 0.0:
            raise ValueError(
                f"reward_mode='carbon' on {where}: the carbon objective needs a scenario with "
                "a carbon intensity file ([trace] carbon_file) and [episode] carbon_ref_kg > 0 "
                f"(this one has carbon_file {'set' if params.carbon else 'unset'} and "
                f"carbon_ref_kg = {params.carbon_ref_kg}); the carbon tasks have both"
            )


REWARDS: dict[str, RewardFn] = {fn.name: fn for fn in (ExcessGain(), GainRate(), CarbonCost())}

SHAPINGS = ("progress",)
"""The potentials ``Shaped`` adds (``shaping=`` of the envs)."""


class Shaped(RewardFn):
    """``base`` plus a potential-based shaping term: ``Φ(s') − Φ(s)`` each round, with
    ``Φ(s) = p − e / T`` (``shaping="progress"``): ``p`` the accuracy's share of the way from
    ``a0`` to the target, ``e`` the time since the episode started and ``T`` its time budget (a
    carbon task's deadline), and ``Φ = 0`` in the state that ends the episode.

    A round that gains more than the deadline's pace asks earns, an idle one pays for its time,
    so a learner meets the deadline's signal every round rather than once at a miss. The terms
    over a whole episode sum to ``−Φ(s0) = 0``, so the return, and the policies that maximise
    it, are the objective's (Ng, Harada and Russell, ICML '99, for an undiscounted episode; a
    learner that discounts by γ < 1 meets the shaping slightly unevenly, as their γΦ(s') − Φ(s)
    form says). ``info`` reports it as ``reward_shaping`` beside ``base``'s terms (a base of one
    term reports that term under its name), so the objective can be read apart from it."""

    _DELTA_ACC = dynamics.RECORD_FIELDS.index("delta_accuracy")
    _ROUND_S = dynamics.RECORD_FIELDS.index("round_time_s")

    def __init__(self, base: RewardFn, shaping: str) -> None:
        if shaping not in SHAPINGS:
            raise ValueError(
                f"shaping={shaping!r} is not supported; allowed: "
                f"{', '.join(map(repr, SHAPINGS))} or None"
            )
        self.base = base
        self.shaping = shaping
        self.name = base.name
        self._base_terms = base.term_names or (base.name,)
        self.term_names = (*self._base_terms, "shaping")

    def __repr__(self) -> str:
        return f"Shaped({self.base!r}, shaping={self.shaping!r})"

    def __call__(self, params: dynamics.SimParams, result: dynamics.RoundResult) -> np.ndarray:
        return self.evaluate(params, result)[0]

    def terms(
        self, params: dynamics.SimParams, result: dynamics.RoundResult
    ) -> dict[str, np.ndarray]:
        return self.evaluate(params, result)[1]

    def evaluate(
        self, params: dynamics.SimParams, result: dynamics.RoundResult
    ) -> tuple[np.ndarray, dict[str, np.ndarray]]:
        reward, parts = self.base.evaluate(params, result)
        parts = dict(parts) if self.base.term_names else {self.base.name: reward}
        shaping = self.potential(params, result, after=True) - self.potential(
            params, result, after=False
        )
        parts["shaping"] = shaping
        return reward + shaping, parts

    @classmethod
    def potential(
        cls, params: dynamics.SimParams, result: dynamics.RoundResult, *, after: bool
    ) -> np.ndarray:
        """``Φ`` of the state after the round (0 where it ended the episode) or before it."""
        state, record = result.state, result.record
        reached = np.minimum(state.accuracy, params.a_target) - params.a0
        elapsed = state.time_s - state.start_s
        if not after:  # the round's gain and time, taken back
            reached = reached - record[:, cls._DELTA_ACC]
            elapsed = elapsed - record[:, cls._ROUND_S]
        phi = reached / params.span - elapsed / state.budget_s
        if after:
            phi = np.where(result.terminated | result.truncated, 0.0, phi)
        return phi

    def check(self, params: dynamics.SimParams, where: str) -> None:
        self.base.check(params, where)


def reward_fn(reward_mode: str | RewardFn, shaping: str | None = None) -> RewardFn:
    """The ``reward_mode`` argument of the envs as a ``RewardFn``: a name or an instance; with
    ``shaping``, that reward ``Shaped`` by the potential it names."""
    if shaping is not None:
        return Shaped(reward_fn(reward_mode), shaping)
    if isinstance(reward_mode, RewardFn):
        return reward_mode
    if isinstance(reward_mode, str) and reward_mode in REWARDS:
        return REWARDS[reward_mode]
    raise ValueError(
        f"reward_mode={reward_mode!r} is not supported; allowed: {', '.join(REWARDS)} or a "
        "powertrip_env.rewards.RewardFn"
    )
