"""The Flower side of real training on a scenario: its sites' clients, and the server's model.

``learner="torch"`` (``powertrip_env.learners.torch_fed``) trains a scenario's sites in one
process. This module trains the same sites as Flower ClientApps, with the same pieces, so the
two can be compared episode for episode:

* ``client_app(env_id)``: each node holds its site's shard (``scenario_data``: the same shards,
  bit for bit) and answers three messages: ``query`` (its node config, from which the strategy
  learns its site), ``train`` (the round's local SGD steps, ``local_sgd``, from the global
  model, with the batch size, step count, learning rate and seed the strategy sends) and
  ``evaluate`` (the accuracy on its shard, for a federated evaluation).
* ``ScenarioTask(env_id)``: the server's side: ``initial_arrays(seed)``, the untrained model as
  ``learner="torch"`` seeds it, and ``evaluate_fn``, the accuracy on the held-out split.

A client's minibatches follow a seed of its own, (episode seed, round, site), where the
in-process learner draws every site's from one generator in turn; that is the one difference
between the two, and ``docs/flower.md`` measures what it changes. Needs the ``flower`` extra.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping
from typing import Any

import gymnasium as gym
import numpy as np
import torch
from flwr.app import ArrayRecord, Context, Message, MetricRecord, RecordDict
from flwr.clientapp import ClientApp
from torch import nn

from powertrip_env.integrations.flower_nodes import DEFAULT_ENV, node_config_reply, site_of
from powertrip_env.learners.torch_fed import (
    Dataset,
    held_out_accuracy,
    local_sgd,
    mlp_factory,
    scenario_data,
)


class ScenarioTask:
    """A scenario's real learning task: its sites' shards, test split and model (its
    ``[learner]`` table, as ``learner="torch"`` reads it)."""

    def __init__(self, env_id: str = DEFAULT_ENV, **env_kwargs: Any) -> None:
        env = gym.make(env_id, **env_kwargs)
        self.scenario = env.unwrapped.scenario
        env.close()
        self.site_names = tuple(site.name for site in self.scenario.sites)
        self.config = self.scenario.learner
        self.shards, self.test_set = scenario_data(self.scenario, self.config)
        x, y = self.test_set
        self.make_model = mlp_factory(x.shape[1], self.config.hidden, int(y.max()) + 1)

    def initial_arrays(self, seed: int) -> ArrayRecord:
        """The untrained model of an episode whose learner seed is ``seed``: the weights
        ``learner="torch"`` starts that episode from."""
        with torch.random.fork_rng():
            torch.manual_seed(seed)
            model = self.make_model()
        return ArrayRecord(model.state_dict())

    def model(self, arrays: ArrayRecord) -> nn.Module:
        """The model with ``arrays``' weights."""
        model = self.make_model()
        model.load_state_dict(arrays.to_torch_state_dict())
        return model

    def evaluate_fn(self, server_round: int, arrays: ArrayRecord) -> MetricRecord:
        """Central evaluation on the held-out split, for ``PowerTripStrategy.start``."""
        return MetricRecord({"accuracy": held_out_accuracy(self.model(arrays), self.test_set)})

    def shard(self, node_config: Mapping[str, Any]) -> tuple[int, Dataset]:
        """The site a node runs, and its shard."""
        site = site_of(node_config, self.site_names)
        return site, self.shards[site]


@functools.cache
def _task(env_id: str, kwargs: tuple[tuple[str, Any], ...]) -> ScenarioTask:
    """One task per process: a simulation's nodes share their worker's copy of the data.

    The process trains on one thread: a site's model is tiny, and a simulation runs a client
    per core, so torch's default thread pool per client only fights the others for the cores
    (measured on two cores, with another torch process busy: 100 rounds of eight sites took
    85 s on torch's default threads, 2.1 s on one).
    """
    torch.set_num_threads(1)
    return ScenarioTask(env_id, **dict(kwargs))


def round_seed(seed: int, server_round: int, site: int) -> int:
    """The seed of one site's minibatches in one round: distinct per (episode, round, site),
    the same on every run."""
    return int(
        np.random.SeedSequence([int(seed), int(server_round), int(site)]).generate_state(1)[0]
    )


def client_app(env_id: str = DEFAULT_ENV, **env_kwargs: Any) -> ClientApp:
    """A ClientApp that trains whichever site of ``env_id``'s scenario its node runs.

    ``env_kwargs`` are ``gym.make`` arguments that change the scenario (``scenario=``); every
    node of a run must get the same, as the server's strategy does.
    """
    key = tuple(sorted(env_kwargs.items()))
    app = ClientApp()

    @app.query()
    def query(message: Message, context: Context) -> Message:
        return node_config_reply(message, context.node_config)

    @app.train()
    def train(message: Message, context: Context) -> Message:
        task = _task(env_id, key)
        site, (x, y) = task.shard(context.node_config)
        config = message.content["config"]
        model = task.model(message.content["arrays"])
        loss = math.nan
        if len(y):
            seed = round_seed(int(config["seed"]), int(config["server-round"]), site)
            generator = torch.Generator().manual_seed(seed)
            loss = local_sgd(
                model,
                x,
                y,
                int(config["local-steps"]),
                int(config["batch-size"]),
                float(config["lr"]),
                generator,
            )
        metrics = MetricRecord({"num-examples": len(y), "train-loss": loss})
        content = RecordDict({"arrays": ArrayRecord(model.state_dict()), "metrics": metrics})
        return Message(content, reply_to=message)

    @app.evaluate()
    def evaluate(message: Message, context: Context) -> Message:
        task = _task(env_id, key)
        _, shard = task.shard(context.node_config)
        model = task.model(message.content["arrays"])
        accuracy = held_out_accuracy(model, shard) if len(shard[1]) else 0.0
        metrics = MetricRecord({"num-examples": len(shard[1]), "accuracy": accuracy})
        return Message(RecordDict({"metrics": metrics}), reply_to=message)

    return app
