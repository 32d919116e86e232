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
from powertrip_env.engine import Engine, EngineState, EngineViews
from powertrip_env.learners import Learner, is_surrogate, make_learner
from powertrip_env.options import configure, learner_arguments
from powertrip_env.rewards import RewardFn
from powertrip_env.scenario import Scenario
from powertrip_env.scenario.sampling import SiteSampler, as_sampler
from powertrip_env.tasks import document_power_data
from powertrip_env.view import DecisionView


@dataclass(frozen=True, eq=False)
class EpisodeState:
    """Everything ``PowerTripEnv.set_state`` needs to continue an episode exactly: the engine's
    episode (the kernel's state, the catalogue it runs on, the seeding the next ``reset()``
    draws from), the generator and, under a real learner, the learner itself. Opaque to its
    users: taken by ``get_state``, given back to ``set_state``."""

    engine: EngineState
    rng: dict[str, Any]  # np_random's bit-generator state
    history: tuple[tuple[float, float], ...]
    learner: Learner | None  # a copy, under a real learner only (the surrogate keeps none)


class PowerTripEnv(EngineViews, gym.Env):
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
    (TTA). Every equation and parameter is in docs/model.md.

    <power data of the registered IDs: powertrip_env.tasks.document_power_data()>

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

    On the measured track (a scenario with `[unknowns]`: `PowerTrip-Measured-v0`,
    `PowerTrip-Wide-Measured-v0`) each site has 4 more columns after its features: its last
    telemetry (`ln` of measured over stated compute, exchange and join, clipped to ±1) and the
    measurement's age (`dynamics.TELEMETRY_FEATURES`; docs/model.md, "What is unknown").

    With `carbon_obs=True` (the carbon tasks, `PowerTrip-Carbon-v2` and
    `PowerTrip-Carbon-Measured-v2`) each site has 10 more columns after its features and before
    any telemetry: its grid intensity now, the week's and yesterday's forecasts of it over four
    windows ahead and its PV share (`dynamics.CARBON_SITE_FEATURES`); and 3 more follow the
    global ones: the time left, the work left at the last pace and the carbon so far
    (`dynamics.CARBON_JOB_FEATURES`). `PowerTrip-Carbon-v2`'s flat observation has 6 · 25 + 9
    columns (docs/model.md, "Observation"; docs/carbon.md).

    ## Rewards

    `reward_mode="excess_gain"` (default): `r = (Δa − ρ_ref · T_r) / (a* − a0)` with
    `ρ_ref = (a* − a0) / H_ref`: the accuracy gained in the round minus what the reference rate
    would have gained in the same wall-clock time. The return of a successful episode is
    exactly `1 − TTA / H_ref`, so maximising return minimises TTA.
    `reward_mode="gain_rate"`: the literal per-round efficiency `Δa / (a* − a0) · H_ref / T_r`.
    It rewards many short rounds rather than a short TTA and is kept for comparison.
    `reward_mode="carbon"` (the carbon tasks' default, `powertrip_env.rewards.CarbonCost`):
    `r = −carbon_kg / C_ref`, and `−1` more in the round that ends the episode without reaching
    the target (the deadline is the time budget); `C_ref` is `[episode] carbon_ref_kg`. Its two
    terms are in `info` as `reward_carbon` and `reward_deadline` (docs/carbon.md).
    A `powertrip_env.rewards.RewardFn` instance sets a reward of one's own (a function of the
    round's result, for the whole batch).
    `shaping="progress"` adds to any of them a potential-based term `Φ(s') − Φ(s)`, with
    `Φ = (a − a0) / (a* − a0) − elapsed / budget` and `Φ = 0` once the episode ends: a round
    ahead of the budget's pace earns, an idle round pays, and over an episode the terms sum to
    zero, so the return is the objective's (Ng, Harada and Russell, ICML '99). It is in `info`
    as `reward_shaping`, beside the objective's terms.

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
    docs/environment.md ("What info holds") says what each key means.

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
    | `delta_progress`                   | float64       | 0.0                         |
    | `measured_compute_s`,              | float64 (N,)  | zeros                       |
    | `measured_transfer_s`,             |               |                             |
    | `measured_join_s`                  |               |                             |
    | `round_carbon_kg`, `carbon_kg`     | float64       | 0.0                         |

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
    | `reward_mode` | str or        | `"excess_gain"` | `"excess_gain"`, `"gain_rate"`, `"carbon"` |
    |               | RewardFn      |                 | or a `powertrip_env.rewards.RewardFn`      |
    | `shaping`     | str or None   | `None`          | `"progress"`: a potential-based shaping    |
    |               |               |                 | term (rewards.Shaped); the return stays    |
    |               |               |                 | the objective's                            |
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
    | `carbon_obs`  | bool          | `False`         | add what a carbon task is scored on: each  |
    |               |               |                 | site's grid intensity, its forecasts and   |
    |               |               |                 | PV share; time left, work left, carbon so  |
    |               |               |                 | far (the carbon tasks from -v1)            |

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

    <registered IDs: powertrip_env.tasks.document_power_data()>

    ## Vectorized environment

    `gym.make_vec("PowerTrip-v0", num_envs=B)` steps B episodes in one call of the same compiled
    simulator (`PowerTripVectorEnv`).

    ## Version History

    * v2 (`PowerTrip-Carbon-v2`, `PowerTrip-Carbon-Measured-v2`), 0.6: each carbon episode's
      deadline is set at its start (`[episode] deadline_slack`): 1.25x the best time found on
      the train days, scaled by the compute the sites offered the day before against the train
      days', capped at 48 h, so the slack over the best time is about the same on both splits
      (v1's 36.7 h and 38.8 h were set on the test days). The time left is observed against the
      episode's own deadline; episodes start where a 48 h budget lets them. The v1 IDs are
      retired; the other IDs' results are unchanged.
    * v1 (`PowerTrip-Carbon-v1`, `PowerTrip-Carbon-Measured-v1`), 0.6: the carbon tasks observe
      what they are scored on (`carbon_obs=True`: each site's grid intensity, its week and
      yesterday forecasts and PV share; the time left, the work left at the last pace and the
      carbon so far). Their dynamics and every episode are v0's; the v0 IDs are retired. The
      other IDs' results are unchanged.
    * v0 (`PowerTrip-Moving-v0`, `PowerTrip-Wide-Moving-v0`), 0.6: the moving track. The
      measured tasks' sites slow down and recover, their links dip and their power is called
      back while the job runs (`[moving]`), on a path keyed to the episode. The other IDs'
      results are unchanged.
    * v0 (`PowerTrip-Carbon-v0`, `PowerTrip-Carbon-Measured-v0`), 0.6: the carbon track. Reach
      the target before a deadline with the least grid carbon (`reward_mode="carbon"`); info
      reports `round_carbon_kg` and `carbon_kg` on every ID (0 without a carbon file). The
      other IDs' results are unchanged.
    * v0 (`PowerTrip-Measured-v0`, `PowerTrip-Wide-Measured-v0`), 0.4: the measured track. Each
      episode draws how far its sites and job depart from the stated values (`[unknowns]`);
      info reports each site's telemetry (`delta_progress`, `measured_*_s`) on every ID, and
      the measured track's observation carries it. The other IDs' results are unchanged.
    * v1 (`PowerTrip-Digits-v1`): the Digits surrogate was refitted to the real learner's FedAvg,
      so its results changed; the other IDs are still v0.
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
        shaping: str | None = None,
        obs_mode: str = "flat",
        action_mode: str = "multibinary",
        split: str = "train",
        jitter: bool | float = True,
        render_mode: str | None = None,
        learner: str | Learner = "surrogate",
        max_sites: int | None = None,
        sites: str | SiteSampler | None = None,
        carbon_obs: bool = False,
    ) -> None:
        self.sampler = as_sampler(sites)
        setup = configure(
            scenario,
            reward_mode=reward_mode,
            shaping=shaping,
            obs_mode=obs_mode,
            action_mode=action_mode,
            split=split,
            jitter=jitter,
            render_mode=render_mode,
            max_sites=max_sites,
            carbon_obs=carbon_obs,
            render_modes=tuple(self.metadata["render_modes"]),
            sampler=self.sampler,
        )
        self.learner = make_learner(learner)
        self._learns = not is_surrogate(self.learner)  # else the kernel's accuracy stands
        learner_arguments(learner, sites, self.sampler, self._learns)
        self._made = setup  # as made: a drawn catalogue is laid over it every reset
        self._engine = Engine(setup, 1)  # the episode, as a batch of one
        self.declare(setup)
        self.action_space = setup.interface.action_space
        self.observation_space = setup.interface.observation_space
        self._history: list[tuple[float, float]] = []  # (elapsed s, accuracy) per round
        self._plots = self.render_mode == "rgb_array"  # the one reader of the history

    # ------------------------------------------------------------------ gym API

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[Any, dict[str, Any]]:
        super().reset(seed=seed)
        engine = self._engine
        if seed is not None or not engine.seeded[0]:  # else the next episode of the same seed
            engine.seed_row(0, self.np_random)
        if self.sampler is not None:  # a new catalogue, drawn from the generator
            drawn = self.sampler.draw(self._made.sim.scenario, self.np_random)
            engine.setup = self._made.drawn(drawn)
        seeds = engine.restart(_FIRST, options)
        if self._learns:
            accuracy = self.learner.reset(engine.sim, int(seeds[0]))
            engine.state = engine.state.replace(accuracy=accuracy)
        self._history = [(0.0, float(engine.state.accuracy[0]))]
        interface = engine.interface
        info = interface.episode_info(engine.report())
        for name in self.reward_fn.term_names:  # the reward's terms: none before a round
            info[f"reward_{name}"] = 0.0
        return interface.first(engine.observe()), info

    def step(self, action: Any) -> tuple[Any, float, bool, bool, dict[str, Any]]:
        engine = self._engine
        if engine.state is None:
            raise RuntimeError("call reset() before step()")
        interface = engine.interface
        mask = interface.as_masks(action, self.action_space, None)
        result, obs, report = engine.step(mask, lend=not self._learns)
        if self._learns:
            result = self._learn(result)
            report = interface.describe(result)
        engine.state = result.state
        info = interface.episode_info(report)
        record = result.record[0].tolist()  # one read of the row into Python floats, exact
        column = self.reward_fn.column  # a built-in reward is the kernel's record column
        if column is None:
            rewards, terms = self.reward_fn.evaluate(engine.params, result)  # as the vector env's
            reward = float(rewards[0])
            for name, term in terms.items():
                info[f"reward_{name}"] = float(term[0])
        else:
            reward = record[column]
            for name, term in self.reward_fn.term_columns.items():
                info[f"reward_{name}"] = record[term]
        if self._plots:
            self._history.append((info["elapsed_s"], info["accuracy"]))
        terminated, truncated = record[_TERMINATED] > 0.0, record[_TRUNCATED] > 0.0
        return interface.first(obs), reward, terminated, truncated, info

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
        return self._engine.action_masks()[0]

    def decision_view(self) -> DecisionView:
        """What a policy may know now: power, powered GPUs, rates, RTTs, the forecast issued
        now and which sites are joined (``powertrip_env.view``); no future actual."""
        return self._engine.decision_view()

    def telemetry(self) -> dynamics.Telemetry:
        """The telemetry the decision view shows (each site's last measurement, the progress,
        rounds and clock, the sites powered now) as a batch of one, without the view's copies:
        what an estimator reads before every decision (``baselines.adaptive.Estimates``)."""
        return self._engine.telemetry()

    def available(self) -> np.ndarray:
        """(N,) bool: sites that have at least one powered GPU now."""
        return self._engine.available()[0]

    def predict_round(
        self, mask: Any, *, steady_state: bool = False, belief: Any = None
    ) -> dynamics.RoundPrediction:
        """What-if round time and progress for one set (N,) or candidate sets (M, N).

        Judged from the power forecast issued now (no future actual is read, no jitter); the
        state does not change. ``steady_state=True`` leaves out the join time of sites that
        would join. Returns floats for one set, (M,) arrays for many.

        ``belief`` is the world the what-if assumes (``dynamics.UnknownFactors`` or its vector): by
        default the scenario's stated values. On the measured track the episode's true
        throughputs, links, joins and progress curve differ from those (``[unknowns]``), and
        nothing here reads them: a policy passes what it has measured.
        """
        return self._engine.predict_round(mask, steady_state=steady_state, belief=belief)

    def candidates(
        self,
        rules: Sequence[tuple[float, float]] | None = None,
        *,
        belief: Any = None,
        estimates: dynamics.EstimateRows | None = None,
    ) -> dynamics.CandidateBatch:
        """A few candidate sets for the coming round and their features, as a batch of one.

        Slot 0 is the current set; each further slot is the best set of a pool that
        ``predict_round`` ranks, with its joins spread over a horizon and kept unless it beats
        the current set by a margin: ``rules`` as (horizon, margin) pairs, by default the
        candidate-set agent's (``dynamics.candidates``). Deployable: the forecast issued now
        and who is joined, no future actual; the state does not change. The what-ifs assume
        ``belief`` (``predict_round``'s), or what ``estimates`` (a policy's online estimates,
        ``baselines.adaptive.Estimates``' rows) believe once they have read the telemetry now.
        """
        return self._engine.candidates(rules, belief=belief, estimates=estimates)

    def predict_plan(
        self,
        plan: Any,
        rounds: int | None = None,
        *,
        belief: Any = None,
        carbon_forecast: str = "yesterday",
    ) -> dynamics.Trajectory:
        """What-if of M plans over several rounds, judged from the forecast issued now.

        ``plan`` is (M, N) bool, a set requested every round, or (M, R, N), a set per round; at
        most ``rounds`` rounds are played. The plans run through the true dynamics
        (``step_round``) on the world the forecast issued now describes
        (``dynamics.forecast_world``), without jitter: no future actual is read, and the
        state does not change. Its first round is ``predict_round``'s. The trajectory's
        state is on the episode's clock. This is what a receding-horizon planner
        (``powertrip_env.baselines.lookahead.ForecastMPC``) plans with. The world assumes
        ``belief`` (``predict_round``'s). On a scenario with carbon intensity the trajectory's
        ``state.carbon_g`` is the plans' grid carbon in the forecast's world, whose intensity
        and PV ``carbon_forecast`` guesses from the past: "yesterday" (the same hour a day
        before, the seasonal naive forecast) or "persistence" (the current hour's held).
        """
        return self._engine.predict_plan(
            plan, rounds, belief=belief, carbon_forecast=carbon_forecast
        )

    def forecast_rows(
        self, carbon_forecast: str = "week", power_forecast: str = "hold"
    ) -> dynamics.RowsAhead:
        """Each trace row from the current one to the deadline's, per site, as the forecast
        issued now sees it: the powered GPUs' samples/s and busy draw (the power forecast;
        beyond its horizon held, ``power_forecast="hold"``, or the mean of the same time of day
        over the last week's actual power already past, ``"week"``), the PV output and the
        grid's carbon intensity (guessed from the past by ``carbon_forecast``, as
        ``predict_plan`` guesses them). With the defaults, the rows of the world
        ``predict_plan`` plays, for a planner that prices rows itself
        (``baselines/carbon_planner.py``); no future actual is read.
        """
        return self._engine.forecast_rows(
            carbon_forecast=carbon_forecast, power_forecast=power_forecast
        )

    def clairvoyant(self) -> Clairvoyant:
        """CLAIRVOYANT: the episode's future (true power and its own jitter) from now.

        For the references that are named clairvoyant (``baselines/references.py``) and nothing
        else. It works on copies of the state, so the episode is unchanged. On the measured
        track it also knows the episode's drawn unknowns (``Clairvoyant.unknowns``), and its
        ``params`` are the world they make (``dynamics.unknowns.fold``).
        """
        return self._engine.clairvoyant()

    # ------------------------------------------------------------------ for planners

    def fork(self) -> PowerTripEnv:
        """An independent copy of the episode as it stands, for a planner to try moves on.

        The fork continues bit for bit as this env would: same state, jitter, power and
        generator; stepping or resetting it leaves this env unchanged, and the other way round.
        What every env of the scenario shares read-only (the power tables, the interface, the
        episode starts) is shared, not copied, so a fork costs a fraction of a millisecond under
        the surrogate learner; a real learner is copied with its model.
        """
        engine = self._engine
        shared = (
            engine.setup,
            self._made,
            engine.sim,
            engine.params,
            engine.scenario,
            engine.interface,
            engine.starts,
            engine.state,
        )
        return copy.deepcopy(self, {id(x): x for x in shared})

    def get_state(self) -> EpisodeState:
        """The episode as it stands, to come back to with ``set_state`` (on this env or another
        made with the same arguments)."""
        return EpisodeState(
            engine=self._engine.snapshot(),
            rng=copy.deepcopy(self.np_random.bit_generator.state),
            history=tuple(self._history),
            learner=copy.deepcopy(self.learner) if self._learns else None,
        )

    def set_state(self, state: EpisodeState) -> None:
        """Continue from ``state`` (``get_state``): the next ``step`` is the one that followed
        it, bit for bit. The env must have been made with the same scenario and arguments."""
        if not isinstance(state, EpisodeState):
            raise TypeError(f"set_state takes what get_state returns, not {type(state).__name__}")
        theirs, ours = state.engine.setup.sim.scenario, self._made.sim.scenario
        if self.sampler is None and theirs is not ours:
            raise ValueError(
                f"set_state: the state is of scenario {theirs.name!r} ({theirs.source}), this "
                f"env runs {ours.name!r} ({ours.source})"
            )
        self._engine.restore(state.engine)
        self.np_random.bit_generator.state = copy.deepcopy(state.rng)
        self._history = list(state.history)
        if state.learner is not None:
            self.learner = copy.deepcopy(state.learner)

    # ------------------------------------------------------------------ helpers

    def _learn(self, result: dynamics.RoundResult) -> dynamics.RoundResult:
        """The round with the accuracy the learner reached in place of the surrogate's.

        The clock, the surrogate's progress (which ``predict_round`` reads) and everything
        else stay the simulator's; the accuracy, its gain (the reward) and so the episode's
        end come from the learner.
        """
        before = float(self._engine.state.accuracy[0])
        after = self.learner.round(result, 0)
        return result.with_accuracy(self._engine.params, before, after)


_FIRST = np.zeros(1, dtype=np.intp)  # the single env's one row
# the columns of the record's row that step reads as a list (by name: dynamics.RECORD_FIELDS)
_TERMINATED = dynamics.RECORD_FIELDS.index("terminated")
_TRUNCATED = dynamics.RECORD_FIELDS.index("truncated")


# The observation table is declared once, in powertrip_env.dynamics.features; the registered IDs
# and their power data are read from the registry and the data folder.
PowerTripEnv.__doc__ = document_power_data(document_env(PowerTripEnv.__doc__))
