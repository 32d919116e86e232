"""Saved agents: loaded without running code stored in them, and played as policies.

``load_agent(path, algo, label)`` is a saved Stable-Baselines3 zip (``ppo``, ``a2c``,
``maskable_ppo``) or an RLlib checkpoint folder (``rllib``) behind the ``Policy`` interface
(``SB3Policy``, ``RLlibPolicy``), with the ``gym.make`` arguments of the env it runs on;
``powertrip_env.baselines.evaluate`` runs it beside the hand-coded policies (``--model``).

A model file is code: SB3 pickles the policy class and other objects into its zips, and
unpickling runs whatever the file names. SB3 zips are loaded here without unpickling anything in
them (see ``_load_sb3``); an RLlib checkpoint is loaded by Ray, which unpickles, so load only
checkpoints you trust.

The layering (``tests/test_imports.py``): ``powertrip_env`` ← ``baselines`` ← ``agents`` ←
``train_agent.py``, each importing only from itself and the layers before it. A saved agent may
name a policy class of a layer above this one (``powertrip_env.agents.site_policy.SitePolicy``),
which this module never imports by a statement. The classes it may load come from a registry
instead: SB3's own, and those a package registers when it is imported (``register_policy_class``,
``register_network_classes``; ``powertrip_env.agents.site_policy`` registers its policies and site
encoder). When a model names a class no one has registered, ``load_plugins`` imports the modules
named in ``PLUGINS``, which register theirs, and looks again. Nothing else here reaches above
``baselines``: evaluating hand-coded policies never imports ``agents``.
"""

from __future__ import annotations

import base64
import importlib
import importlib.util
import inspect
import io
import json
import pickletools
import re
import zipfile
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces

import powertrip_env  # noqa: F401  (registers the IDs the models run on)
from powertrip_env.baselines.base import Policy

ALGOS: dict[str, tuple[str, str]] = {
    "ppo": ("stable_baselines3", "PPO"),
    "a2c": ("stable_baselines3", "A2C"),
    "maskable_ppo": ("sb3_contrib", "MaskablePPO"),
    # a checkpoint folder of Algorithm.save
    "rllib": ("powertrip_env.integrations.rllib", "load_module"),
}


class EvaluationError(ValueError):
    """Bad input to an evaluation (names, files, folders); the CLI prints it and exits 2."""


# --------------------------------------------------------------------------- loading models
#
# A model file is code. An SB3 zip keeps its policy class, spaces, schedules and buffers
# pickled (cloudpickle) in its "data" JSON, and SB3's ``load`` unpickles every one of them,
# which runs whatever the file names, before anything can be checked. So nothing here unpickles
# any of it: every pickled entry is replaced through ``load(custom_objects=...)`` by an object
# built from what is already known (the policy class from a short list of known classes, the
# spaces of the env the model will run on, constant schedules, empty buffers), and a file with
# a pickled entry that cannot be replaced that way is refused before SB3 sees it. The weights
# are read by ``torch.load(weights_only=True)``, which builds tensors and nothing else.

# The policy classes a model may name, by algorithm, as cloudpickle names a class
# ("module.Name"): SB3's and sb3-contrib's own, then those registered (``register_policy_class``).
_POLICY_CLASSES: dict[str, list[str]] = {
    "ppo": [
        "stable_baselines3.common.policies.ActorCriticPolicy",
        "stable_baselines3.common.policies.MultiInputActorCriticPolicy",
    ],
    "a2c": [
        "stable_baselines3.common.policies.ActorCriticPolicy",
        "stable_baselines3.common.policies.MultiInputActorCriticPolicy",
    ],
    "maskable_ppo": [
        "sb3_contrib.common.maskable.policies.MaskableActorCriticPolicy",
        "sb3_contrib.common.maskable.policies.MaskableMultiInputActorCriticPolicy",
    ],
}
# The registered classes themselves, by "module.Name" (SB3's are imported when a model names one).
_REGISTERED: dict[str, type] = {}
# Classes a policy_kwargs value may name beyond the loader's own (``_policy_kwargs``), and the
# activation names a registered policy takes in place of a class (``activation_fn="tanh"``).
_NETWORK_CLASSES: list[type] = []
_ACTIVATION_NAMES: set[str] = set()
# Torch's activations a plain SB3 policy may be given (``activation_fn``), by name in torch.nn.
_TORCH_ACTIVATIONS = ("ReLU", "Tanh", "ELU", "GELU", "SiLU", "LeakyReLU")

