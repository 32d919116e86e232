"""The selector in a real federation: a Flower strategy driven by any policy or saved agent.

PowerTrip itself is built on Flower (docs/references.md). ``PowerTripStrategy`` wraps any Flower
strategy (``FedAvg`` by default) and plays one episode of a PowerTrip scenario per ``start``:

* **The clock is the environment's.** Each Flower node is one site of the scenario. Every round
  the policy (a ``baselines`` policy by name, a ``Policy`` object or a saved agent) chooses the
  sites from what it may see, and the environment's power model and clock say how long the
  round takes and who loses power before finishing.
* **The training is Flower's.** The chosen sites' nodes get the inner strategy's train messages
  and train for real. The replies of the sites that completed the round are aggregated by the
  inner strategy; a site that dropped out mid-round, or any site of a round cut at the time
  budget, contributes nothing, as in the environment (its reply, if it came, is discarded and
  recorded in ``FederatedRound.excluded``).
* **The accuracy is Flower's evaluation.** After every round that trained, the global model is
  evaluated (``evaluate_fn``, centrally, or the inner strategy's federated evaluation) and the
  environment records that accuracy on its clock, so the episode's time to accuracy (``episode``,
  the row ``powertrip evaluate`` writes) is on the simulated clock, from real training.

A ServerApp's main (``examples/flower_powertrip.py`` is a complete run)::

    from powertrip_env.integrations.flower import PowerTripStrategy

    strategy = PowerTripStrategy("MyopicOptimal", "PowerTrip-Digits-v1", seed=0)
    result = strategy.start(grid, initial_arrays, evaluate_fn=evaluate_fn)
    print(strategy.episode["tta_h"], strategy.rounds[-1].completed)

A node names its site in its node config: ``site = "<name>"`` (a deployment's SuperNode,
``flower-supernode --node-config "site='...'"``) or, in Flower's simulation, its
``partition-id`` (site index). ``evaluate_federated`` plays several policies over the same
episodes and returns the ``Evaluation`` whose table ``powertrip evaluate`` prints. Needs the
``flower`` extra (``pip install 'powertrip-env[flower]'``).
"""

from __future__ import annotations

import copy
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd
from flwr.app import ArrayRecord, ConfigRecord, Message, MetricRecord
from flwr.serverapp import Grid
from flwr.serverapp.strategy import FedAvg, Result, Strategy

from powertrip_env.baselines.base import Policy
from powertrip_env.baselines.registry import make_policy
from powertrip_env.harness.arguments import check_env_id, make_env
from powertrip_env.harness.evaluation.evaluate import run_episode, summary_table
from powertrip_env.harness.evaluation.results import EPISODE_COLUMNS, ZERO, Evaluation
from powertrip_env.harness.models.loading import load_agent, model_label
from powertrip_env.integrations.flower_nodes import (
    DEFAULT_ENV,
    SiteGrid,
    discover_sites,
    require_flower,
)
from powertrip_env.units import s_to_h

if TYPE_CHECKING:
    from powertrip_env import dynamics
    from powertrip_env.simulation import Simulation

__all__ = ["FederatedRound", "PowerTripStrategy", "evaluate_federated", "require_flower"]

InitialModel = Callable[[int], ArrayRecord]  # the episode's learner seed -> initial arrays
EvaluateFn = Callable[[int, ArrayRecord], MetricRecord | None]


# --------------------------------------------------------------------------- policies


class _Checked(Policy):
    """A policy whose every action is held to the scenario's sites: a policy made for another
    number of sites fails on its first action, naming both, instead of being padded or cut."""

    def __init__(self, policy: Policy, site_names: Sequence[str]) -> None:
        super().__init__()
        self.policy, self.name, self.site_names = policy, policy.name, tuple(site_names)

    def reset(self, env: Any) -> None:
        super().reset(env)
        self.policy.reset(env)

    def act(self, obs: Any, info: dict[str, Any]) -> np.ndarray:
        action = np.asarray(self.policy.act(obs, info))
        n = len(self.site_names)
        if action.shape != (n,) or not np.isin(action, (0, 1)).all():
            raise ValueError(
                f"policy {self.name!r} chose {action.tolist()!r} (shape {action.shape}); the "
                f"scenario has {n} sites ({', '.join(self.site_names)}), so a round's choice "
                f"is {n} values of 0 or 1: was the policy made for another scenario?"
            )
        return action.astype(np.int8)


