"""``PowerTripEnv``: the Gymnasium adapter over ``dynamics`` with a batch of one."""

from __future__ import annotations

import copy
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import gymnasium as gym
import numpy as np

from powertrip_env import dynamics
from powertrip_env.clairvoyant import Clairvoyant
from powertrip_env.dynamics.features import document_env
from powertrip_env.episodes import base_from
from powertrip_env.learners import Learner, is_surrogate, make_learner
from powertrip_env.options import EnvSetup, configure
from powertrip_env.rewards import RewardFn
from powertrip_env.scenario import Scenario
from powertrip_env.scenario.sampling import SiteSampler, as_sampler
from powertrip_env.view import DecisionView, decision_view


@dataclass(frozen=True, eq=False)
class EpisodeState:
    """Everything ``PowerTripEnv.set_state`` needs to continue an episode exactly: the kernel's
    state, the episode counter and seed base that the next ``reset()`` draws from, the
    generator, the catalogue (drawn ones differ per episode) and, under a real learner, the
    learner itself. Opaque to its users: taken by ``get_state``, given back to ``set_state``."""

    sim_state: dynamics.SimState | None
    setup: EnvSetup  # the catalogue, interface and episode starts the episode runs on
    base: int | None
    episode: int
    rng: dict[str, Any]  # np_random's bit-generator state
    history: tuple[tuple[float, float], ...]
    learner: Learner | None  # a copy, under a real learner only (the surrogate keeps none)


