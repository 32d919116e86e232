"""powertrip-env: choose which datacenters train each round when their spare power fluctuates.

Importing the package registers the environments with Gymnasium (Gymnasium 1.x does not load
plugins by itself): ``import powertrip_env`` then ``gymnasium.make("PowerTrip-v0")``, or use
``gymnasium.make("powertrip_env:PowerTrip-v0")`` without the import.
"""

from __future__ import annotations

from powertrip_env.errors import ScenarioError, TraceError
from powertrip_env.scenario import Scenario, load_scenario, scenario_names
from powertrip_env.tasks import (
    ENTRY_POINT,
    MAX_EPISODE_STEPS,
    TASKS,
    VECTOR_ENTRY_POINT,
    Task,
    register_task,
    suite_ids,
    task_of,
)

__version__ = "0.5.0"

# The shipped IDs: (ID, the named scenario it runs (powertrip_env/scenario/shipped/<name>.toml),
# the track it joins, whether the benchmark runs it, and other arguments). The benchmark's tasks
# (suite) pose a sequential problem on real power data (sequential headroom >= 1.05 on their
# test days); the other IDs are settings, kept for the workloads they model (one-shot choices
# but Digits, docs/scenarios.md). A task's version changes whenever its results change
# (tests/test_versions.py pins them), as Gymnasium's IDs do. The tracks (docs/benchmark.md):
# "known", the world as the scenario states it; "measured" (docs/measured.md), sites, links,
# joins and progress curve departing per episode from what the scenario states ([unknowns]), so a
# policy must measure them; "moving" (docs/moving.md), the measured track's world with sites that
# slow down and recover, links that dip and power that is called back while the job runs
# ([moving]); "carbon" (docs/carbon.md), reach the target before a deadline with the
# least grid carbon, registered with its objective (reward_mode="carbon").
_CARBON_TASK: dict[str, object] = {"reward_mode": "carbon", "carbon_obs": True}
_SHIPPED: tuple[tuple[str, str, str, bool, dict[str, object]], ...] = (
    ("PowerTrip-v0", "default", "known", True, {}),  # the flagship: blocking joins, 10 sites
    ("PowerTrip-LoRA-v0", "lora", "known", False, {}),
    ("PowerTrip-KWS-v0", "kws", "known", False, {}),
    ("PowerTrip-EMNIST-v0", "emnist", "known", False, {}),
    ("PowerTrip-LLMFull-v0", "llm-full", "known", False, {}),
    ("PowerTrip-Large-v0", "large", "known", False, {}),
    ("PowerTrip-Digits-v1", "digits", "known", False, {}),
    ("PowerTrip-NonBlocking-v0", "nonblocking", "known", True, {}),  # INTELLECT-1's joins
    ("PowerTrip-Solar-v0", "solar", "known", True, {}),  # half the grid power: solar-dominated
    ("PowerTrip-Wide-v0", "wide", "known", True, {}),  # 24 sites: beyond exhaustive search
    ("PowerTrip-Measured-v0", "measured", "measured", True, {}),  # the flagship, measured
    ("PowerTrip-Wide-Measured-v0", "wide-measured", "measured", True, {}),  # 24 sites, measured
    ("PowerTrip-Moving-v0", "moving", "moving", True, {}),  # the flagship, measured and moving
    ("PowerTrip-Wide-Moving-v0", "wide-moving", "moving", True, {}),  # 24 sites, moving
    # six zoned sites, each episode's deadline 1.25x its estimated TTA; and the same, measured;
    # both observe what they are scored on (carbon_obs)
    ("PowerTrip-Carbon-v2", "carbon", "carbon", True, _CARBON_TASK),
    ("PowerTrip-Carbon-Measured-v2", "carbon-measured", "carbon", True, _CARBON_TASK),
)
# IDs that draw a new site catalogue every episode (powertrip_env.scenario.sampling): ID -> the
# scenario whose job and power data they use, and the padded site count of their spaces (32
# covers every shipped scenario, PowerTrip-Large-v0 included). Their catalogue changes per
# episode, so they have no native vector env: gym.make_vec runs them in a SyncVectorEnv.
SAMPLED_ENV_IDS: dict[str, tuple[str, int]] = {"PowerTrip-Random-v0": ("default", 32)}

for _env_id, _scenario, _track, _suite, _kwargs in _SHIPPED:
    if _env_id not in TASKS:
        register_task(_env_id, _scenario, track=_track, suite=_suite, **_kwargs)
for _env_id, (_scenario, _max_sites) in SAMPLED_ENV_IDS.items():
    if _env_id not in TASKS:
        register_task(_env_id, _scenario, vector=False, sites="random", max_sites=_max_sites)

ENV_IDS: dict[str, str] = {env_id: scenario for env_id, scenario, *_ in _SHIPPED}
"""Registered ID -> the named scenario it runs, for the shipped IDs with one site catalogue."""
SUITE_IDS: tuple[str, ...] = suite_ids("known")
"""The shipped tasks of the known track, as registered (``suite_ids("known")`` also lists a
user's own)."""
MEASURED_SUITE_IDS: tuple[str, ...] = suite_ids("measured")
"""The shipped tasks of the measured track (docs/measured.md)."""
MOVING_SUITE_IDS: tuple[str, ...] = suite_ids("moving")
"""The shipped tasks of the moving track (docs/moving.md)."""
CARBON_SUITE_IDS: tuple[str, ...] = suite_ids("carbon")
"""The shipped tasks of the carbon track (docs/carbon.md)."""

__all__ = [
    "CARBON_SUITE_IDS",
    "ENTRY_POINT",
    "ENV_IDS",
    "MAX_EPISODE_STEPS",
    "MEASURED_SUITE_IDS",
    "MOVING_SUITE_IDS",
    "SAMPLED_ENV_IDS",
    "SUITE_IDS",
    "TASKS",
    "VECTOR_ENTRY_POINT",
    "Scenario",
    "ScenarioError",
    "Task",
    "TraceError",
    "load_scenario",
    "register_task",
    "scenario_names",
    "suite_ids",
    "task_of",
]