PLUGINS: tuple[str, ...] = ("powertrip_env.agents.site_policy", "powertrip_env.agents.candidates")
"""Modules that register policy classes or action interfaces when imported; ``load_plugins``
imports them (by name, never at import time) when a saved model names a class, or acts in a
space, that nothing registered yet."""
_plugin_errors: dict[str, str] = {}  # plugin -> why it could not be imported
# Before 0.2 the agents' modules installed as the top-level package ``agents``; models saved then
# name their classes so, and still load.
_LEGACY_PACKAGE = ("powertrip_env.agents.", "agents.")


def _names(cls: type) -> list[str]:
    """How a saved model may name ``cls``: "module.Name", and its name before 0.2."""
    name = f"{cls.__module__}.{cls.__qualname__}"
    new, old = _LEGACY_PACKAGE
    return [name, old + name[len(new) :]] if name.startswith(new) else [name]


def register_policy_class(cls: type, *algos: str) -> None:
    """Let saved models of ``algos`` (keys of ``ALGOS``) name the policy class ``cls``.

    Called by the module that defines ``cls``, when it is imported; a model naming ``cls`` is
    then loaded with it, never with a class unpickled from the file.
    """
    unknown = [algo for algo in algos if algo not in _POLICY_CLASSES]
    if unknown or not algos:
        raise ValueError(f"register {cls.__name__} for one or more of {', '.join(_POLICY_CLASSES)}")
    for name in _names(cls):
        _REGISTERED[name] = cls
        for algo in algos:
            if name not in _POLICY_CLASSES[algo]:
                _POLICY_CLASSES[algo].append(name)


def register_network_classes(*classes: type, activation_names: Iterable[str] = ()) -> None:
    """Let a saved model's ``policy_kwargs`` name ``classes`` (a features extractor,
    activations), and give ``activation_fn`` as one of ``activation_names``."""
    _NETWORK_CLASSES.extend(cls for cls in classes if cls not in _NETWORK_CLASSES)
    _ACTIVATION_NAMES.update(activation_names)


@dataclass(frozen=True)
class ActionInterface:
    """Agents that act on ``PowerTripEnv`` through a wrapper with spaces of its own.

    ``powertrip_env.agents.candidates`` registers one: its agents choose among a few candidate site
    sets, so a saved model's action space is ``Discrete(K)``, not the env's per-site space. A model
    whose spaces are those of ``wrap(env)`` is played by ``policy(model, label)``, a ``Policy`` that
    reads the unwrapped env and returns the site mask, as every policy does.
    """

    name: str
    wrap: Callable[[gym.Env], gym.Env]
    policy: Callable[[Any, str], Policy]


_INTERFACES: dict[str, ActionInterface] = {}


def register_action_interface(interface: ActionInterface) -> None:
    """Let saved models that act through ``interface.wrap`` be loaded and played."""
    _INTERFACES[interface.name] = interface


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
        for interface in _INTERFACES.values():
            wrapped = interface.wrap(env)
            found = (_space_shape(wrapped.observation_space), _space_shape(wrapped.action_space))
            if found == (obs, action):
                return interface, wrapped.observation_space, wrapped.action_space
    finally:
        env.close()
    known = ", ".join(_INTERFACES) or "none registered"
    raise EvaluationError(
        f"model {path!r} acts in {_shape_text(action)} on {_shape_text(obs)}: neither "
        f"PowerTripEnv's own spaces (MultiBinary(N), MultiDiscrete([2]*N)) nor those of an "
        f"action interface ({known}{_plugin_note()})"
    )


def load_plugins() -> None:
    """Import every module of ``PLUGINS`` not imported yet; each registers its classes.

    A plugin that cannot be imported is remembered (``_plugin_note`` says why in a refusal), not
    raised: a model that names none of its classes loads without it.
    """
    for name in PLUGINS:
        if name in _plugin_errors:
            continue
        try:
            importlib.import_module(name)
        except ImportError as exc:
            _plugin_errors[name] = str(exc)


