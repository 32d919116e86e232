"""Saved agents: loaded without running code stored in them, and played as policies.

``load_agent(path, algo, label)`` is a saved Stable-Baselines3 zip (``ppo``, ``a2c``,
``maskable_ppo``) or an RLlib checkpoint folder (``rllib``) behind the ``Policy`` interface
(``SB3Policy``, ``RLlibPolicy`` of ``powertrip_env.harness.models.policies``), with the
``gym.make`` arguments of the env it runs on; ``powertrip_env.harness.evaluation.evaluate`` runs it
beside the hand-coded policies (``--model``).

A model file is code: SB3 pickles the policy class and other objects into its zips, and
unpickling runs whatever the file names. SB3 zips are loaded here without unpickling anything in
them (see ``_load_sb3`` and ``powertrip_env.harness.models.sb3_zip``, which reads them); an RLlib
checkpoint is loaded by Ray, which unpickles, so load only checkpoints you trust.

The layering (``tests/test_imports.py``): ``powertrip_env`` ← ``baselines`` ← ``harness`` ←
``agents`` ← ``train_agent.py``, each importing only from itself and the layers before it. A
saved agent may name a policy class of a layer above this one
(``powertrip_env.agents.site_policy.SitePolicy``),
which this module never imports by a statement. The classes it may load come from a registry
instead (``powertrip_env.harness.models.registry``): SB3's own, and those a package registers
when it is imported (``register_policy_class``, ``register_network_classes``;
``powertrip_env.agents.site_policy`` registers its policies and site encoder). When a model
names a class no one has registered, ``load_plugins`` imports the modules named in ``PLUGINS``,
which register theirs, and looks again. Nothing else here reaches above the harness:
evaluating hand-coded policies never imports ``agents``. How a model's spaces are matched with
an env's is ``powertrip_env.harness.models.spaces``'.
"""

from __future__ import annotations

import importlib
import importlib.util
import io
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import gymnasium as gym
from gymnasium import spaces

import powertrip_env  # noqa: F401  (registers the IDs the models run on)
from powertrip_env.baselines.base import Policy
from powertrip_env.errors import EvaluationError
from powertrip_env.harness.models.policies import RLlibPolicy, SB3Policy
from powertrip_env.harness.models.registry import (
    INTERFACES,
    POLICY_CLASSES,
    REGISTERED,
    ActionInterface,
    algos_naming,
    load_plugins,
    plugin_note,
)
from powertrip_env.harness.models.sb3_zip import (
    algo_of,
    is_pickled,
    pickled_reference,
    read_sb3_data,
    replacements,
    unsafe,
)
from powertrip_env.harness.models.spaces import (
    fitting_env_spaces,
    mode_kwargs,
    model_env_kwargs,
    saved_space_shape,
    shape_text,
    space_shape,
)

SB3_ALGOS: dict[str, tuple[str, str]] = {
    "ppo": ("stable_baselines3", "PPO"),
    "a2c": ("stable_baselines3", "A2C"),
    "maskable_ppo": ("sb3_contrib", "MaskablePPO"),
}
"""The Stable-Baselines3 algorithms by their ``--algo`` name: the module and class that load a
saved zip here and train one in ``agents`` (``powertrip_env.agents.hyperparams.ALGOS`` imports
them from this table, its one definition: ``agents`` may import this layer, not the reverse).
Named, not imported, so that evaluating hand-coded policies needs neither library."""

ALGOS: dict[str, tuple[str, str]] = {
    **SB3_ALGOS,
    # a checkpoint folder of Algorithm.save
    "rllib": ("powertrip_env.integrations.rllib", "load_module"),
}
"""Every ``--algo`` a saved model may be loaded with: the SB3 ones and RLlib's."""


def sb3_algorithm(algo: str) -> type:
    """The class of the SB3 algorithm ``algo`` (a key of ``SB3_ALGOS``), imported now."""
    module_name, class_name = SB3_ALGOS[algo]
    return getattr(importlib.import_module(module_name), class_name)


