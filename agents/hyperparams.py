"""Hyperparameter files: read ``agents/configs/<algo>.yaml``, check it, and turn it into kwargs.

A file holds the keyword arguments of the algorithm's constructor (``n_steps``, ``gamma``,
``policy_kwargs``, ...). The network has two tables:

* ``policy_kwargs``: SB3's ``MlpPolicy``, for ``--extractor candidates`` (the candidate sets'
  features, :mod:`powertrip_env.agents.candidates`) and ``mlp`` (the flat observation);
* ``site_policy``: for ``sites``, the dict observation and
  :class:`powertrip_env.agents.site_policy.SitePolicy` (its keyword arguments: the site encoder's
  widths, the shared action head's, the value MLP's).

Everything is checked before any training starts, because a typo in a hyperparameter name
would otherwise be either a crash several minutes in or, worse, silently ignored. Errors are
``ConfigError`` with a one-line message naming the file, the key, the value and what is allowed.

YAML cannot hold Python objects, so a few values have spellings:

* ``learning_rate``, ``clip_range``, ``clip_range_vf``: a number, or ``"lin_<number>"`` for a
  linear decay from that number to 0 over the run (SB3's ``LinearSchedule``).
* ``activation_fn`` (in either table): a name such as ``"tanh"`` or ``"relu"``.
"""

from __future__ import annotations

import copy
import inspect
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml
from stable_baselines3.common.on_policy_algorithm import OnPolicyAlgorithm
from stable_baselines3.common.utils import LinearSchedule

from powertrip_env.agents.extractors import activation_class
from powertrip_env.agents.site_policy import MaskableSitePolicy, SiteHeadMixin, SitePolicy
from powertrip_env.harness.models.loading import SB3_ALGOS, sb3_algorithm

CONFIG_DIR = Path(__file__).resolve().parent / "configs"

ALGOS: dict[str, type[OnPolicyAlgorithm]] = {name: sb3_algorithm(name) for name in SB3_ALGOS}
"""``--algo`` name → algorithm class: the SB3 algorithms the harness loads (``SB3_ALGOS``), so
that every algorithm trained here can be evaluated, and no other."""

EXTRACTORS = ("candidates", "sites", "mlp")
"""``candidates``: a choice among candidate site sets
(``powertrip_env.agents.candidates.CandidateSets``), SB3's ``MlpPolicy`` on their features.
``sites``: per-site actions on the dict observation, ``SitePolicy``. ``mlp``: per-site actions on
the flat observation, SB3's ``MlpPolicy``."""

SCHEDULABLE = ("learning_rate", "clip_range", "clip_range_vf")
# Set by the training script itself (or meaningless in a file), so a file may not set them.
RESERVED = ("self", "policy", "env", "tensorboard_log", "verbose", "seed", "device")
RESERVED_POLICY_KWARGS = (
    "observation_space", "action_space", "lr_schedule",
    "features_extractor_class", "features_extractor_kwargs",
)  # fmt: skip
SITE_KEY = "site_policy"


class ConfigError(ValueError):
    """A hyperparameter file or override that cannot be used; the message is one line."""


def default_config_path(algo: str) -> Path:
    """``agents/configs/<algo>.yaml``: the tuned hyperparameters shipped for an algorithm."""
    return CONFIG_DIR / f"{algo}.yaml"


def load_config(path: str | os.PathLike[str], algo: str) -> dict[str, Any]:
    """Read and check a hyperparameter file for ``algo``; returns the raw mapping.

    Raises ``ConfigError`` if the file is missing, unreadable, not a YAML mapping, or names a
    key the algorithm does not take.
    """
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise ConfigError(f"argument --config: cannot read {os.fspath(path)!r}: {reason}") from None
    try:
        raw = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        where = getattr(exc, "problem_mark", None)
        at = f" at line {where.line + 1}, column {where.column + 1}" if where else ""
        problem = getattr(exc, "problem", None) or "not valid YAML"
        raise ConfigError(
            f"argument --config: {os.fspath(path)!r} is malformed{at}: {problem}"
        ) from None
    if raw is None:
        raw = {}
    if not isinstance(raw, dict):
        raise ConfigError(
            f"argument --config: {os.fspath(path)!r} must be a mapping of hyperparameter names "
            f"to values, got {type(raw).__name__}"
        )
    check_config(raw, algo, source=os.fspath(path))
    return raw


def apply_overrides(raw: Mapping[str, Any], overrides: Sequence[str], algo: str) -> dict[str, Any]:
    """The config with ``KEY=VALUE`` overrides applied (``--hp``), checked again.

    VALUE is parsed as YAML (``--hp gamma=0.999``, ``--hp policy_kwargs.net_arch=[64,64]``);
    dots address nested tables.
    """
    out = copy.deepcopy(dict(raw))
    for item in overrides:
        key, sep, text = item.partition("=")
        if not sep or not key.strip():
            raise ConfigError(f"argument --hp: {item!r} is not KEY=VALUE (e.g. --hp gamma=0.999)")
        try:
            value = yaml.safe_load(text)
        except yaml.YAMLError:
            raise ConfigError(f"argument --hp: the value in {item!r} is not valid YAML") from None
        *parents, leaf = key.strip().split(".")
        table = out
        for name in parents:
            table = table.setdefault(name, {})
            if not isinstance(table, dict):
                raise ConfigError(f"argument --hp: {key!r}: {name!r} is not a table")
        table[leaf] = value
    check_config(out, algo, source="--hp")
    return out