def resolve_policy(
    policy: str | Policy,
    env_id: str,
    n_sites: int,
    *,
    algo: str | None = None,
    seed: int = 0,
    env_kwargs: Mapping[str, Any] | None = None,
) -> tuple[Policy, dict[str, Any]]:
    """A policy and the ``gym.make`` arguments it needs, from a ``baselines`` name (e.g.
    ``"PowerTrip"``), a ``Policy`` object, or with ``algo`` a saved agent's path (``ppo``,
    ``a2c``, ``maskable_ppo``; ``"pretrained"`` for the shipped one)."""
    kwargs = dict(env_kwargs or {})
    if isinstance(policy, Policy):
        return policy, kwargs
    if not isinstance(policy, str):
        raise TypeError(
            f"policy={policy!r}: give a baselines policy name, a Policy or, with algo, a saved "
            "agent's path"
        )
    if algo is not None:
        agent, agent_kwargs = load_agent(policy, algo, model_label(policy), env_id, kwargs)
        return agent, agent_kwargs
    return make_policy(policy, n_sites, seed), kwargs


# --------------------------------------------------------------------------- the strategy


@dataclass
class FederatedRound:
    """One round as it happened: who the policy chose, who finished, whose reply counted."""

    round: int  # 1, 2, ... within the episode
    selected: tuple[str, ...]  # the sites the policy chose
    completed: tuple[str, ...]  # the chosen sites that finished (their replies were aggregated)
    excluded: tuple[str, ...]  # chosen sites that counted for none: dropped out, the round cut,
    # no data, or no reply within the timeout
    idle: bool  # no chosen site had power: nothing was sent
    cut: bool  # the round ended at the episode's time budget
    elapsed_h: float  # the simulated clock after the round
    accuracy: float  # the evaluated accuracy after the round
    train_metrics: dict[str, float] = field(default_factory=dict)  # the inner aggregate's