def _plugin_note() -> str:
    """Why some registered classes may be missing: the plugins that could not be imported."""
    failed = [f"{name} ({why})" for name, why in _plugin_errors.items()]
    return f"; could not import {', '.join(failed)}, which register more" if failed else ""


def _algos_naming(name: str | None) -> list[str]:
    """The algorithms whose models may name the policy class ``name``.

    A name not registered yet makes ``load_plugins`` run first, so that a model saved with a
    class of ``agents`` loads in a process that never imported it.
    """
    if name is None:
        return []
    if not any(name in names for names in _POLICY_CLASSES.values()):
        load_plugins()
    return [algo for algo, names in _POLICY_CLASSES.items() if name in names]


# Pickled entries only training reads; a loaded model starts without them, as a new one does.
_TRAINING_STATE = (
    "_last_obs", "_last_original_obs", "_last_episode_starts", "action_noise",
    "rollout_buffer_class",  # None: the algorithm picks its own buffer for the spaces
)  # fmt: skip
_EPISODE_BUFFERS = ("ep_info_buffer", "ep_success_buffer")
# The opcodes of a pickle that names one global by reference (a class) and does nothing else.
_REFERENCE_OPCODES = frozenset(
    {"PROTO", "FRAME", "SHORT_BINUNICODE", "BINUNICODE", "UNICODE", "MEMOIZE", "BINPUT",
     "LONG_BINPUT", "PUT", "STACK_GLOBAL", "GLOBAL", "STOP"}
)  # fmt: skip
# A Box inside the readable copy of a Dict space: "'sites': Box(low, high, (32, 15), float32)".
_BOX_IN_DICT = re.compile(r"'([^']+)'(?::|,) Box\([^()]*\(([\d, ]*)\), \w+\)")
_SPACE_IN_DICT = re.compile(r"'[^']+'(?::|,) \w+\(")


def _pickled_reference(item: Any) -> str | None:
    """``"module.name"`` of a class SB3 pickled by reference, read without unpickling it.

    cloudpickle stores an importable class as its module and name and nothing else; the
    opcodes are read with ``pickletools``, which decodes them without running any. ``None``
    for anything more than one reference (a class pickled by value, a payload).
    """
    serialized = item.get(":serialized:") if isinstance(item, dict) else None
    if not isinstance(serialized, str):
        return None
    try:
        ops = list(pickletools.genops(base64.b64decode(serialized.encode(), validate=True)))
    except Exception:  # not base64, or not a pickle: not a reference either
        return None
    strings: list[str] = []
    names: list[str] = []
    for op, arg, _ in ops:
        if op.name not in _REFERENCE_OPCODES:
            return None
        if op.name in ("SHORT_BINUNICODE", "BINUNICODE", "UNICODE"):
            strings.append(str(arg))
        elif op.name == "STACK_GLOBAL":
            if len(strings) < 2:
                return None
            names.append(f"{strings[-2]}.{strings[-1]}")
        elif op.name == "GLOBAL":  # protocols 0-3: "module name"
            module, _, name = str(arg).partition(" ")
            names.append(f"{module}.{name}")
    return names[0] if len(names) == 1 else None


def _read_sb3_data(raw: bytes, file: Path) -> dict[str, Any]:
    """The "data" JSON of an SB3 zip's bytes: plain JSON, nothing unpickled."""
    try:
        with zipfile.ZipFile(io.BytesIO(raw)) as archive:
            data = json.loads(archive.read("data"))
    except (KeyError, ValueError, zipfile.BadZipFile):
        data = None
    if not isinstance(data, dict):
        raise EvaluationError(
            f"model file {str(file)!r} is not a Stable-Baselines3 model (.zip saved by model.save)"
        )
    return data


def _saved_algo(path: Path) -> str:
    """Which of ``ALGOS`` saved the SB3 zip at ``path``, from the fields it stores."""
    try:
        raw = Path(path).read_bytes()
    except OSError:
        raw = b""
    return _algo_of(_read_sb3_data(raw, Path(path)))