def _interface_for(
    path: str, env_id: str, base: Mapping[str, Any], obs: tuple[Any, ...], action: tuple[Any, ...]
) -> tuple[ActionInterface, spaces.Space, spaces.Space] | None:
    """The registered interface whose wrapped env has the saved spaces, with those spaces;
    None for a model of the env's own per-site action space."""
    if action[0] in ("MultiBinary", "MultiDiscrete"):
        return None
    load_plugins()
    try:
        env = gym.make(env_id, **base)
    except ValueError as exc:
        raise EvaluationError(f"model {path!r} cannot run on {env_id}: {exc}") from None
    try:
        for interface in INTERFACES.values():
            wrapped = interface.wrap(env)
            found = (space_shape(wrapped.observation_space), space_shape(wrapped.action_space))
            if found == (obs, action):
                return interface, wrapped.observation_space, wrapped.action_space
    finally:
        env.close()
    known = ", ".join(INTERFACES) or "none registered"
    raise EvaluationError(
        f"model {path!r} acts in {shape_text(action)} on {shape_text(obs)}: neither "
        f"PowerTripEnv's own spaces (MultiBinary(N), MultiDiscrete([2]*N)) nor those of an "
        f"action interface ({known}{plugin_note()})"
    )


# ``--model pretrained``: the general agent shipped in agents/pretrained (see its README.md).
PRETRAINED = "pretrained"


def pretrained_model_path() -> Path:
    """The shipped pretrained agent's zip, in the ``agents`` package installed beside this one.

    Found from this file's own location, not by importing ``agents``: ``python -m`` puts the
    current folder first on ``sys.path``, so a folder with an ``agents`` package of its own
    would otherwise supply the "shipped" model, and a model file is code. The wheel installs
    ``harness`` and ``agents`` side by side in ``powertrip_env`` (pyproject.toml's
    ``package-dir``), and an editable install of the checkout finds both in the checkout, two
    folders above this file in either case.
    """
    return Path(__file__).resolve().parents[2] / "agents" / "pretrained" / "model.zip"


def _resolve_model_path(path: str) -> Path:
    if path == PRETRAINED:
        shipped = pretrained_model_path()
        if not shipped.is_file():
            raise EvaluationError(f"the pretrained agent {str(shipped)!r} is missing; reinstall")
        return shipped
    candidates = [Path(path), Path(f"{path}.zip")]
    for candidate in candidates:
        if candidate.is_file():
            return candidate
    raise EvaluationError(f"model file {path!r} not found")


def load_model(
    path: str,
    algo: str,
    env_id: str = "PowerTrip-v0",
    env_kwargs: Mapping[str, Any] | None = None,
) -> tuple[Any, dict[str, Any]]:
    """A saved agent and the ``gym.make`` arguments of the env it runs on.

    Refuses files saved by another algorithm than ``algo``, models whose spaces do not fit
    ``env_id`` made with ``env_kwargs`` (plus the model's own observation and action modes),
    and SB3 files that could only be loaded by unpickling them (see ``_load_sb3``).
    """
    model, kwargs, _ = _load(path, algo, env_id, env_kwargs)
    return model, kwargs


def _load(
    path: str, algo: str, env_id: str, env_kwargs: Mapping[str, Any] | None
) -> tuple[Any, dict[str, Any], ActionInterface | None]:
    """``load_model``, plus the action interface the model acts through (None: the env's own
    spaces), found once while its spaces are checked."""
    if algo not in ALGOS:
        raise EvaluationError(
            f"unknown algorithm {algo!r} for {path!r}; allowed: {', '.join(ALGOS)}"
        )
    base = dict(env_kwargs or {})
    if algo == "rllib":
        module = _load_rllib(path)
        kwargs = {**base, **model_env_kwargs(module, path)}
        obs, action = space_shape(module.observation_space), space_shape(module.action_space)
        fitting_env_spaces(path, env_id, kwargs, obs, action)
        return module, kwargs, None
    if path != PRETRAINED and (Path(path) / "rllib_checkpoint.json").is_file():
        raise EvaluationError(f"model {path!r} is an RLlib checkpoint; pass --algo rllib")
    return _load_sb3(_resolve_model_path(path), path, algo, env_id, base)


