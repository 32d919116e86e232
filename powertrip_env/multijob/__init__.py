"""Several training jobs sharing one scenario's sites and spare power, as PettingZoo agents.

Imported as PettingZoo's own environments are::

    from powertrip_env import multijob

    env = multijob.env()                      # the default task, PowerTrip-MultiJob-v0
    env = multijob.env("PowerTrip-Wide-MultiJob-v0", allocation="fcfs")

``env()`` is the AEC environment, wrapped as PettingZoo wraps its own (an action outside the
space or a step before ``reset`` is refused); ``raw_env()`` is it unwrapped. There is no
parallel form: jobs' rounds have their own lengths, so the jobs never all act at once
(docs/multijob.md).
"""

from __future__ import annotations

from typing import Any

try:
    from pettingzoo.utils import wrappers
except ModuleNotFoundError as exc:  # an optional extra: say which
    raise ModuleNotFoundError(
        "powertrip_env.multijob needs PettingZoo: pip install 'powertrip-env[pettingzoo]'"
    ) from exc

from powertrip_env.multijob.allocation import offers
from powertrip_env.multijob.env import MultiJobEnv, resolve_task
from powertrip_env.multijob.tasks import (
    ALLOCATIONS,
    DEFAULT_TASK,
    JOBS,
    PHILLY_INTERARRIVAL_S,
    TASKS,
    MultiJobTask,
    register_multijob,
)

__all__ = [
    "ALLOCATIONS",
    "DEFAULT_TASK",
    "JOBS",
    "PHILLY_INTERARRIVAL_S",
    "TASKS",
    "MultiJobEnv",
    "MultiJobTask",
    "env",
    "offers",
    "raw_env",
    "register_multijob",
    "resolve_task",
]


def raw_env(task: str | None = None, **kwargs: Any) -> MultiJobEnv:
    """The multi-job AEC environment of ``task`` (default ``DEFAULT_TASK``), unwrapped;
    keyword arguments as ``MultiJobEnv``'s."""
    return MultiJobEnv(task, **kwargs)


def env(task: str | None = None, **kwargs: Any) -> Any:
    """The multi-job AEC environment, wrapped as PettingZoo's own: out-of-space actions are
    refused and the order of calls enforced. ``env.unwrapped`` is the ``MultiJobEnv``."""
    made = raw_env(task, **kwargs)
    made = wrappers.AssertOutOfBoundsWrapper(made)
    return wrappers.OrderEnforcingWrapper(made)