def _algo_of(data: Mapping[str, Any]) -> str:
    """Which of ``ALGOS`` saved a model, from its policy class's name and its fields.

    The class is read by name (``_pickled_reference``), never unpickled: a MaskablePPO model is
    one whose policy comes from sb3-contrib's maskable policies or is registered for it
    (``MaskableSitePolicy``).
    """
    policy = data.get("policy_class")
    name = _pickled_reference(policy)
    module = name or (str(policy.get("__module__", "")) if isinstance(policy, dict) else "")
    if "maskable_ppo" in _algos_naming(name) or module.startswith("sb3_contrib.common.maskable"):
        return "maskable_ppo"
    if "clip_range" in data:  # PPO's clipping; A2C has none
        return "ppo"
    if "n_steps" in data and "gae_lambda" in data:
        return "a2c"
    return "unknown"


def _unsafe(file: Path, key: str, what: str) -> EvaluationError:
    """The refusal of a model whose entry ``key`` could only be had by unpickling it."""
    return EvaluationError(
        f"model {str(file)!r}: its entry {key!r} {what}; getting it would mean unpickling "
        "the file, which runs code stored in it, so the model is refused (load it with "
        "Stable-Baselines3 yourself only if you trust the file)"
    )


def _space_shape(space: spaces.Space) -> tuple[Any, ...]:
    """What decides whether a model fits an env's space: its type, keys and shapes."""
    if isinstance(space, spaces.Dict):
        return ("Dict", tuple(sorted((k, _space_shape(s)) for k, s in space.spaces.items())))
    if isinstance(space, spaces.MultiDiscrete):
        nvec = tuple(int(n) for n in np.asarray(space.nvec).reshape(-1))
        return ("MultiDiscrete", tuple(space.shape), nvec)
    if isinstance(space, spaces.Discrete):
        return ("Discrete", (), int(space.n))
    return (type(space).__name__, tuple(space.shape or ()))


def _saved_space_shape(item: Any) -> tuple[Any, ...] | None:
    """``_space_shape`` of a space stored in an SB3 zip, from the readable copy beside it.

    Beside each pickled entry SB3 writes the object's attributes as JSON, or as ``str`` when
    they are not JSON: a Box's ``_shape``, a MultiDiscrete's ``nvec``, a Dict's ``spaces`` (the
    sub-spaces' reprs, whose shapes are read here). ``None`` if it cannot be read.
    """
    if not isinstance(item, dict):
        return None
    kind = re.search(r"\.(\w+)'>$", str(item.get(":type:", "")))
    name = kind.group(1) if kind else ""
    if name == "Dict":
        text = item.get("spaces")
        boxes = _BOX_IN_DICT.findall(text) if isinstance(text, str) else []
        if not boxes or len(boxes) != len(_SPACE_IN_DICT.findall(text)):
            return None  # a sub-space other than a Box, or a repr this cannot read
        parts = ((key, ("Box", tuple(int(d) for d in dims.split(",") if d.strip())))
                 for key, dims in boxes)  # fmt: skip
        return ("Dict", tuple(sorted(parts)))
    shape = item.get("_shape")
    if not isinstance(shape, list) or not all(type(d) is int for d in shape):
        return None
    if name == "MultiDiscrete":
        nvec = tuple(int(n) for n in re.findall(r"-?\d+", str(item.get("nvec", ""))))
        return ("MultiDiscrete", tuple(shape), nvec)
    if name in ("Box", "MultiBinary"):
        return (name, tuple(shape))
    if name == "Discrete":
        n = re.fullmatch(r"\d+", str(item.get("n", "")).strip())
        return ("Discrete", tuple(shape), int(n.group())) if n else None
    return None


def _shape_text(shape: tuple[Any, ...]) -> str:
    """``_space_shape`` for a message: ``Dict(global: Box(6,), sites: Box(10, 15))``."""
    if shape[0] == "Dict":
        return "Dict(" + ", ".join(f"{k}: {_shape_text(s)}" for k, s in shape[1]) + ")"
    if shape[0] == "MultiDiscrete":
        return f"MultiDiscrete({list(shape[2])})"
    if shape[0] == "Discrete":
        return f"Discrete({shape[2]})"
    return f"{shape[0]}{shape[1]}"