class PowerTripStrategy(Strategy):
    """A Flower strategy whose rounds are chosen by a PowerTrip policy on a scenario's clock.

    :param policy: a ``baselines`` policy name, a ``Policy`` object or, with ``algo``, the path
        of a saved agent (``"pretrained"`` for the shipped one).
    :param env_id: the registered ID whose scenario gives the sites, power and clock.
    :param inner: the strategy that configures training and aggregates it (default ``FedAvg``
        over every chosen site). It must sample every node it is shown: ``fraction_train=1``,
        ``min_train_nodes`` and ``min_available_nodes`` at most 1.
    :param seed: the episode's reset seed (``start(..., seed=)`` overrides it), as in
        ``powertrip evaluate``: the same seed gives the same start time and jitter.
    :param split: the days episodes start in (``"test"``: the held-out days).
    :param algo: the saved agent's algorithm, when ``policy`` is a path.
    :param initial_model: the episode's initial arrays from its learner seed, like
        ``learner="torch"`` seeds its model; when given, ``start``'s ``initial_arrays`` may be
        ``None``.
    :param accuracy_key: the metric that holds the accuracy, in ``evaluate_fn``'s record or the
        inner strategy's aggregated federated evaluation.
    :param env_kwargs: further ``gym.make`` arguments (a ``scenario`` file, ``jitter``, ...).
    """

    def __init__(
        self,
        policy: str | Policy,
        env_id: str = DEFAULT_ENV,
        *,
        inner: Strategy | None = None,
        seed: int = 0,
        split: str = "test",
        algo: str | None = None,
        initial_model: InitialModel | None = None,
        accuracy_key: str = "accuracy",
        env_kwargs: Mapping[str, Any] | None = None,
    ) -> None:
        check_env_id(env_id)
        self.env_id, self.seed, self.split = env_id, seed, split
        self.inner = inner if inner is not None else _default_inner()
        _check_inner(self.inner)
        self.initial_model, self.accuracy_key = initial_model, accuracy_key
        base = {**dict(env_kwargs or {}), "split": split}
        probe = make_env(env_id, **base)
        self.site_names: tuple[str, ...] = tuple(probe.unwrapped.site_names)
        probe.close()
        policy, self.env_kwargs = resolve_policy(
            policy, env_id, len(self.site_names), algo=algo, seed=seed, env_kwargs=base
        )
        self.policy = _Checked(policy, self.site_names)
        self._check_policy()
        self.rounds: list[FederatedRound] = []
        self.episode: dict[str, Any] = {}  # the episode's row (EPISODE_COLUMNS)
        self.curve: tuple[np.ndarray, np.ndarray] = (np.zeros(0), np.zeros(0))
        self.nodes: dict[int, int] = {}  # node id -> site index, found by ``start``

    @property
    def name(self) -> str:
        """The policy's name, as the tables show it."""
        return self.policy.name

    def _check_policy(self) -> None:
        """One decision on a probe episode under the surrogate: a policy for another number
        of sites fails here, before any node is asked to train."""
        env = make_env(self.env_id, **self.env_kwargs)
        try:
            obs, info = env.reset(seed=self.seed)
            self.policy.reset(env)
            self.policy.act(obs, info)
        finally:
            env.close()

    def summary(self) -> None:
        """Flower's log of the strategy: the policy and scenario, then the inner strategy's."""
        print(f"PowerTripStrategy: {self.name} on {self.env_id} ({len(self.site_names)} sites)")
        self.inner.summary()

    # The four steps of a round are the inner strategy's; ``start`` calls them with the sites
    # the policy chose and keeps only the replies of those that completed the round.
    def configure_train(
        self, server_round: int, arrays: ArrayRecord, config: ConfigRecord, grid: Grid
    ) -> Iterable[Message]:
        return self.inner.configure_train(server_round, arrays, config, grid)

    def aggregate_train(
        self, server_round: int, replies: Iterable[Message]
    ) -> tuple[ArrayRecord | None, MetricRecord | None]:
        return self.inner.aggregate_train(server_round, replies)

    def configure_evaluate(
        self, server_round: int, arrays: ArrayRecord, config: ConfigRecord, grid: Grid
    ) -> Iterable[Message]:
        return self.inner.configure_evaluate(server_round, arrays, config, grid)

    def aggregate_evaluate(
        self, server_round: int, replies: Iterable[Message]
    ) -> MetricRecord | None:
        return self.inner.aggregate_evaluate(server_round, replies)

    def start(
        self,
        grid: Grid,
        initial_arrays: ArrayRecord | None,
        num_rounds: int | None = None,
        timeout: float = 3600,
        train_config: ConfigRecord | None = None,
        evaluate_config: ConfigRecord | None = None,
        evaluate_fn: EvaluateFn | None = None,
        *,
        seed: int | None = None,
    ) -> Result:
        """Play one episode from ``initial_arrays`` (or ``initial_model``): until the target
        accuracy, the time budget, or ``num_rounds`` rounds, whichever comes first.

        Returns Flower's ``Result``; ``self.episode``, ``self.curve`` and ``self.rounds`` hold
        the episode's row, its accuracy over simulated hours, and each round as it happened.
        """
        if initial_arrays is None and self.initial_model is None:
            raise ValueError("start: give initial_arrays, or make the strategy with initial_model")
        if num_rounds is not None and (int(num_rounds) != num_rounds or num_rounds < 1):
            raise ValueError(f"num_rounds={num_rounds!r}: must be a whole number >= 1 or None")
        self.nodes = discover_sites(grid, self.site_names, timeout=min(timeout, 120.0))
        run = _Run(self, grid, initial_arrays, timeout, train_config, evaluate_config, evaluate_fn)
        kwargs = dict(self.env_kwargs)
        if num_rounds is not None:
            kwargs["max_episode_steps"] = int(num_rounds)
        env = make_env(self.env_id, **{**kwargs, "learner": run})
        try:
            episode_seed = self.seed if seed is None else seed
            self.episode, self.curve = run_episode(env, self.policy, episode_seed)
        finally:
            env.close()
        self.rounds = run.rounds
        return run.result


def _default_inner() -> FedAvg:
    """FedAvg over every chosen site, weighted by the sites' examples; no federated
    evaluation (the accuracy comes from ``evaluate_fn`` unless the user's inner asks for it)."""
    return FedAvg(
        fraction_train=1.0, fraction_evaluate=0.0, min_train_nodes=1, min_available_nodes=1
    )


def _check_inner(inner: Strategy) -> None:
    """An inner strategy that would sample among the chosen sites, or wait for more nodes than
    the policy chose, would overrule the policy (or hang); refuse it, naming the setting."""
    if not isinstance(inner, Strategy):
        raise TypeError(f"inner={inner!r}: must be a flwr.serverapp.strategy.Strategy")
    allowed = {"fraction_train": (1.0, "1.0"), "min_train_nodes": (1, "at most 1"),
               "min_available_nodes": (1, "at most 1")}  # fmt: skip
    for name, (limit, text) in allowed.items():
        value = getattr(inner, name, None)
        if value is None:
            continue
        bad = value != limit if name == "fraction_train" else value > limit
        if bad:
            raise ValueError(
                f"inner {type(inner).__name__}: {name}={value!r}, must be {text}: "
                "PowerTripStrategy's policy chooses who trains, and the inner strategy is "
                "shown only those sites"
            )