def check_config(raw: Mapping[str, Any], algo: str, source: str) -> None:
    """Raise ``ConfigError`` for keys ``algo`` does not take or values of the wrong kind."""
    params = constructor_parameters(ALGOS[algo])
    allowed = sorted([*(p for p in params if p not in RESERVED), SITE_KEY])
    for key, value in raw.items():
        if key == SITE_KEY:
            _check_policy_kwargs(value, site_policy_class(algo), f"{source}: {SITE_KEY}")
        elif key not in params or key in RESERVED:
            raise ConfigError(
                f"{source}: unknown hyperparameter {key!r} for {algo}; allowed: "
                f"{', '.join(allowed)}"
            )
        elif key == "policy_kwargs":
            mlp_policy = ALGOS[algo].policy_aliases["MlpPolicy"]
            _check_policy_kwargs(value, mlp_policy, f"{source}: policy_kwargs")
        elif key in SCHEDULABLE and isinstance(value, str):
            _schedule(value, f"{source}: {key}")
        else:
            _check_kind(value, params[key].default, f"{source}: {key}")


def site_policy_class(algo: str) -> type:
    """``SitePolicy``, or ``MaskableSitePolicy`` for MaskablePPO."""
    return MaskableSitePolicy if algo == "maskable_ppo" else SitePolicy


def model_kwargs(raw: Mapping[str, Any], algo: str, extractor: str) -> tuple[Any, dict[str, Any]]:
    """(policy, constructor kwargs) for ``ALGOS[algo]`` from a checked config.

    ``extractor="mlp"`` or ``"candidates"``: ``"MlpPolicy"`` with the file's ``policy_kwargs``.
    ``"sites"``: the ``SitePolicy`` class for the algorithm with the file's ``site_policy``
    table.
    """
    kwargs = {k: copy.deepcopy(v) for k, v in raw.items() if k not in (SITE_KEY, "policy_kwargs")}
    for key in SCHEDULABLE:
        if isinstance(kwargs.get(key), str):
            kwargs[key] = _schedule(kwargs[key], key)
    if extractor == "sites":
        policy: Any = site_policy_class(algo)
        policy_kwargs = dict(copy.deepcopy(raw.get(SITE_KEY)) or {})
    else:
        policy = "MlpPolicy"
        policy_kwargs = dict(copy.deepcopy(raw.get("policy_kwargs")) or {})
    if isinstance(policy_kwargs.get("activation_fn"), str):
        policy_kwargs["activation_fn"] = activation_class(policy_kwargs["activation_fn"])
    if policy_kwargs:
        kwargs["policy_kwargs"] = policy_kwargs
    return policy, kwargs


def constructor_parameters(cls: type) -> dict[str, inspect.Parameter]:
    """Keyword parameters of ``cls.__init__`` (what a config may set, before reservations)."""
    return {
        name: p
        for name, p in inspect.signature(cls.__init__).parameters.items()
        if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY) and not name.startswith("_")
    }


# --------------------------------------------------------------------------- checks


def _check_policy_kwargs(value: Any, policy_cls: type, where: str) -> None:
    if value is None:
        return
    if not isinstance(value, dict):
        raise ConfigError(f"{where} must be a mapping, got {value!r}")
    params = constructor_parameters(policy_cls)
    if issubclass(policy_cls, SitePolicy | MaskableSitePolicy):
        params = {**params, **constructor_parameters(SiteHeadMixin)}
        params.pop("net_arch", None)  # derived from vf_net_arch
    allowed = sorted(p for p in params if p not in RESERVED_POLICY_KWARGS)
    for key, item in value.items():
        if key in RESERVED_POLICY_KWARGS:
            raise ConfigError(f"{where}.{key} is set by --extractor, not by the file")
        if key not in allowed:
            raise ConfigError(f"{where}: unknown key {key!r}; allowed: {', '.join(allowed)}")
        if key == "activation_fn":
            if not isinstance(item, str):
                raise ConfigError(f"{where}.activation_fn must be a name like 'tanh', got {item!r}")
            try:
                activation_class(item)
            except ValueError as exc:
                raise ConfigError(f"{where}.{exc}") from None
        elif key == "net_arch":
            if not _is_net_arch(item):
                raise ConfigError(
                    f"{where}.net_arch={item!r}: give a list of layer widths ([64, 64]) or "
                    "{pi: [...], vf: [...]}"
                )
        else:
            _check_kind(item, params[key].default, f"{where}.{key}")


def _is_net_arch(value: Any) -> bool:
    def widths(v: Any) -> bool:
        return isinstance(v, list) and all(
            isinstance(w, int) and not isinstance(w, bool) and w > 0 for w in v
        )

    if isinstance(value, dict):
        return set(value) <= {"pi", "vf"} and all(widths(v) for v in value.values())
    return widths(value)


def _check_kind(value: Any, default: Any, where: str) -> None:
    """The value must be of the kind of the parameter's default (when it has a simple one)."""
    ok = True
    if isinstance(default, bool):
        ok = isinstance(value, bool)
    elif isinstance(default, int):
        ok = isinstance(value, int) and not isinstance(value, bool)
    elif isinstance(default, float):
        ok = isinstance(value, int | float) and not isinstance(value, bool)
    elif isinstance(default, tuple):
        ok = isinstance(value, list | tuple)
    if not ok:
        kind = type(default).__name__
        raise ConfigError(f"{where}={value!r}: expected a {kind} (default {default!r})")


def _schedule(text: str, where: str) -> LinearSchedule:
    head, _, number = text.partition("_")
    try:
        start = float(number)
    except ValueError:
        start = None
    if head != "lin" or start is None:
        raise ConfigError(
            f"{where}={text!r}: give a number or 'lin_<number>' for a linear decay to 0"
        )
    return LinearSchedule(start, 0.0, 1.0)