def _mode_kwargs(obs: tuple[Any, ...], action: tuple[Any, ...], label: str) -> dict[str, Any]:
    """Observation and action modes (and padding) of the env a model was trained on.

    A model trained with ``max_sites`` has a ``"valid"`` entry in its (dict) observation; it
    runs on an env padded to the same M, whatever the scenario's N.
    """
    kwargs: dict[str, Any] = {"obs_mode": "dict" if obs[0] == "Dict" else "flat"}
    valid = dict(obs[1]).get("valid") if obs[0] == "Dict" else None
    if valid is not None and len(valid[1]) == 1:
        kwargs["max_sites"] = int(valid[1][0])
    if action[0] == "MultiBinary":
        kwargs["action_mode"] = "multibinary"
    elif action[0] == "MultiDiscrete":
        kwargs["action_mode"] = "multidiscrete"
    else:
        raise EvaluationError(
            f"model {label!r} acts in {_shape_text(action)}; only MultiBinary(N) and "
            "MultiDiscrete([2]*N) agents of PowerTripEnv can be evaluated here"
        )
    return kwargs


def _model_env_kwargs(model: Any, label: str) -> dict[str, Any]:
    """``_mode_kwargs`` of a loaded model (an RLlib module), from its spaces."""
    obs, action = _space_shape(model.observation_space), _space_shape(model.action_space)
    return _mode_kwargs(obs, action, label)


def _fitting_env_spaces(
    path: str,
    env_id: str,
    kwargs: dict[str, Any],
    model_obs: tuple[Any, ...],
    model_action: tuple[Any, ...],
) -> tuple[spaces.Space, spaces.Space]:
    """The spaces of ``env_id`` made with ``kwargs``, refusing a model they do not fit."""
    try:
        env = gym.make(env_id, **kwargs)
    except ValueError as exc:  # e.g. more sites than the model's max_sites
        raise EvaluationError(f"model {path!r} cannot run on {env_id}: {exc}") from None
    try:
        for what, model_shape, env_space in (
            ("observation", model_obs, env.observation_space),
            ("action", model_action, env.action_space),
        ):
            if model_shape != _space_shape(env_space):
                raise EvaluationError(
                    f"model {path!r} is incompatible with {env_id}: its {what} space is "
                    f"{_shape_text(model_shape)} but the environment's is "
                    f"{_shape_text(_space_shape(env_space))} (was it trained on another "
                    "scenario?)"
                )
        return env.observation_space, env.action_space
    finally:
        env.close()


# ``--model pretrained``: the general agent shipped in agents/pretrained (see its README.md).
PRETRAINED = "pretrained"


def pretrained_model_path() -> Path:
    """The shipped pretrained agent's zip, in the ``agents`` package installed beside this one.

    Found from this file's own location, not by importing ``agents``: ``python -m`` puts the
    current folder first on ``sys.path``, so a folder with an ``agents`` package of its own
    would otherwise supply the "shipped" model, and a model file is code. The wheel installs
    ``baselines`` and ``agents`` side by side (the top-level packages of setup.py), and an
    editable install of the checkout finds both in the checkout.
    """
    return Path(__file__).resolve().parent.parent / "agents" / "pretrained" / "model.zip"


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
        kwargs = {**base, **_model_env_kwargs(module, path)}
        obs, action = _space_shape(module.observation_space), _space_shape(module.action_space)
        _fitting_env_spaces(path, env_id, kwargs, obs, action)
        return module, kwargs, None
    if path != PRETRAINED and (Path(path) / "rllib_checkpoint.json").is_file():
        raise EvaluationError(f"model {path!r} is an RLlib checkpoint; pass --algo rllib")
    return _load_sb3(_resolve_model_path(path), path, algo, env_id, base)