class _Run:
    """One episode's federation, as the environment's learner (``reset`` and ``round``).

    The environment calls it where ``learner="torch"`` trains in-process: at ``reset`` it
    evaluates the initial model, after every round's clock it trains the chosen sites through
    Flower and returns the evaluated accuracy. Its state is a live federation, so it cannot be
    copied into a planner's fork.
    """

    name = "flower"

    def __init__(
        self,
        strategy: PowerTripStrategy,
        grid: Grid,
        arrays: ArrayRecord | None,
        timeout: float,
        train_config: ConfigRecord | None,
        evaluate_config: ConfigRecord | None,
        evaluate_fn: EvaluateFn | None,
    ) -> None:
        self.strategy, self.grid, self.arrays, self.timeout = strategy, grid, arrays, timeout
        self.train_config = train_config if train_config is not None else ConfigRecord()
        self.evaluate_config = evaluate_config if evaluate_config is not None else ConfigRecord()
        self.evaluate_fn = evaluate_fn
        self.result = Result()
        self.rounds: list[FederatedRound] = []
        self.site_node = {site: node for node, site in strategy.nodes.items()}
        self.accuracy = math.nan

    def __deepcopy__(self, memo: dict[int, Any]) -> Any:
        raise TypeError(
            "a Flower federation cannot be copied: a policy that forks the environment to "
            "try rounds (the clairvoyant references) cannot run under PowerTripStrategy"
        )

    # ------------------------------------------------------------------ the learner protocol

    def reset(self, sim: Simulation, seed: int) -> float:
        params = sim.params
        if self.strategy.initial_model is not None:
            self.arrays = self.strategy.initial_model(int(seed))
        if self.arrays is not None:
            self.result.arrays = self.arrays
        self.seed = int(seed)
        self.local = {
            "local-steps": int(params.local_steps),
            "batch-size": int(params.site_batch[0]),
            "lr": float(sim.scenario.learner.lr),
        }
        self.accuracy = self._evaluate(0)
        return self.accuracy

    def round(self, result: dynamics.RoundResult, i: int) -> float:
        names = self.strategy.site_names
        number = len(self.rounds) + 1
        selected = np.flatnonzero(result.selected[i])
        idle, cut = bool(result.idle[i]), bool(result.cut[i])
        finished = set(np.flatnonzero(result.selected[i] & ~result.dropped[i]).tolist())
        kept: list[Message] = []
        completed: list[str] = []
        excluded: list[str] = []
        metrics: dict[str, float] = {}
        if not idle and selected.size:
            replies = dict(self._train(number, selected))
            for site in selected.tolist():  # a chosen site that sent no reply counts for none
                reply = replies.get(site)
                if reply is None or cut or site not in finished or not _examples(reply):
                    excluded.append(names[site])
                else:
                    kept.append(reply)
                    completed.append(names[site])
            if kept:
                arrays, aggregated = self.strategy.aggregate_train(number, kept)
                if arrays is not None:
                    self.arrays = self.result.arrays = arrays
                if aggregated is not None:
                    self.result.train_metrics_clientapp[number] = aggregated
                    metrics = {k: float(v) for k, v in aggregated.items()}  # type: ignore[arg-type]
                self.accuracy = self._evaluate(number)
        state = result.state
        elapsed_h = s_to_h(float(state.time_s[i] - state.start_s[i]))
        chosen = tuple(names[s] for s in selected)
        self.rounds.append(
            FederatedRound(
                number,
                chosen,
                tuple(completed),
                tuple(excluded),
                idle,
                cut,
                elapsed_h,
                self.accuracy,
                metrics,
            )
        )
        return self.accuracy

    # ------------------------------------------------------------------ Flower

    def _train(self, number: int, sites: np.ndarray) -> list[tuple[int, Message]]:
        """The chosen sites' train replies, in site order (so aggregation is repeatable)."""
        config = copy.deepcopy(self.train_config)
        for key, value in {**self.local, "seed": self.seed}.items():
            config.setdefault(key, value)
        nodes = SiteGrid(self.grid, [self.site_node[int(s)] for s in sites])
        messages = list(self.strategy.configure_train(number, self.arrays, config, nodes))
        replies = self.grid.send_and_receive(messages, timeout=self.timeout)
        by_site = [(self.strategy.nodes[r.metadata.src_node_id], r) for r in replies]
        return sorted((pair for pair in by_site if not pair[1].has_error()), key=lambda p: p[0])

    def _evaluate(self, number: int) -> float:
        """The global model's accuracy: ``evaluate_fn``'s, else the federated evaluation's."""
        key = self.strategy.accuracy_key
        if self.evaluate_fn is not None:
            record = self.evaluate_fn(number, self.arrays)
            if record is not None:
                self.result.evaluate_metrics_serverapp[number] = record
                if key in record:
                    return float(record[key])  # type: ignore[arg-type]
        config = copy.deepcopy(self.evaluate_config)
        messages = list(self.strategy.configure_evaluate(number, self.arrays, config, self.grid))
        if messages:
            replies = self.grid.send_and_receive(messages, timeout=self.timeout)
            record = self.strategy.aggregate_evaluate(number, replies)
            if record is not None:
                self.result.evaluate_metrics_clientapp[number] = record
                if key in record:
                    return float(record[key])  # type: ignore[arg-type]
        raise ValueError(
            f"round {number}: no accuracy to record: give start an evaluate_fn whose "
            f"MetricRecord holds {key!r}, or an inner strategy whose federated evaluation "
            f"reports it (accuracy_key names the metric)"
        )


