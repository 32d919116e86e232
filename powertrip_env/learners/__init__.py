"""Progress models behind one interface: what a round of training teaches the model.

The clock (power, GPUs, network) is the simulator's, and stays the same whichever learner runs.
A learner turns "these sites completed their local steps on their own data this round (the
others dropped out, sat out, or the round was cut)" into the model's accuracy:

* ``SurrogateLearner`` (the default) is the closed-form surrogate of docs/model.md: large-batch
  progress, the accuracy curve a(P) and the non-IID coverage term. It is the simulator's own
  accuracy, computed for a whole batch of episodes at once, so it costs nothing and serves the
  vector env too.
* ``TorchFedLearner`` (``learner="torch"``, needs the ``train`` extra) trains a real model: each
  completing site runs the round's local SGD steps on its own shard of a real data set, and the
  sites' models are aggregated with FedAvg or DiLoCo's outer Nesterov step. This is FedScale's
  approach: real training on a virtual clock. ``powertrip validate`` measures how far the
  surrogate is from it, and ``powertrip calibrate`` refits the surrogate to it.

A learner is an object with ``reset(sim, seed) -> accuracy`` and ``round(result, i) ->
accuracy`` (``Learner``); pass one as ``gym.make(ID, learner=...)``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

if TYPE_CHECKING:
    from powertrip_env import dynamics
    from powertrip_env.simulation import Simulation

LEARNERS = ("surrogate", "torch")


def require_torch(purpose: str) -> None:
    """Fail early, with the install that fixes it, when PyTorch is absent.

    The package itself needs only gymnasium, numpy and pandas (cluster workers stay light), so
    real training is the one path that can meet a missing torch; a bare ``ModuleNotFoundError``
    deep in the learner would not say which extra to install.
    """
    try:
        import torch  # noqa: F401
    except ImportError as exc:
        raise ImportError(
            f"{purpose} needs PyTorch, which is not installed; pip install 'powertrip-env[train]'"
        ) from exc


@runtime_checkable
class Learner(Protocol):
    """What the environment asks of a progress model, once per episode and once per round."""

    name: str

    def reset(self, sim: Simulation, seed: int) -> float:
        """Start an episode of ``sim`` from an untrained model; return its accuracy.

        ``seed`` comes from the episode's seed, so the same ``reset(seed=...)`` gives the same
        training, bit for bit.
        """

    def round(self, result: dynamics.RoundResult, i: int) -> float:
        """Apply round ``result`` to episode ``i``; return the accuracy after it.

        The sites that trained are ``result.selected[i] & ~result.dropped[i]``; a round that is
        ``idle`` or ``cut`` teaches nothing.
        """


class SurrogateLearner:
    """The closed-form surrogate (docs/model.md, "Learning progress"): the simulator's accuracy."""

    name = "surrogate"

    def reset(self, sim: Simulation, seed: int) -> float:
        return float(sim.params.a0)

    def round(self, result: dynamics.RoundResult, i: int) -> float:
        return float(result.state.accuracy[i])


def make_learner(spec: str | Learner) -> Learner:
    """A learner from ``"surrogate"``, ``"torch"`` or a ``Learner`` object."""
    if isinstance(spec, str):
        if spec == "surrogate":
            return SurrogateLearner()
        if spec == "torch":
            require_torch("learner='torch'")
            from powertrip_env.learners.torch_fed import TorchFedLearner

            return TorchFedLearner()
        raise ValueError(
            f"learner={spec!r} is not supported; allowed: {', '.join(LEARNERS)} or a Learner "
            "object (reset(sim, seed) and round(result, i))"
        )
    if not isinstance(spec, Learner):
        raise ValueError(
            f"learner={spec!r}: give {' or '.join(repr(n) for n in LEARNERS)} or an object with "
            "name, reset(sim, seed) and round(result, i)"
        )
    return spec


def is_surrogate(learner: Any) -> bool:
    """Whether the simulator's own accuracy is the learner's (nothing to override)."""
    return isinstance(learner, SurrogateLearner)