def _load_sb3(
    file: Path, path: str, algo: str, env_id: str, base: dict[str, Any]
) -> tuple[Any, dict[str, Any], ActionInterface | None]:
    """Load an SB3 zip without unpickling anything in it (see the note above ``_POLICY_CLASSES``).

    The file is read once, and SB3 loads those bytes, so what was checked is what is loaded.
    """
    try:
        raw = file.read_bytes()
    except OSError as exc:
        raise EvaluationError(f"cannot read model {str(file)!r}: {exc.strerror or exc}") from None
    data = _read_sb3_data(raw, file)
    policy = _pickled_reference(data.get("policy_class"))
    algos = _algos_naming(policy)
    if not algos:
        known = sorted({name for names in _POLICY_CLASSES.values() for name in names})
        what = f"names the class {policy}" if policy else "holds a class stored by value"
        raise _unsafe(
            file, "policy_class",
            f"{what}, not one of the policy classes evaluate loads ({', '.join(known)}"
            f"{_plugin_note()})",
        )  # fmt: skip
    saved = _algo_of(data)
    if saved != algo or algo not in algos:
        hint = f"it was saved by {saved}; pass --algo {saved}" if saved in ALGOS else (
            f"it was not saved by any of {', '.join(ALGOS)}"
        )  # fmt: skip
        raise EvaluationError(f"model {str(file)!r} does not match --algo {algo}: {hint}")
    shapes = {}
    for key in ("observation_space", "action_space"):
        shapes[key] = _saved_space_shape(data.get(key))
        if shapes[key] is None:
            raise _unsafe(file, key, "has no readable shape")
    obs, action = shapes["observation_space"], shapes["action_space"]
    found = _interface_for(path, env_id, base, obs, action)
    interface = None if found is None else found[0]
    if found is None:
        kwargs = {**base, **_mode_kwargs(obs, action, path)}
        obs_space, action_space = _fitting_env_spaces(path, env_id, kwargs, obs, action)
    else:
        kwargs, (_, obs_space, action_space) = dict(base), found
    policy_class = _REGISTERED.get(policy)
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
    objects = _replacements(file, data, known_objects)
    for key, item in data.items():  # a second guard: SB3 would unpickle anything left over
        if _is_pickled(item) and key not in objects:
            raise _unsafe(file, key, "is a pickled object evaluate cannot rebuild")
    module_name, class_name = ALGOS[algo]
    algo_cls = getattr(importlib.import_module(module_name), class_name)
    try:
        model = algo_cls.load(io.BytesIO(raw), device="cpu", custom_objects=objects)
    except Exception as exc:  # SB3 raises many types for a broken file; report, don't trace
        raise EvaluationError(f"cannot load model {str(file)!r} as {algo}: {exc}") from None
    return model, kwargs, interface


def _is_pickled(item: Any) -> bool:
    return isinstance(item, dict) and ":serialized:" in item


def _replacements(file: Path, data: Mapping[str, Any], known: dict[str, Any]) -> dict[str, Any]:
    """``custom_objects`` for SB3's ``load``: a stand-in for every pickled entry of ``data``.

    ``known`` holds the policy class and the spaces (always given, pickled or not). Schedules
    become constants (the readable ``ConstantSchedule(val=...)`` when there is one: an
    evaluation never trains, so any valid value would do), training state starts empty, and
    ``policy_kwargs`` is rebuilt from its readable copy. Any other pickled entry is refused.
    """
    from collections import deque

    from stable_baselines3.common.utils import FloatSchedule

    objects = dict(known)
    for key, item in data.items():
        if key in objects or not _is_pickled(item):
            continue  # plain JSON: SB3 reads it as it is, nothing to unpickle
        if key == "policy_kwargs":
            objects[key] = _policy_kwargs(file, item)
        elif key == "lr_schedule":
            objects[key] = FloatSchedule(_constant(item, 0.0))
        elif key in ("learning_rate", "clip_range"):
            objects[key] = _constant(item, 0.0 if key == "learning_rate" else 0.2)
        elif key == "clip_range_vf":
            objects[key] = _constant(item, None)
        elif key in _TRAINING_STATE:
            objects[key] = None
        elif key in _EPISODE_BUFFERS:
            window = data.get("_stats_window_size")
            objects[key] = deque(maxlen=window if type(window) is int and window > 0 else 100)
        else:
            raise _unsafe(file, key, "is a pickled object evaluate cannot rebuild")
    return objects