class PowerTripEnv(gym.Env):
    """
    ## Description

    Geo-distributed training under fluctuating power, after PowerTrip (Mehboob et al., SoCC '25).
    One model is trained across N datacenters whose available power follows real or synthetic
    traces. Every step is one synchronous training round: the agent chooses which sites take
    part. More sites bring more powered GPUs and a larger global batch, but each extra site
    adds network time (latency and contention at the aggregator), can be the straggler, pays a
    join cost (start and fetch the model) if it did not complete the previous round, and drops
    out of the round, its work lost, if its power fails before it finishes. The episode ends
    when the model reaches its target accuracy; the goal is the shortest time-to-accuracy
    (TTA). Every equation and parameter is in docs/model.md. `PowerTrip-v0` runs on real data:
    Google's 2019 PDU spare capacity in each site's local time plus Solcast 2022 solar output,
    with real solar forecasts; the other IDs run on a synthetic trace.

    ## Action Space

    `MultiBinary(N)` (default) or, with `action_mode="multidiscrete"`, `MultiDiscrete([2] * N)`:
    1 means the site takes part in this round. Sites that have no powered GPU now are left out
    and counted in `info["invalid_selections"]`; an empty set is an idle round (the clock moves
    one trace interval, nothing is learned, all sites are released). `action_masks()` returns
    the `(2N,)` mask that MaskablePPO expects. A malformed action raises `ValueError`.

    ## Observation Space

    `obs_mode="flat"` (default): a `Box` of `N * 15 + 6` float32, the per-site features in site
    order followed by the global ones. `obs_mode="dict"`: `{"sites": Box(N, 15), "global":
    Box(6)}` for permutation-invariant encoders.

    <observation table: powertrip_env.dynamics.features.env_table()>

    ## Rewards

    `reward_mode="excess_gain"` (default): `r = (Δa − ρ_ref · T_r) / (a* − a0)` with
    `ρ_ref = (a* − a0) / H_ref`: the accuracy gained in the round minus what the reference rate
    would have gained in the same wall-clock time. The return of a successful episode is
    exactly `1 − TTA / H_ref`, so maximising return minimises TTA.
    `reward_mode="gain_rate"`: the literal per-round efficiency `Δa / (a* − a0) · H_ref / T_r`.
    It rewards many short rounds rather than a short TTA and is kept for comparison.
    A `powertrip_env.rewards.RewardFn` instance sets a reward of one's own (a function of the
    round's result, for the whole batch).

    ## Starting State

    Accuracy a0 at a start time drawn uniformly from the rows of the split's days (`"train"`,
    `"test"`: the scenario's `train_days` and `test_days`; `"all"`), leaving room for a whole
    time budget; `options={"start_time": ...}` (seconds since the calendar's start, an ISO-8601
    string or a datetime) fixes it. No site took part in a previous round.

    ## Episode End

    1. Termination: the accuracy reaches the target a*.
    2. Truncation: the elapsed time reaches the scenario's time budget (a round that would end
       later is cut there and teaches nothing), or the number of rounds reaches `max_rounds`
       (registered as `max_episode_steps`).

    At the end `info["tta_h"]` is the elapsed hours on success and the time budget on failure.

    ## Info

    `reset` and every `step` return the same keys (`interface.INFO_KEYS`), each a numpy scalar
    (float64 or int64), a 0-d bool array (`idle`, `cut`, `success`: Gymnasium's vector envs
    stack np.bool_ scalars as objects, 0-d arrays as bool) or a per-site numpy array, so
    libraries that read info as arrays (TorchRL, Tianshou, vector envs) see one layout from the
    first call on. Keys about the last round are neutral after `reset` (0, False, none
    selected, `straggler` -1), and `tta_h` and `success` are 0.0 and False until the episode
    itself ends (a real TTA is > 0; a `TimeLimit` cut is not the episode's end). Names are not
    in info: the straggler's is `env.unwrapped.site_names[info["straggler"]]` when it is >= 0.
    README's "Quick start" says what each key means.

    | Key                                | dtype, shape  | After reset                 |
    |------------------------------------|---------------|-----------------------------|
    | `round_time_s`, `compute_s`,       | float64       | 0.0 (no round yet)          |
    | `comm_s`, `round_energy_kwh`       |               |                             |
    | `elapsed_s`, `energy_kwh`          | float64       | 0.0                         |
    | `start_time_s`, `trace_time`       | float64       | the episode's start         |
    | `accuracy`                         | float64       | a0 (or the learner's)       |
    | `n_selected`, `invalid_selections` | int64         | 0                           |
    | `rounds`                           | int64         | 0                           |
    | `straggler`                        | int64         | -1 (none; also when idle)   |
    | `idle`, `cut`                      | bool, 0-d     | False                       |
    | `selected`, `dropped`              | bool (N,)     | all False                   |
    | `powered_gpus`                     | int64 (N,)    | zeros                       |
    | `available`                        | bool (N,)     | sites with power now        |
    | `tta_h`, `success`                 | float64, bool | 0.0, False until the end    |
    |                                    | 0-d           |                             |

    ## Arguments

    ```python
    >>> import gymnasium as gym
    >>> import powertrip_env
    >>> env = gym.make("PowerTrip-v0")
    >>> env
    <TimeLimit<OrderEnforcing<PassiveEnvChecker<PowerTripEnv<PowerTrip-v0>>>>>
    >>> obs, info = env.reset(seed=0)
    >>> obs.shape
    (156,)
    >>> obs, reward, terminated, truncated, info = env.step(env.action_space.sample())

    ```

    | Parameter     | Type          | Default         | Description                                |
    |---------------|---------------|-----------------|--------------------------------------------|
    | `scenario`    | str, path     | `"default"`     | a named scenario or a user's TOML file;    |
    |               | or dict       |                 | or a portable scenario (by value)          |
    | `reward_mode` | str or        | `"excess_gain"` | `"excess_gain"`, `"gain_rate"` or a        |
    |               | RewardFn      |                 | `powertrip_env.rewards.RewardFn`           |
    | `obs_mode`    | str           | `"flat"`        | `"flat"` (Box) or `"dict"` (sites, global) |
    | `action_mode` | str           | `"multibinary"` | `"multibinary"` or `"multidiscrete"`       |
    | `split`       | str           | `"train"`       | days episodes start in: train, test, all   |
    | `jitter`      | bool or float | `True`          | time noise: scenario's σ, none, or a σ     |
    | `render_mode` | str or None   | `None`          | `"ansi"` or `"rgb_array"`                  |
    | `learner`     | str, Learner  | `"surrogate"`   | accuracy model: `"surrogate"` or `"torch"` |
    |               |               |                 | (real training, powertrip_env.learners)    |
    | `max_sites`   | int or None   | `None`          | pad sites to M (see "Any number of sites") |
    | `sites`       | None, str or  | `None`          | `"random"` or a `SiteSampler`: a new site  |
    |               | SiteSampler   |                 | catalogue every episode                    |
    |               |               |                 | (powertrip_env.scenario.sampling)          |

    ## Any number of sites

    With `max_sites=M` (M ≥ N) the spaces have M sites whatever the scenario's N, so one agent
    can act on every scenario with at most M sites: the site features of sites N..M−1 are zeros,
    the observation gains a per-site `valid` flag (dict: `obs["valid"]`, (M,); flat: the last M
    numbers), actions are (M,) and their padded entries are ignored, `action_masks()` never
    allows a padded site, and the per-site arrays of `info` have M entries. `predict_round` and
    `available()` stay in the scenario's N sites. With `sites="random"` (`PowerTrip-Random-v0`)
    every reset draws a new catalogue of 1 to 16 sites
    (`powertrip_env.scenario.sampling.SiteSampler`) on the scenario's job and power data;
    `env.unwrapped.scenario` is the episode's.

    Registered IDs: `PowerTrip-v0` (the flagship, scenario `default`), `PowerTrip-LoRA-v0`,
    `PowerTrip-KWS-v0`, `PowerTrip-EMNIST-v0`, `PowerTrip-LLMFull-v0`, `PowerTrip-Large-v0`,
    `PowerTrip-Digits-v0`, and `PowerTrip-Random-v0` (the flagship's job on drawn sites,
    `max_sites=32`).

    ## Vectorized environment

    `gym.make_vec("PowerTrip-v0", num_envs=B)` steps B episodes in one call of the same compiled
    simulator (`PowerTripVectorEnv`).

    ## Version History

    * v0: The dynamics became one compiled kernel with counter-based randomness: a seed gives
      other start times and jitter than before (every published table was regenerated).
    * v0: The flagship became a day-long DiLoCo job on real grid and solar power, with joins
      that fetch the model, drop-outs, forecasts in the observation and rounds cut at the
      budget; the earlier default scenario is `PowerTrip-LoRA-v0`. Initial version before that.
    """

    metadata: ClassVar[dict[str, Any]] = {"render_modes": ["ansi", "rgb_array"], "render_fps": 4}

    def __init__(
        self,
        scenario: str | os.PathLike[str] | Scenario | Mapping[str, Any] = "default",
        *,
        reward_mode: str | RewardFn = "excess_gain",
        obs_mode: str = "flat",
        action_mode: str = "multibinary",
        split: str = "train",
        jitter: bool | float = True,
        render_mode: str | None = None,
        learner: str | Learner = "surrogate",
        max_sites: int | None = None,
        sites: str | SiteSampler | None = None,
    ) -> None:
        self.sampler = as_sampler(sites)
        self._setup = configure(
            scenario, reward_mode=reward_mode, obs_mode=obs_mode, action_mode=action_mode,
            split=split, jitter=jitter, render_mode=render_mode, max_sites=max_sites,
            render_modes=tuple(self.metadata["render_modes"]), sampler=self.sampler,
        )  # fmt: skip
        self.learner = make_learner(learner)
        self._learns = not is_surrogate(self.learner)  # else the kernel's accuracy stands
        if self.sampler is not None and self._learns:
            raise ValueError(
                f"learner={learner!r} with sites={sites!r}: real training keeps one model per "
                "site catalogue; drawn catalogues run the surrogate learner only"
            )
        self._setup.apply(self)  # sim, params, scenario, interface, starts, reward_fn, ...
        self.action_space = self.interface.action_space
        self.observation_space = self.interface.observation_space
        self.state: dynamics.SimState | None = None  # the episode, as a batch of one
        self._base: int | None = None  # drawn from np_random when seeded (episodes.base_from)
        self._episode = 0  # episodes since then
        self._history: list[tuple[float, float]] = []  # (elapsed s, accuracy) per round
        self._plots = self.render_mode == "rgb_array"  # the one reader of the history

    # ------------------------------------------------------------------ gym API

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[Any, dict[str, Any]]:
        super().reset(seed=seed)
        if seed is not None or self._base is None:  # else the next episode of the same base
            self._base, self._episode = base_from(self.np_random), 0
        if self.sampler is not None:  # a new catalogue, drawn from the generator
            drawn = self.sampler.draw(self._setup.sim.scenario, self.np_random)
            self._setup.drawn(drawn).apply(self)
        self.state, seeds = self.starts.begin(
            np.array([self._base]), np.array([self._episode]), options
        )
        self._episode += 1
        if self._learns:
            accuracy = self.learner.reset(self.sim, int(seeds[0]))
            self.state = self.state.replace(accuracy=accuracy)
        self._history = [(0.0, float(self.state.accuracy[0]))]
        obs = self.interface.first(self.interface.observe(self.state))
        return obs, self.interface.first_info(self.interface.reset_info(self.state))

    def step(self, action: Any) -> tuple[Any, float, bool, bool, dict[str, Any]]:
        if self.state is None:
            raise RuntimeError("call reset() before step()")
        mask = self.interface.as_masks(action, self.action_space, 1)
        result, obs = self.interface.step(self.state, mask)
        if self._learns:
            result = self._learn(result)
        self.state = result.state
        record = result.record[0].tolist()
        info = self.interface.episode_info(result, record)
        reward = float(self.reward_fn(self.params, result)[0])  # as the vector env's rewards
        if self._plots:
            self._history.append((info["elapsed_s"], info["accuracy"]))
        terminated = record[dynamics.R_TERMINATED] > 0.0
        truncated = record[dynamics.R_TRUNCATED] > 0.0
        return self.interface.first(obs), reward, terminated, truncated, info

    def render(self) -> str | np.ndarray | None:
        if self.render_mode is None:
            gym.logger.warn("render() called without a render_mode; pass render_mode to make()")
            return None
        from powertrip_env import render

        view = None if self.state is None else self.decision_view()
        if self.render_mode == "ansi":
            return render.ansi(view)
        return render.rgb_array(view, self._history, self.scenario)

    # ------------------------------------------------------------------ for policies

    def action_masks(self) -> np.ndarray:
        """(2N,) bool for MaskablePPO: per site [may choose 0, may choose 1]; (2M,) when padded."""
        return self.interface.action_masks(self.available())

    def decision_view(self) -> DecisionView:
        """What a policy may know now: power, powered GPUs, rates, RTTs, the forecast issued
        now and which sites are joined (``powertrip_env.view``); no future actual."""
        self._require_state()
        return decision_view(self.params, self.state, self.scenario)

    def available(self) -> np.ndarray:
        """(N,) bool: sites that have at least one powered GPU now."""
        self._require_state()
        return dynamics.available_now(self.params, self.state)[0]

    def predict_round(self, mask: Any, *, steady_state: bool = False) -> dynamics.RoundPrediction:
        """What-if round time and progress for one set (N,) or candidate sets (M, N).

        Judged from the power forecast issued now (no future actual is read, no jitter); the
        state does not change. ``steady_state=True`` leaves out the join time of sites that
        would join. Returns floats for one set, (M,) arrays for many.
        """
        self._require_state()
        m = np.asarray(mask, dtype=bool)
        if m.ndim not in (1, 2) or m.shape[-1] != self.params.n_sites:
            raise ValueError(
                f"mask of shape {m.shape}: expected ({self.params.n_sites},) or "
                f"(M, {self.params.n_sites})"
            )
        pred = dynamics.predict_round(
            self.params, self.state, m.reshape(1, -1, m.shape[-1]), steady_state=steady_state
        )
        if m.ndim == 1:
            return dynamics.RoundPrediction(*(float(a[0, 0]) for a in pred))
        return dynamics.RoundPrediction(*(a[0] for a in pred))

    def candidates(
        self, rules: Sequence[tuple[float, float]] | None = None
    ) -> dynamics.CandidateBatch:
        """A few candidate sets for the coming round and their features, as a batch of one.

        Slot 0 is the current set; each further slot is the best set of a pool that
        ``predict_round`` ranks, with its joins spread over a horizon and kept unless it beats
        the current set by a margin: ``rules`` as (horizon, margin) pairs, by default the
        candidate-set agent's (``dynamics.candidates``). Deployable: the forecast issued now
        and who is joined, no future actual; the state does not change.
        """
        self._require_state()
        return dynamics.build_candidates(self.params, self.state, rules)

    def predict_plan(self, plan: Any, rounds: int | None = None) -> dynamics.Trajectory:
        """What-if of M plans over several rounds, judged from the forecast issued now.

        ``plan`` is (M, N) bool, a set requested every round, or (M, R, N), a set per round; at
        most ``rounds`` rounds are played. The plans run through the true dynamics
        (``step_round``) on the world the forecast issued now describes
        (``dynamics.forecast_world``), without jitter: no future actual is read, and the
        state does not change. Its first round is ``predict_round``'s. The trajectory's
        state is on the episode's clock. This is what a receding-horizon planner
        (``powertrip_env.baselines.lookahead.ForecastMPC``) plans with.
        """
        self._require_state()
        m = np.asarray(plan, dtype=bool)
        if m.ndim not in (2, 3) or m.shape[-1] != self.params.n_sites:
            raise ValueError(
                f"plan of shape {m.shape}: expected (M, {self.params.n_sites}) or "
                f"(M, R, {self.params.n_sites})"
            )
        return dynamics.predict_plan(self.params, self.state, m, rounds)

    def clairvoyant(self) -> Clairvoyant:
        """CLAIRVOYANT: the episode's future (true power and its own jitter) from now.

        For the references that are named clairvoyant (``baselines/references.py``) and nothing
        else. It works on copies of the state, so the episode is unchanged.
        """
        self._require_state()
        return Clairvoyant(self.params, self.state)

    # ------------------------------------------------------------------ for planners

    @property
    def n_sites(self) -> int:
        """Sites of the catalogue the episode runs on (a drawn one's, under ``sites=``)."""
        return self.params.n_sites

    def fork(self) -> PowerTripEnv:
        """An independent copy of the episode as it stands, for a planner to try moves on.

        The fork continues bit for bit as this env would: same state, jitter, power and
        generator; stepping or resetting it leaves this env unchanged, and the other way round.
        What every env of the scenario shares read-only (the power tables, the interface, the
        episode starts) is shared, not copied, so a fork costs a fraction of a millisecond under
        the surrogate learner; a real learner is copied with its model.
        """
        shared = (self.sim, self.params, self.scenario, self.interface, self.starts, self._setup)
        return copy.deepcopy(self, {id(x): x for x in shared})

    def get_state(self) -> EpisodeState:
        """The episode as it stands, to come back to with ``set_state`` (on this env or another
        made with the same arguments)."""
        return EpisodeState(
            sim_state=self.state, setup=self._current_setup(), base=self._base,
            episode=self._episode, rng=copy.deepcopy(self.np_random.bit_generator.state),
            history=tuple(self._history),
            learner=copy.deepcopy(self.learner) if self._learns else None,
        )  # fmt: skip

    def set_state(self, state: EpisodeState) -> None:
        """Continue from ``state`` (``get_state``): the next ``step`` is the one that followed
        it, bit for bit. The env must have been made with the same scenario and arguments."""
        if not isinstance(state, EpisodeState):
            raise TypeError(f"set_state takes what get_state returns, not {type(state).__name__}")
        if self.sampler is None and state.setup.sim.scenario is not self._setup.sim.scenario:
            raise ValueError(
                f"set_state: the state is of scenario {state.setup.sim.scenario.name!r}, "
                f"this env runs {self._setup.sim.scenario.name!r}"
            )
        state.setup.apply(self)
        self.state, self._base, self._episode = state.sim_state, state.base, state.episode
        self.np_random.bit_generator.state = copy.deepcopy(state.rng)
        self._history = list(state.history)
        if state.learner is not None:
            self.learner = copy.deepcopy(state.learner)

    # ------------------------------------------------------------------ helpers

    def _current_setup(self) -> EnvSetup:
        return EnvSetup(
            sim=self.sim, reward=self.reward_fn, render_mode=self.render_mode,
            interface=self.interface, starts=self.starts,
        )  # fmt: skip

    def _learn(self, result: dynamics.RoundResult) -> dynamics.RoundResult:
        """The round with the accuracy the learner reached in place of the surrogate's.

        The clock, the surrogate's progress (which ``predict_round`` reads) and everything
        else stay the simulator's; the accuracy, its gain (the reward) and so the episode's
        end come from the learner.
        """
        before = float(self.state.accuracy[0])
        after = self.learner.round(result, 0)
        return result.with_accuracy(self.params, before, after)

    def _require_state(self) -> None:
        if self.state is None:
            raise RuntimeError("call reset() first")


# The observation table is declared once, in powertrip_env.dynamics.features.
PowerTripEnv.__doc__ = document_env(PowerTripEnv.__doc__)
