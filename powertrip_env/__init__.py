"""powertrip-env: choose which datacenters train each round when their spare power fluctuates.

Importing the package registers the environments with Gymnasium (Gymnasium 1.x does not load
plugins by itself): ``import powertrip_env`` then ``gymnasium.make("PowerTrip-v0")``, or use
``gymnasium.make("powertrip_env:PowerTrip-v0")`` without the import.
"""

from __future__ import annotations

from gymnasium.envs.registration import register, registry

from powertrip_env import registrations
from powertrip_env.errors import ScenarioError, TraceError
from powertrip_env.scenario import Scenario, load_scenario, scenario_names
from powertrip_env.scenario.types import DEFAULT_MAX_ROUNDS

__version__ = "0.5.0"

# Registered ID -> the named scenario it runs (powertrip_env/scenario/shipped/<name>.toml).
ENV_IDS: dict[str, str] = {
    "PowerTrip-v0": "default",
    "PowerTrip-LoRA-v0": "lora",
    "PowerTrip-KWS-v0": "kws",
    "PowerTrip-EMNIST-v0": "emnist",
    "PowerTrip-LLMFull-v0": "llm-full",
    "PowerTrip-Large-v0": "large",
    "PowerTrip-Digits-v1": "digits",
    "PowerTrip-NonBlocking-v0": "nonblocking",
    "PowerTrip-Solar-v0": "solar",
    "PowerTrip-Wide-v0": "wide",
    "PowerTrip-Measured-v0": "measured",
    "PowerTrip-Wide-Measured-v0": "wide-measured",
    "PowerTrip-Carbon-v0": "carbon",
    "PowerTrip-Carbon-Measured-v0": "carbon-measured",
}
# IDs whose objective is not the time to accuracy: ID -> the reward_mode they are registered with
# (``powertrip_env.rewards``; a user may pass another).
OBJECTIVES: dict[str, str] = {
    "PowerTrip-Carbon-v0": "carbon",
    "PowerTrip-Carbon-Measured-v0": "carbon",
}
# The benchmark's tasks (``powertrip benchmark``): the IDs that pose a sequential
# problem on real power data (sequential headroom >= 1.05 on their test days). The other IDs are
# settings, kept for the workloads they model (one-shot choices but Digits, docs/scenarios.md).
# A task's version changes whenever its results change (tests/test_versions.py pins them), as
# Gymnasium's IDs do.
SUITE_IDS: tuple[str, ...] = (
    "PowerTrip-v0",  # the flagship: blocking joins, 10 sites, grid + solar
    "PowerTrip-NonBlocking-v0",  # INTELLECT-1's non-blocking joins
    "PowerTrip-Solar-v0",  # half the grid power: solar-dominated sites
    "PowerTrip-Wide-v0",  # 24 sites: beyond exhaustive search
)
# The measured track (docs/measured.md): tasks whose sites, links, joins and progress curve
# depart per episode from what the scenario states ([unknowns]), so a policy must measure them.
# The benchmark runs them after SUITE_IDS and reports their learnable room.
MEASURED_SUITE_IDS: tuple[str, ...] = (
    "PowerTrip-Measured-v0",  # the flagship, measured
    "PowerTrip-Wide-Measured-v0",  # the 24 sites, measured
)
# The carbon track (docs/carbon.md): reach the target before a deadline with the least grid
# carbon, on the six flagship sites whose grid has an hourly carbon intensity series. The
# benchmark scores them on their own objective (kg CO2eq, a missed deadline priced in).
CARBON_SUITE_IDS: tuple[str, ...] = (
    "PowerTrip-Carbon-v0",  # six zoned sites, deadline 1.25x the best TTA
    "PowerTrip-Carbon-Measured-v0",  # the same, measured
)
# IDs that draw a new site catalogue every episode (powertrip_env.scenario.sampling): ID -> the
# scenario whose job and power data they use, and the padded site count of their spaces (32
# covers every shipped scenario, PowerTrip-Large-v0 included). Their catalogue changes per
# episode, so they have no native vector env: gym.make_vec runs them in a SyncVectorEnv.
SAMPLED_ENV_IDS: dict[str, tuple[str, int]] = {"PowerTrip-Random-v0": ("default", 32)}
MAX_EPISODE_STEPS = DEFAULT_MAX_ROUNDS  # as the simulation's own limit
# Where Gymnasium finds the environments; tools compare registry entries against these to tell
# PowerTrip IDs (including a user's own registrations) from other environments.
ENTRY_POINT = registrations.ENTRY_POINT
VECTOR_ENTRY_POINT = "powertrip_env.vector_env:PowerTripVectorEnv"

for _env_id, _scenario in ENV_IDS.items():
    if _env_id not in registry:
        register(
            id=_env_id,
            entry_point=ENTRY_POINT,
            vector_entry_point=VECTOR_ENTRY_POINT,
            max_episode_steps=MAX_EPISODE_STEPS,
            kwargs={"scenario": _scenario}
            | ({"reward_mode": OBJECTIVES[_env_id]} if _env_id in OBJECTIVES else {}),
        )

for _env_id, (_scenario, _max_sites) in SAMPLED_ENV_IDS.items():
    if _env_id not in registry:
        register(
            id=_env_id,
            entry_point=ENTRY_POINT,
            max_episode_steps=MAX_EPISODE_STEPS,
            kwargs={"scenario": _scenario, "sites": "random", "max_sites": _max_sites},
        )

__all__ = [
    "CARBON_SUITE_IDS",
    "ENTRY_POINT",
    "ENV_IDS",
    "MEASURED_SUITE_IDS",
    "OBJECTIVES",
    "SAMPLED_ENV_IDS",
    "SUITE_IDS",
    "VECTOR_ENTRY_POINT",
    "Scenario",
    "ScenarioError",
    "TraceError",
    "load_scenario",
    "scenario_names",
]