def _constant(item: Mapping[str, Any], default: float | None) -> float | None:
    """The value of a pickled constant schedule, from its readable copy; else ``default``."""
    value = item.get("val")
    if type(value) in (int, float):
        return float(value)
    text = str(item.get("value_schedule", ""))
    match = re.fullmatch(r"ConstantSchedule\(val=([-+]?[\d.]+(?:[eE][-+]?\d+)?)\)", text)
    return float(match.group(1)) if match else default


def _policy_kwargs(file: Path, item: Mapping[str, Any]) -> dict[str, Any]:
    """A pickled ``policy_kwargs`` rebuilt from the readable copy SB3 writes beside it.

    That copy has the dict's items: JSON values as they are (widths, flags), anything else as
    its ``str``. Classes read ``<class 'torch.nn.modules.activation.Tanh'>`` and are taken from
    a short list (torch's activations and optimisers, SB3's feature extractors, and the classes
    registered with ``register_network_classes``: the site encoder); any other value that is
    not JSON cannot be rebuilt, and the model is refused.
    """
    if item.get(":type:") != "<class 'dict'>":
        raise _unsafe(file, "policy_kwargs", f"is a pickled {item.get(':type:')}, not a dict")
    kwargs: dict[str, Any] = {}
    for name, value in item.items():
        if name in (":type:", ":serialized:"):
            continue
        if isinstance(value, str) and not _accepts(name, value):
            load_plugins()  # a class or name that a plugin registers
            if not _accepts(name, value):
                raise _unsafe(
                    file, f"policy_kwargs.{name}", f"holds {value[:80]!r}{_plugin_note()}"
                )
        kwargs[name] = _network_classes().get(value, value) if isinstance(value, str) else value
    return kwargs


def _accepts(name: str, value: str) -> bool:
    """Whether the string ``value`` of ``policy_kwargs[name]`` can be rebuilt: the ``str`` of
    a known class, or an activation name a registered policy takes."""
    return value in _network_classes() or (name == "activation_fn" and value in _ACTIVATION_NAMES)


def _network_classes() -> dict[str, type]:
    """The classes a ``policy_kwargs`` value may name, by their ``str``."""
    import torch as th
    from stable_baselines3.common.sb2_compat.rmsprop_tf_like import RMSpropTFLike
    from stable_baselines3.common.torch_layers import CombinedExtractor, FlattenExtractor

    classes = [*(getattr(th.nn, name) for name in _TORCH_ACTIVATIONS), th.optim.Adam,
               th.optim.AdamW, th.optim.RMSprop, RMSpropTFLike, FlattenExtractor,
               CombinedExtractor, *_NETWORK_CLASSES]  # fmt: skip
    return {f"<class '{name}'>": cls for cls in classes for name in _names(cls)}


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


# --------------------------------------------------------------------------- playing them


class SB3Policy(Policy):
    """A saved Stable-Baselines3 agent behind the same interface as the hand-coded policies.

    For MaskablePPO the env's current ``action_masks()`` are passed, as during training.
    """

    def __init__(self, model: Any, name: str, deterministic: bool = True) -> None:
        super().__init__()
        self.model = model
        self.name = name
        self.deterministic = deterministic
        self.maskable = "action_masks" in inspect.signature(model.predict).parameters

    def act(self, obs: Any, info: dict[str, Any]) -> np.ndarray:
        extra = {"action_masks": self.env.action_masks()} if self.maskable else {}
        action, _ = self.model.predict(obs, deterministic=self.deterministic, **extra)
        return (np.asarray(action).reshape(-1) > 0.5).astype(np.int8)


class RLlibPolicy(Policy):
    """A trained RLlib RLModule (``powertrip_env.integrations.rllib.load_module``) behind the
    same interface.

    It plays the module's most likely action (each site's likelier choice), as SB3Policy plays
    SB3's deterministic one. Needs the ``rllib`` extra, imported only when it acts.
    """

    def __init__(self, module: Any, name: str) -> None:
        super().__init__()
        self.module = module
        self.name = name

    def act(self, obs: Any, info: dict[str, Any]) -> np.ndarray:
        from powertrip_env.integrations.rllib import greedy_action

        return greedy_action(self.module, obs).astype(np.int8)


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
