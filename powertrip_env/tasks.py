"""The registered IDs: which scenario each runs, which track it joined, whether the benchmark
runs it, and the sentences of ``PowerTripEnv``'s documentation that name them.

An ID joins a track when it is registered (``register_task(..., track=...)``), never by being
listed somewhere else: the harness's tracks (``powertrip_env.harness.tracks``) score a task by
the track it names here, and the tools that take "every task of the suite" read ``suite_ids``.
The track is a name at this floor, since what scores it (its rules, references, bound and
board) lives in the harness above; ``powertrip_env.harness.tracks.track_named`` turns it into
the declaration. The documentation's sentences are filled in from this table and the data
folder's record, so that neither list is kept by hand.
"""

from __future__ import annotations

import re
import textwrap
from dataclasses import dataclass
from typing import Any

from powertrip_env.scenario import scenario_names
from powertrip_env.scenario.provenance import power_data_sentence
from powertrip_env.scenario.types import DEFAULT_MAX_ROUNDS

ENTRY_POINT = "powertrip_env.env:PowerTripEnv"
"""Where Gymnasium finds the environment (``powertrip_env.ENTRY_POINT``)."""
VECTOR_ENTRY_POINT = "powertrip_env.vector_env:PowerTripVectorEnv"
"""Where ``gym.make_vec`` finds its native vector env (``powertrip_env.VECTOR_ENTRY_POINT``)."""
MAX_EPISODE_STEPS = DEFAULT_MAX_ROUNDS  # as the simulation's own limit

POWER_DATA_PLACEHOLDER = (
    "<power data of the registered IDs: powertrip_env.tasks.document_power_data()>"
)
IDS_PLACEHOLDER = "<registered IDs: powertrip_env.tasks.document_power_data()>"


@dataclass(frozen=True)
class Task:
    """A registered ID: the scenario it runs (a shipped name or a file), the name of the track
    it joined (``"known"``, ``"measured"``, ``"carbon"``, or a user's), and whether it is one
    of the benchmark's tasks (``suite``) or a setting kept for the workload it models."""

    env_id: str
    scenario: str
    track: str
    suite: bool


TASKS: dict[str, Task] = {}
"""Every ID registered with ``register_task``, in the order of registration (the shipped ones
first: ``import powertrip_env`` registers them)."""


def register_task(
    env_id: str,
    scenario: str,
    *,
    track: str = "known",
    suite: bool = False,
    vector: bool = True,
    **kwargs: Any,
) -> Task:
    """Register ``env_id`` with Gymnasium on ``scenario`` (other ``kwargs`` go to the env, e.g.
    the objective's ``reward_mode``) and record the track it joins.

    The track is declared here, once: the benchmark, ``evaluate --policies all``, the agents'
    final table and the generated docs ask it. ``suite`` puts the ID among the benchmark's tasks
    (``suite_ids``); ``vector=False`` gives the ID no native vector env (an ID whose catalogue
    changes per episode: ``gym.make_vec`` runs it in a ``SyncVectorEnv``). Registering an ID
    that is already registered otherwise refuses with a ``ValueError``, as Gymnasium would
    overwrite the first with a warning.
    """
    from gymnasium.envs.registration import register, registry

    if not isinstance(track, str) or not track:
        raise ValueError(f"register_task({env_id!r}): track={track!r} must be a track's name")
    arguments = {"scenario": scenario, **kwargs}
    if env_id in TASKS or (env_id in registry and registry[env_id].kwargs != arguments):
        raise ValueError(f"register_task: {env_id!r} is already registered")
    if env_id not in registry:  # a reload of the package finds its own registrations
        register(
            id=env_id,
            entry_point=ENTRY_POINT,
            vector_entry_point=VECTOR_ENTRY_POINT if vector else None,
            max_episode_steps=MAX_EPISODE_STEPS,
            kwargs=arguments,
        )
    task = TASKS[env_id] = Task(env_id, scenario, track, bool(suite))
    return task


def task_of(env_id: str) -> Task | None:
    """The task ``env_id`` was registered as, or ``None``: an ID registered with plain
    ``gymnasium.register`` (or a scenario file) has joined no track."""
    return TASKS.get(env_id)


def suite_ids(track: str | None = None) -> tuple[str, ...]:
    """The benchmark's tasks in the order they were registered, or those of one ``track``."""
    return tuple(
        t.env_id for t in TASKS.values() if t.suite and (track is None or t.track == track)
    )


def is_entry_point(entry_point: Any) -> bool:
    """Whether a registration's entry point is ``PowerTripEnv``: its ``module:name``, as the
    package registers it, or the class itself, as a user may."""
    if callable(entry_point):
        entry_point = f"{entry_point.__module__}:{entry_point.__qualname__}"
    return entry_point == ENTRY_POINT


def registered_scenarios() -> list[tuple[str, str, dict[str, Any]]]:
    """(ID, shipped scenario, other arguments) of every Gymnasium registration of this class
    on a shipped scenario, in the order they were registered: ``import powertrip_env``
    registers its IDs before this module can be imported."""
    from gymnasium.envs.registration import registry

    shipped = scenario_names()
    found = []
    for env_id, spec in registry.items():
        kwargs = dict(spec.kwargs)
        name = kwargs.pop("scenario", None)
        if is_entry_point(spec.entry_point) and isinstance(name, str) and name in shipped:
            found.append((env_id, name, kwargs))
    return found


def document_power_data(doc: str | None) -> str | None:
    """``doc`` with the registered IDs and which of them run on real power data filled in,
    from the registry and the data folder's record (``powertrip_env.scenario.provenance``), so
    that neither list is kept by hand (``None`` stays ``None``: ``python -OO``)."""
    if doc is None:
        return None
    registered = registered_scenarios()
    ids = (
        "Registered IDs, each with its scenario: "
        + ", ".join(
            f"`{env_id}` (`{name}`" + "".join(f", `{k}={v!r}`" for k, v in kwargs.items()) + ")"
            for env_id, name, kwargs in registered
        )
        + "."
    )
    filled = {
        POWER_DATA_PLACEHOLDER: power_data_sentence([(e, name) for e, name, _ in registered]),
        IDS_PLACEHOLDER: textwrap.fill(ids, 92, break_on_hyphens=False),
    }
    for placeholder, text in filled.items():
        match = re.search(r"^([ \t]*)" + re.escape(placeholder) + r"$", doc, re.MULTILINE)
        if match is None:
            raise ValueError(f"the docstring has no placeholder {placeholder!r}")
        indented = "\n".join(match.group(1) + line for line in text.splitlines())
        doc = doc[: match.start()] + indented + doc[match.end() :]
    return doc