def _load_sb3(
    file: Path, path: str, algo: str, env_id: str, base: dict[str, Any]
) -> tuple[Any, dict[str, Any], ActionInterface | None]:
    """Load an SB3 zip without unpickling anything in it (see ``sb3_zip``'s note).

    The file is read once, and SB3 loads those bytes, so what was checked is what is loaded.
    """
    try:
        raw = file.read_bytes()
    except OSError as exc:
        raise EvaluationError(f"cannot read model {str(file)!r}: {exc.strerror or exc}") from None
    data = read_sb3_data(raw, file)
    policy = pickled_reference(data.get("policy_class"))
    algos = algos_naming(policy)
    if not algos:
        known = sorted({name for names in POLICY_CLASSES.values() for name in names})
        what = f"names the class {policy}" if policy else "holds a class stored by value"
        raise unsafe(
            file,
            "policy_class",
            f"{what}, not one of the policy classes evaluate loads ({', '.join(known)}"
            f"{plugin_note()})",
        )
    saved = algo_of(data)
    if saved != algo or algo not in algos:
        hint = (
            f"it was saved by {saved}; pass --algo {saved}"
            if saved in ALGOS
            else (f"it was not saved by any of {', '.join(ALGOS)}")
        )
        raise EvaluationError(f"model {str(file)!r} does not match --algo {algo}: {hint}")
    shapes = {}
    for key in ("observation_space", "action_space"):
        shapes[key] = saved_space_shape(data.get(key))
        if shapes[key] is None:
            raise unsafe(file, key, "has no readable shape")
    obs, action = shapes["observation_space"], shapes["action_space"]
    found = _interface_for(path, env_id, base, obs, action)
    interface = None if found is None else found[0]
    if found is None:
        kwargs = {**base, **mode_kwargs(obs, action, path)}
        obs_space, action_space = fitting_env_spaces(path, env_id, kwargs, obs, action)
    else:
        kwargs, (_, obs_space, action_space) = dict(base), found
    policy_class = REGISTERED.get(policy)
    if policy_class is None:  # one of SB3's own
        module_name, class_name = policy.rsplit(".", 1)
        try:
            policy_class = getattr(importlib.import_module(module_name), class_name)
        except (ImportError, AttributeError) as exc:
            raise EvaluationError(
                f"model {str(file)!r}: cannot import its policy class {policy}: {exc}"
            ) from None
    known_objects = {
        "policy_class": policy_class,
        "observation_space": obs_space,
        "action_space": action_space,
    }
    objects = replacements(file, data, known_objects)
    for key, item in data.items():  # a second guard: SB3 would unpickle anything left over
        if is_pickled(item) and key not in objects:
            raise unsafe(file, key, "is a pickled object evaluate cannot rebuild")
    algo_cls = sb3_algorithm(algo)
    try:
        model = algo_cls.load(io.BytesIO(raw), device="cpu", custom_objects=objects)
    except Exception as exc:  # SB3 raises many types for a broken file; report, don't trace
        raise EvaluationError(f"cannot load model {str(file)!r} as {algo}: {exc}") from None
    return model, kwargs, interface


def _load_rllib(path: str) -> Any:
    """The RLModule of an RLlib checkpoint folder (needs the ``rllib`` extra)."""
    if importlib.util.find_spec("ray") is None:
        raise EvaluationError(
            f"model {path!r}: evaluating an RLlib checkpoint needs Ray RLlib; "
            "pip install 'powertrip-env[rllib]'"
        )
    if not Path(path).is_dir():
        raise EvaluationError(f"model {path!r}: not a folder; give the folder Algorithm.save wrote")
    from powertrip_env.integrations.rllib import load_module

    try:
        return load_module(path)
    except FileNotFoundError as exc:
        raise EvaluationError(str(exc)) from None
    except Exception as exc:  # a broken checkpoint raises many types; report, don't trace
        raise EvaluationError(f"cannot load the RLlib checkpoint {path!r}: {exc}") from None


def model_label(path: str) -> str:
    """How a saved agent is named in the tables: ``pretrained``, a zip's stem, else the name of
    the checkpoint folder."""
    if path == PRETRAINED:
        return PRETRAINED
    if Path(path).suffix == ".zip":
        return Path(path).stem
    return Path(path).resolve().name


def load_agent(
    path: str,
    algo: str,
    label: str,
    env_id: str = "PowerTrip-v0",
    env_kwargs: Mapping[str, Any] | None = None,
) -> tuple[Policy, dict[str, Any]]:
    """The saved agent at ``path`` as a policy named ``label``, and the ``gym.make`` arguments
    of the env it runs on (``load_model``, whose refusals it raises)."""
    model, kwargs, interface = _load(path, algo, env_id, env_kwargs)
    if algo == "rllib":
        return RLlibPolicy(model, label), kwargs
    agent = SB3Policy(model, label) if interface is None else interface.policy(model, label)
    return agent, kwargs
