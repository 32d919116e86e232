"""What a saved agent may name: its policy class, network classes, the interface it acts through.

A saved Stable-Baselines3 model names its policy class (and the classes in its
``policy_kwargs``) by "module.Name"; ``powertrip_env.harness.models.loading`` builds the model with
classes from these registries only, never with a class unpickled from the file. SB3's own
policy classes are listed here; the others are registered by the modules that define them, when
they are imported (``register_policy_class``, ``register_network_classes``,
``register_action_interface``; ``powertrip_env.agents.site_policy`` registers its policies and
site encoder). Those modules sit in a layer above this one (``tests/test_imports.py``), so they
are never imported by a statement: when a model names a class nobody registered yet,
``load_plugins`` imports the modules named (as strings) in ``PLUGINS`` and the lookup is tried
again.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import gymnasium as gym

from powertrip_env.baselines.base import Policy

# The policy classes a model may name, by algorithm, as cloudpickle names a class
# ("module.Name"): SB3's and sb3-contrib's own, then those registered (``register_policy_class``).
POLICY_CLASSES: dict[str, list[str]] = {
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
REGISTERED: dict[str, type] = {}
# Classes a policy_kwargs value may name beyond the loader's own (``_policy_kwargs``), and the
# activation names a registered policy takes in place of a class (``activation_fn="tanh"``).
_NETWORK_CLASSES: list[type] = []
_ACTIVATION_NAMES: set[str] = set()
# Torch's activations a plain SB3 policy may be given (``activation_fn``), by name in torch.nn.
_TORCH_ACTIVATIONS = ("ReLU", "Tanh", "ELU", "GELU", "SiLU", "LeakyReLU")

PLUGINS: tuple[str, ...] = (
    "powertrip_env.agents.site_policy",
    "powertrip_env.agents.candidates",
    "powertrip_env.agents.carbon_slots",
)
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
    """Let saved models of ``algos`` (keys of ``loading.SB3_ALGOS``) name the policy class ``cls``.

    Called by the module that defines ``cls``, when it is imported; a model naming ``cls`` is
    then loaded with it, never with a class unpickled from the file.
    """
    unknown = [algo for algo in algos if algo not in POLICY_CLASSES]
    if unknown or not algos:
        raise ValueError(f"register {cls.__name__} for one or more of {', '.join(POLICY_CLASSES)}")
    for name in _names(cls):
        REGISTERED[name] = cls
        for algo in algos:
            if name not in POLICY_CLASSES[algo]:
                POLICY_CLASSES[algo].append(name)


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


INTERFACES: dict[str, ActionInterface] = {}


def register_action_interface(interface: ActionInterface) -> None:
    """Let saved models that act through ``interface.wrap`` be loaded and played."""
    INTERFACES[interface.name] = interface


def load_plugins() -> None:
    """Import every module of ``PLUGINS`` not imported yet; each registers its classes.

    A plugin that cannot be imported is remembered (``plugin_note`` says why in a refusal), not
    raised: a model that names none of its classes loads without it.
    """
    for name in PLUGINS:
        if name in _plugin_errors:
            continue
        try:
            importlib.import_module(name)
        except ImportError as exc:
            _plugin_errors[name] = str(exc)


def plugin_note() -> str:
    """Why some registered classes may be missing: the plugins that could not be imported."""
    failed = [f"{name} ({why})" for name, why in _plugin_errors.items()]
    return f"; could not import {', '.join(failed)}, which register more" if failed else ""


def algos_naming(name: str | None) -> list[str]:
    """The algorithms whose models may name the policy class ``name``.

    A name not registered yet makes ``load_plugins`` run first, so that a model saved with a
    class of ``agents`` loads in a process that never imported it.
    """
    if name is None:
        return []
    if not any(name in names for names in POLICY_CLASSES.values()):
        load_plugins()
    return [algo for algo, names in POLICY_CLASSES.items() if name in names]


def accepts(name: str, value: str) -> bool:
    """Whether the string ``value`` of ``policy_kwargs[name]`` can be rebuilt: the ``str`` of
    a known class, or an activation name a registered policy takes."""
    return value in network_classes() or (name == "activation_fn" and value in _ACTIVATION_NAMES)


def network_classes() -> dict[str, type]:
    """The classes a ``policy_kwargs`` value may name, by their ``str``."""
    import torch as th
    from stable_baselines3.common.sb2_compat.rmsprop_tf_like import RMSpropTFLike
    from stable_baselines3.common.torch_layers import CombinedExtractor, FlattenExtractor

    classes = [
        *(getattr(th.nn, name) for name in _TORCH_ACTIVATIONS),
        th.optim.Adam,
        th.optim.AdamW,
        th.optim.RMSprop,
        RMSpropTFLike,
        FlattenExtractor,
        CombinedExtractor,
        *_NETWORK_CLASSES,
    ]
    return {f"<class '{name}'>": cls for cls in classes for name in _names(cls)}
