"""Real federated training in PyTorch, on the simulator's clock.

Each site holds a shard of a real data set (scikit-learn's digits by default, shipped in
``traces/digits.csv.gz``). In a round, every site that completes it starts from the global
model and runs the round's local steps (``[workload] local_steps`` SGD steps of ``site_batch``
samples from its shard); the completed sites' models are then aggregated:

* ``fedavg``: the new global model is their average, weighted by shard size (McMahan et al.);
* ``diloco``: their weighted mean change is an outer gradient for a Nesterov-momentum step
  (``outer_lr``, ``outer_momentum``), as DiLoCo does (docs/references.md).

A site that dropped out, sat out, or trained in a round cut at the budget contributes nothing.
Accuracy is measured on a held-out split after every round. The split, the shards (by the sites'
data shares, with an optional Dirichlet(α) label skew) and the model's training all follow
seeds: the data from ``[learner] data_seed``, the model and its minibatches from the episode's
seed, so the same ``reset(seed=...)`` gives the same accuracies, bit for bit, on one machine.

Users can bring their own model and data: ``TorchFedLearner(model_factory=..., datasets=...,
test_set=...)`` with one ``(inputs, labels)`` pair of tensors per site.
"""

from __future__ import annotations

import gzip
import math
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import torch
from torch import nn
from torch.nn.utils import parameters_to_vector, vector_to_parameters

from powertrip_env.scenario import LearnerConfig, Scenario, data_dir

if TYPE_CHECKING:
    from powertrip_env import dynamics
    from powertrip_env.simulation import Simulation

Dataset = tuple[torch.Tensor, torch.Tensor]  # inputs (n, ...) float, labels (n,) int64


def load_digits() -> Dataset:
    """scikit-learn's digits: 1,797 images of 8×8 pixels (0-16, scaled to [0, 1]), 10 classes."""
    with gzip.open(data_dir() / "digits.csv.gz", "rt") as fh:
        table = np.loadtxt(fh, delimiter=",", dtype=np.float32)
    return torch.from_numpy(table[:, :-1] / 16.0), torch.from_numpy(table[:, -1].astype(np.int64))


def split_data(
    data: Dataset,
    shares: Sequence[float],
    *,
    test_fraction: float = 0.2,
    dirichlet_alpha: float = 0.0,
    seed: int = 0,
) -> tuple[list[Dataset], Dataset]:
    """Held-out test set, then one shard per site sized by its data share.

    With ``dirichlet_alpha > 0`` each site's class mix is drawn from Dirichlet(α) (smaller α:
    fewer classes per site, the usual non-IID benchmark), and each class's samples are dealt to
    the sites in proportion to share × the site's weight for that class.
    """
    x, y = data
    rng = np.random.default_rng(seed)
    order = rng.permutation(len(y))
    n_test = round(test_fraction * len(y))
    test, train = order[:n_test], order[n_test:]
    shares = np.asarray(shares, dtype=np.float64)
    classes = int(y.max()) + 1
    owner = np.empty(len(train), dtype=np.int64)
    if dirichlet_alpha > 0:
        mix = rng.dirichlet(np.full(classes, dirichlet_alpha), size=len(shares))  # (N, C)
        y_train = y[train].numpy()
        for c in range(classes):
            members = np.flatnonzero(y_train == c)
            weights = shares * mix[:, c]
            weights = weights / weights.sum() if weights.sum() > 0 else shares / shares.sum()
            owner[members] = rng.choice(len(shares), size=members.size, p=weights)
    else:
        cuts = np.round(np.cumsum(shares / shares.sum()) * len(train)).astype(np.int64)
        owner = np.searchsorted(cuts, np.arange(len(train)), side="right")
    shards = [(x[train[owner == i]], y[train[owner == i]]) for i in range(len(shares))]
    return shards, (x[test], y[test])


def scenario_data(scenario: Scenario, cfg: LearnerConfig) -> tuple[list[Dataset], Dataset]:
    """The sites' shards and the held-out test set of ``scenario`` under ``cfg``.

    The one place the data of a scenario's sites is cut, so that every process that trains a
    site (this learner, or a Flower client of ``powertrip_env.integrations.flower``) holds the
    same shard, bit for bit.
    """
    shares = [float(site.data_share) for site in scenario.sites]
    return split_data(
        load_digits(),
        shares,
        test_fraction=cfg.test_fraction,
        dirichlet_alpha=cfg.dirichlet_alpha,
        seed=cfg.data_seed,
    )


def local_sgd(
    model: nn.Module,
    x: torch.Tensor,
    y: torch.Tensor,
    steps: int,
    batch: int,
    lr: float,
    generator: torch.Generator,
) -> float:
    """A site's round: ``steps`` plain SGD steps on minibatches of ``batch`` drawn from its
    shard with ``generator``, in place on ``model``; returns the last minibatch's loss.

    Written once for the in-process learner and the Flower client, so that both train a site
    the same way.
    """
    params = list(model.parameters())
    value = None
    for _ in range(steps):
        idx = torch.randint(len(y), (batch,), generator=generator)
        value = nn.functional.cross_entropy(model(x[idx]), y[idx])
        grads = torch.autograd.grad(value, params)
        with torch.no_grad():
            for p, g in zip(params, grads, strict=True):
                p.sub_(lr * g)
    return math.nan if value is None else float(value.detach())  # read once, not every step