def _examples(reply: Message) -> bool:
    """Whether a train reply carries any examples: a site without data has nothing to teach,
    and a zero weight would leave FedAvg's mean undefined."""
    for record in reply.content.metric_records.values():
        if "num-examples" in record:
            return float(record["num-examples"]) > 0  # type: ignore[arg-type]
    return True


# --------------------------------------------------------------------------- many episodes


def evaluate_federated(
    grid: Grid,
    policies: Sequence[str | Policy | tuple[str, str]],
    env_id: str = DEFAULT_ENV,
    *,
    episodes: int = 5,
    seed: int = 0,
    split: str = "test",
    initial_model: InitialModel | None = None,
    initial_arrays: ArrayRecord | None = None,
    evaluate_fn: EvaluateFn | None = None,
    inner: Callable[[], Strategy] | None = None,
    env_kwargs: Mapping[str, Any] | None = None,
    timeout: float = 3600,
    progress: Callable[[str, int, dict[str, Any]], None] | None = None,
) -> Evaluation:
    """Every policy over the same episodes in one federation, as ``powertrip evaluate`` runs
    them in the environment: episode e resets with ``seed + e``, so the policies meet the same
    start times and jitter and their differences are paired.

    ``policies`` holds names, ``Policy`` objects, or ``(path, algo)`` pairs of saved agents.
    Each episode starts from the initial model again (``initial_model`` of the episode's seed,
    or ``initial_arrays``). ``progress(label, episode, row)`` is called after each episode.
    Returns an ``Evaluation`` whose ``to_markdown()`` is ``powertrip evaluate``'s table.
    """
    if int(episodes) != episodes or episodes < 1:
        raise ValueError(f"episodes={episodes!r}: must be a whole number >= 1")
    rows: list[dict[str, Any]] = []
    curves: dict[str, list[tuple[np.ndarray, np.ndarray]]] = {}
    order: list[str] = []
    for item in policies:
        policy, algo = item if isinstance(item, tuple) else (item, None)
        strategy = PowerTripStrategy(
            policy,
            env_id,
            inner=inner() if inner is not None else None,
            seed=seed,
            split=split,
            algo=algo,
            initial_model=initial_model,
            env_kwargs=env_kwargs,
        )
        label = strategy.name
        if label in curves:
            raise ValueError(f"policy {label!r} appears twice; give each policy once")
        order.append(label)
        curves[label] = []
        for e in range(episodes):
            strategy.start(
                grid, initial_arrays, timeout=timeout, evaluate_fn=evaluate_fn, seed=seed + e
            )
            row = {"policy": label, "episode": e, **strategy.episode}
            rows.append(row)
            curves[label].append(strategy.curve)
            if progress is not None:
                progress(label, e, row)
    order.sort(key=lambda label: label != ZERO)
    frame = pd.DataFrame(rows, columns=EPISODE_COLUMNS)
    return Evaluation(env_id, split, frame, summary_table(frame, order), curves)
