"""A Stable-Baselines3 zip read without unpickling anything in it.

A model file is code. An SB3 zip keeps its policy class, spaces, schedules and buffers
pickled (cloudpickle) in its "data" JSON, and SB3's ``load`` unpickles every one of them,
which runs whatever the file names, before anything can be checked. So nothing here unpickles
any of it: every pickled entry is replaced through ``load(custom_objects=...)`` by an object
built from what is already known (the policy class from a short list of known classes, the
spaces of the env the model will run on, constant schedules, empty buffers), and a file with
a pickled entry that cannot be replaced that way is refused before SB3 sees it. The weights
are read by ``torch.load(weights_only=True)``, which builds tensors and nothing else.

``powertrip_env.harness.models.loading`` loads the zip with what this module reads and rebuilds:
the "data" JSON (``read_sb3_data``), the policy class's name (``pickled_reference``), the
algorithm that saved it (``algo_of``), and the ``custom_objects`` that replace every pickled
entry (``replacements``); ``unsafe`` is the refusal of anything else.
"""

from __future__ import annotations

import base64
import io
import json
import pickletools
import re
import zipfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from powertrip_env.errors import EvaluationError
from powertrip_env.harness.models.registry import (
    accepts,
    algos_naming,
    load_plugins,
    network_classes,
    plugin_note,
)

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


def pickled_reference(item: Any) -> str | None:
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


def read_sb3_data(raw: bytes, file: Path) -> dict[str, Any]:
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
    return algo_of(read_sb3_data(raw, Path(path)))


def algo_of(data: Mapping[str, Any]) -> str:
    """Which of ``ALGOS`` saved a model, from its policy class's name and its fields.

    The class is read by name (``pickled_reference``), never unpickled: a MaskablePPO model is
    one whose policy comes from sb3-contrib's maskable policies or is registered for it
    (``MaskableSitePolicy``).
    """
    policy = data.get("policy_class")
    name = pickled_reference(policy)
    module = name or (str(policy.get("__module__", "")) if isinstance(policy, dict) else "")
    if "maskable_ppo" in algos_naming(name) or module.startswith("sb3_contrib.common.maskable"):
        return "maskable_ppo"
    if "clip_range" in data:  # PPO's clipping; A2C has none
        return "ppo"
    if "n_steps" in data and "gae_lambda" in data:
        return "a2c"
    return "unknown"


def unsafe(file: Path, key: str, what: str) -> EvaluationError:
    """The refusal of a model whose entry ``key`` could only be had by unpickling it."""
    return EvaluationError(
        f"model {str(file)!r}: its entry {key!r} {what}; getting it would mean unpickling "
        "the file, which runs code stored in it, so the model is refused (load it with "
        "Stable-Baselines3 yourself only if you trust the file)"
    )


def is_pickled(item: Any) -> bool:
    return isinstance(item, dict) and ":serialized:" in item


def replacements(file: Path, data: Mapping[str, Any], known: dict[str, Any]) -> dict[str, Any]:
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
        if key in objects or not is_pickled(item):
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
            raise unsafe(file, key, "is a pickled object evaluate cannot rebuild")
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
        raise unsafe(file, "policy_kwargs", f"is a pickled {item.get(':type:')}, not a dict")
    kwargs: dict[str, Any] = {}
    for name, value in item.items():
        if name in (":type:", ":serialized:"):
            continue
        if isinstance(value, str) and not accepts(name, value):
            load_plugins()  # a class or name that a plugin registers
            if not accepts(name, value):
                raise unsafe(file, f"policy_kwargs.{name}", f"holds {value[:80]!r}{plugin_note()}")
        kwargs[name] = network_classes().get(value, value) if isinstance(value, str) else value
    return kwargs
