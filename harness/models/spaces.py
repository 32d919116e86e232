"""A model's spaces, compared with an env's by type, keys and shapes.

A saved model's observation and action spaces decide which env it can run on. They are reduced
to a comparable shape (``space_shape``), read from an SB3 zip without unpickling the spaces
(``saved_space_shape``), written out for a refusal (``shape_text``), and turned into the
``gym.make`` arguments of the env a model was trained on (``mode_kwargs``), which
``fitting_env_spaces`` checks against the env actually made.
"""

from __future__ import annotations

import re
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from powertrip_env.errors import EvaluationError

# A Box inside the readable copy of a Dict space: "'sites': Box(low, high, (32, 15), float32)".
_BOX_IN_DICT = re.compile(r"'([^']+)'(?::|,) Box\([^()]*\(([\d, ]*)\), \w+\)")
_SPACE_IN_DICT = re.compile(r"'[^']+'(?::|,) \w+\(")


def space_shape(space: spaces.Space) -> tuple[Any, ...]:
    """What decides whether a model fits an env's space: its type, keys and shapes."""
    if isinstance(space, spaces.Dict):
        return ("Dict", tuple(sorted((k, space_shape(s)) for k, s in space.spaces.items())))
    if isinstance(space, spaces.MultiDiscrete):
        nvec = tuple(int(n) for n in np.asarray(space.nvec).reshape(-1))
        return ("MultiDiscrete", tuple(space.shape), nvec)
    if isinstance(space, spaces.Discrete):
        return ("Discrete", (), int(space.n))
    return (type(space).__name__, tuple(space.shape or ()))


def saved_space_shape(item: Any) -> tuple[Any, ...] | None:
    """``space_shape`` of a space stored in an SB3 zip, from the readable copy beside it.

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
        parts = (
            (key, ("Box", tuple(int(d) for d in dims.split(",") if d.strip())))
            for key, dims in boxes
        )
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


def shape_text(shape: tuple[Any, ...]) -> str:
    """``space_shape`` for a message: ``Dict(global: Box(6,), sites: Box(10, 15))``."""
    if shape[0] == "Dict":
        return "Dict(" + ", ".join(f"{k}: {shape_text(s)}" for k, s in shape[1]) + ")"
    if shape[0] == "MultiDiscrete":
        return f"MultiDiscrete({list(shape[2])})"
    if shape[0] == "Discrete":
        return f"Discrete({shape[2]})"
    return f"{shape[0]}{shape[1]}"


def mode_kwargs(obs: tuple[Any, ...], action: tuple[Any, ...], label: str) -> dict[str, Any]:
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
            f"model {label!r} acts in {shape_text(action)}; only MultiBinary(N) and "
            "MultiDiscrete([2]*N) agents of PowerTripEnv can be evaluated here"
        )
    return kwargs


def model_env_kwargs(model: Any, label: str) -> dict[str, Any]:
    """``mode_kwargs`` of a loaded model (an RLlib module), from its spaces."""
    obs, action = space_shape(model.observation_space), space_shape(model.action_space)
    return mode_kwargs(obs, action, label)


def fitting_env_spaces(
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
            if model_shape != space_shape(env_space):
                raise EvaluationError(
                    f"model {path!r} is incompatible with {env_id}: its {what} space is "
                    f"{shape_text(model_shape)} but the environment's is "
                    f"{shape_text(space_shape(env_space))} (was it trained on another "
                    "scenario?)"
                )
        return env.observation_space, env.action_space
    finally:
        env.close()