def held_out_accuracy(model: nn.Module, test_set: Dataset) -> float:
    """The share of ``test_set`` that ``model`` classifies right."""
    x, y = test_set
    with torch.no_grad():
        return float((model(x).argmax(dim=-1) == y).float().mean())


def mlp_factory(inputs: int, hidden: int, classes: int) -> Callable[[], nn.Module]:
    """A one-hidden-layer MLP (the default model)."""

    def make() -> nn.Module:
        return nn.Sequential(nn.Linear(inputs, hidden), nn.ReLU(), nn.Linear(hidden, classes))

    return make


class TorchFedLearner:
    """Real federated training of a small PyTorch model; see the module docstring.

    :param model_factory: builds an untrained ``nn.Module`` (default: the ``[learner]`` MLP).
    :param datasets: one ``(inputs, labels)`` pair per site (default: the ``[learner]`` data set
        cut by the sites' data shares).
    :param test_set: ``(inputs, labels)`` to measure accuracy on; required with ``datasets``.
    :param config: training settings (default: the scenario's ``[learner]`` table).
    """

    name = "torch"

    def __init__(
        self,
        model_factory: Callable[[], nn.Module] | None = None,
        datasets: Sequence[Dataset] | None = None,
        test_set: Dataset | None = None,
        config: LearnerConfig | None = None,
    ) -> None:
        if (datasets is None) != (test_set is None):
            raise ValueError("give datasets and test_set together (or neither)")
        self.model_factory = model_factory
        self.user_data = (list(datasets), test_set) if datasets is not None else None
        self.config = config
        self.cfg = config or LearnerConfig()
        self._data_key: Any = None
        self.shards: list[Dataset] = []
        self.test_set: Dataset | None = None
        self.accuracy = 0.0

    # ------------------------------------------------------------------ episode

    def reset(self, sim: Simulation, seed: int) -> float:
        cfg = self.config or sim.scenario.learner
        self.cfg = cfg
        self.local_steps = int(sim.params.local_steps)
        self.batch = int(sim.params.site_batch[0])
        self._prepare_data(sim, cfg)
        with torch.random.fork_rng():
            torch.manual_seed(seed)
            self.model = self._factory()()
        self.weights = parameters_to_vector(self.model.parameters()).detach().clone()
        self.momentum = torch.zeros_like(self.weights)
        self.generator = torch.Generator().manual_seed(seed)
        self.accuracy = self.evaluate()
        return self.accuracy

    def _factory(self) -> Callable[[], nn.Module]:
        if self.model_factory is not None:
            return self.model_factory
        x, y = self.test_set
        return mlp_factory(x.shape[1], self.cfg.hidden, int(y.max()) + 1)

    def _prepare_data(self, sim: Simulation, cfg: LearnerConfig) -> None:
        """The shards and test set, made once per scenario and learner settings."""
        n = sim.params.n_sites
        if self.user_data is not None:
            shards, test = self.user_data
            if len(shards) != n:
                raise ValueError(
                    f"TorchFedLearner: {len(shards)} datasets for a scenario of {n} sites; give "
                    "one (inputs, labels) pair per site, in site order"
                )
            self.shards, self.test_set = shards, test
            return
        key = (tuple(float(s) for s in sim.params.data_share), cfg)
        if key != self._data_key:
            self.shards, self.test_set = scenario_data(sim.scenario, cfg)
            self._data_key = key

    # ------------------------------------------------------------------ round

    def round(self, result: dynamics.RoundResult, i: int) -> float:
        if bool(result.idle[i]) or bool(result.cut[i]):
            return self.accuracy
        done = np.flatnonzero(result.selected[i] & ~result.dropped[i])
        trained, sizes = [], []
        for site in done:
            x, y = self.shards[site]
            if len(y) == 0:
                continue  # a site without data has nothing to teach
            trained.append(self._local_training(x, y))
            sizes.append(len(y))
        if trained:
            self.aggregate(trained, sizes)
            self.accuracy = self.evaluate()
        return self.accuracy

    def _local_training(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        """The site's parameters after the round's local SGD steps from the global model.

        The model gets a copy of the global weights: ``vector_to_parameters`` makes the
        parameters views of the vector it is given, so training on ``self.weights`` itself
        would carry each site's steps into the next site's start.
        """
        vector_to_parameters(self.weights.clone(), self.model.parameters())
        local_sgd(self.model, x, y, self.local_steps, self.batch, self.cfg.lr, self.generator)
        return parameters_to_vector(self.model.parameters()).detach().clone()

    def aggregate(self, trained: Sequence[torch.Tensor], sizes: Sequence[int]) -> None:
        """FedAvg, or DiLoCo's outer Nesterov step, over the sites' parameters."""
        w = torch.tensor(sizes, dtype=self.weights.dtype)
        mean = (torch.stack(list(trained)) * (w / w.sum())[:, None]).sum(dim=0)
        if self.cfg.aggregation == "fedavg":
            self.weights = mean
            return
        outer_grad = self.weights - mean
        mu = self.cfg.outer_momentum
        self.momentum = mu * self.momentum + outer_grad
        self.weights = self.weights - self.cfg.outer_lr * (outer_grad + mu * self.momentum)

    def evaluate(self) -> float:
        """Accuracy of the global model on the held-out set."""
        vector_to_parameters(self.weights, self.model.parameters())
        return held_out_accuracy(self.model, self.test_set)
