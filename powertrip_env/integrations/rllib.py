"""The Ray RLlib entry point: an env creator, scenarios by value, and a per-site RLModule.

Ray RLlib (``pip install 'powertrip-env[rllib]'``) trains on a cluster of env runners, each a
separate process, possibly on another machine. Three things must travel to them, and this module
is what makes them travel:

* **The environment.** ``register()`` registers ``env_creator`` with Ray Tune under ``ENV_NAME``.
  The creator imports this package in the worker (which registers the Gymnasium IDs there), takes
  RLlib's ``env_config``, defaults to ``action_mode="multidiscrete"`` (RLlib has no
  ``MultiBinary``) and, when RLlib asks for ``num_envs`` (``gym_env_vectorize_mode=
  "vector_entry_point"``), returns the native vector env.
* **The scenario.** ``env_config(...)`` resolves the scenario on the machine that configures the
  run and passes it *by value* (``powertrip_env.scenario.portable``): the sites, the workload
  and the sites' power data, so a worker needs no file, no shared filesystem and no copy of
  ``traces/``.
* **The per-site structure.** ``SiteRLModule`` encodes each site with one small network shared
  by all sites, pools them into a context, and reads each site's two action logits from its own
  encoding and the context, like ``agents/site_policy.py`` does for SB3. It needs
  ``obs_mode="dict"`` (the default of ``env_config``).

A run (``examples/rllib_ppo.py`` is a complete one)::

    from ray.rllib.algorithms.ppo import PPOConfig
    from ray.rllib.core.rl_module.rl_module import RLModuleSpec
    from powertrip_env.integrations import rllib

    rllib.register()
    config = (
        PPOConfig()
        .environment(rllib.ENV_NAME, env_config=rllib.env_config("PowerTrip-v0"))
        .rl_module(rl_module_spec=RLModuleSpec(module_class=rllib.SiteRLModule))
    )
    algo = config.build_algo()
    algo.train()
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Mapping, Sequence
from typing import Any

import gymnasium as gym
import numpy as np
import torch
from ray.rllib.core.columns import Columns
from ray.rllib.core.distribution.torch.torch_distribution import TorchMultiCategorical
from ray.rllib.core.rl_module.apis import ValueFunctionAPI
from ray.rllib.core.rl_module.torch import TorchRLModule
from torch import nn

import powertrip_env
from powertrip_env.integrations.torch_sites import mask_padded_logits, pool_sites
from powertrip_env.scenario import Scenario
from powertrip_env.scenario.portable import is_portable, to_portable

ENV_NAME = "powertrip"
_IDS = [*powertrip_env.ENV_IDS, *powertrip_env.SAMPLED_ENV_IDS]
DEFAULT_MODEL_CONFIG: dict[str, Any] = {
    "site_hidden": [64, 64],  # per-site encoder, shared by all sites
    "site_out": 16,  # each site's own encoding, read by the action head
    "context_dim": 64,  # pooled (mean, max) sites + global features -> context
    "head_hidden": [64],  # the action head, shared by all sites
    "vf_hidden": [64, 64],  # the value function over the context
}


def env_creator(env_config: Mapping[str, Any]) -> gym.Env | gym.vector.VectorEnv:
    """Build the environment an RLlib env runner asks for.

    ``env_config`` keys: ``env`` (a registered ID, default ``"PowerTrip-v0"``), ``scenario`` (a
    name, a TOML path valid on this machine, or a portable scenario), ``num_envs`` (set by RLlib
    for the vector entry point: the native vector env of that many sub-envs), and any keyword
    of ``PowerTripEnv`` (``obs_mode``, ``reward_mode``, ``split``, ``jitter``, ...).
    """
    config = dict(env_config)
    env_id = config.pop("env", "PowerTrip-v0")
    if env_id not in _IDS:
        raise ValueError(
            f"env_config['env'] = {env_id!r}: not a PowerTrip ID; allowed: "
            f"{', '.join(_IDS)} (a user scenario goes in env_config['scenario'])"
        )
    num_envs = config.pop("num_envs", None)
    config.setdefault("action_mode", "multidiscrete")
    spec = gym.spec(env_id)
    kwargs = {**spec.kwargs, **config}
    if num_envs is not None and env_id in powertrip_env.SAMPLED_ENV_IDS:
        # a catalogue per episode: one env each (the native vector env steps one catalogue)
        return gym.vector.SyncVectorEnv(
            [lambda: gym.make(env_id, **config) for _ in range(int(num_envs))]
        )
    if num_envs is not None:
        from powertrip_env.vector_env import PowerTripVectorEnv

        return PowerTripVectorEnv(
            num_envs=int(num_envs), max_episode_steps=spec.max_episode_steps, **kwargs
        )
    return gym.make(env_id, **config)


def register(name: str = ENV_NAME) -> str:
    """Register ``env_creator`` with Ray Tune under ``name`` (on the driver; RLlib ships it)."""
    from ray.tune.registry import register_env

    register_env(name, env_creator)
    return name


def env_config(
    env: str = "PowerTrip-v0",
    scenario: str | os.PathLike[str] | Scenario | Mapping[str, Any] | None = None,
    *,
    by_value: bool = True,
    **env_kwargs: Any,
) -> dict[str, Any]:
    """RLlib's ``env_config`` for a registered ID, optionally on a user scenario.

    The scenario (the ID's own if none is given) is resolved here and, with ``by_value=True``,
    passed as a portable scenario that carries its power data: every env runner then builds the
    same simulation without reading a file. ``by_value=False`` passes the name or path as it is,
    for clusters whose nodes all have the package and the files at the same paths. An ID that
    draws its sites (``PowerTrip-Random-v0``) reads the raw traces on every node, so its
    scenario always goes by name. The default ``obs_mode`` is ``"dict"``, which
    ``SiteRLModule`` reads.
    """
    if env not in _IDS:
        raise ValueError(f"env = {env!r}: not a PowerTrip ID; allowed: {', '.join(_IDS)}")
    chosen = gym.spec(env).kwargs["scenario"] if scenario is None else scenario
    if env in powertrip_env.SAMPLED_ENV_IDS:
        if is_portable(chosen) or isinstance(chosen, Scenario):
            raise ValueError(
                f"env = {env!r} draws its sites from the raw traces, which a scenario by value "
                "does not carry: give the scenario's name or path (every node needs the package's "
                "data, which a wheel in py_modules carries)"
            )
    elif by_value and not is_portable(chosen):
        chosen = to_portable(chosen)
    elif not by_value and isinstance(chosen, Scenario):
        raise ValueError("by_value=False needs a scenario name or path, not a loaded Scenario")
    return {"env": env, "scenario": chosen, "obs_mode": "dict", **env_kwargs}


# --------------------------------------------------------------------------- the RLModule


def _mlp(sizes: Sequence[int], activation: type[nn.Module] = nn.Tanh) -> nn.Sequential:
    layers: list[nn.Module] = []
    for a, b in itertools.pairwise(sizes):
        layers += [nn.Linear(a, b), activation()]
    return nn.Sequential(*layers)


class SiteRLModule(TorchRLModule, ValueFunctionAPI):
    """PPO's policy and value function with one network per site role, shared by all sites.

    Observation ``{"sites": (N, F), "global": (G,)}`` (``obs_mode="dict"``), action
    ``MultiDiscrete([2] * N)``. Data flow (B batch, K site encoding, C context)::

        sites ──encoder (shared)──► (B, N, K) ──mean, max over sites──┐
        global ───────────────────────────────────────────────────────┴─► context (B, C)
        [site encoding, context] ──action head (shared)──► 2 logits per site ─► (B, 2N)
        context ──value MLP──► (B,)

    Permuting the sites permutes the action logits the same way and leaves the value unchanged,
    so the rule "take a site whose power and speed are good enough" is learnt once for every
    site. On an env padded with ``max_sites`` (``obs["valid"]``) it pools over the real sites
    only and never takes a padded one, so one module acts on any scenario with up to M sites.
    ``model_config`` keys and defaults: ``DEFAULT_MODEL_CONFIG``.
    """

    def setup(self) -> None:
        space = self.observation_space
        keys = set(space.spaces) if isinstance(space, gym.spaces.Dict) else set()
        if keys not in ({"sites", "global"}, {"sites", "global", "valid"}):
            raise ValueError(
                f"SiteRLModule reads obs_mode='dict' observations {{'sites', 'global'}} (and "
                f"'valid' with max_sites); got {space}. Make the env with obs_mode='dict' "
                "(rllib.env_config does)."
            )
        self.padded = "valid" in keys
        if not isinstance(self.action_space, gym.spaces.MultiDiscrete):
            raise ValueError(
                f"SiteRLModule acts in MultiDiscrete([2] * N); got {self.action_space}. Make the "
                "env with action_mode='multidiscrete' (rllib.env_creator does)."
            )
        cfg = {**DEFAULT_MODEL_CONFIG, **(self.model_config or {})}
        n, f = space["sites"].shape
        g = space["global"].shape[0]
        k, c = int(cfg["site_out"]), int(cfg["context_dim"])
        self.n_sites = n
        self.encoder = nn.Sequential(
            _mlp([f, *cfg["site_hidden"]]), nn.Linear(cfg["site_hidden"][-1], k), nn.Tanh()
        )
        self.context = _mlp([2 * k + g, c])
        head = [k + c, *cfg["head_hidden"]]
        self.head = nn.Sequential(_mlp(head), nn.Linear(head[-1], 2))
        vf = [c, *cfg["vf_hidden"]]
        self.value = nn.Sequential(_mlp(vf), nn.Linear(vf[-1], 1))
        self.action_dist_cls = TorchMultiCategorical.get_partial_dist_cls(
            space=self.action_space, input_lens=[int(v) for v in self.action_space.nvec]
        )

    def _valid(self, batch: dict[str, Any]) -> torch.Tensor | None:
        return batch[Columns.OBS]["valid"] > 0.5 if self.padded else None

    def _encode(self, batch: dict[str, Any]) -> tuple[torch.Tensor, torch.Tensor]:
        obs = batch[Columns.OBS]
        sites = self.encoder(obs["sites"].float())  # (B, N, K)
        pooled = torch.cat([pool_sites(sites, self._valid(batch)), obs["global"].float()], dim=-1)
        return sites, self.context(pooled)

    def _forward(self, batch: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
        sites, context = self._encode(batch)
        per_site = torch.cat([sites, context[:, None, :].expand(-1, sites.shape[1], -1)], dim=-1)
        logits = self.head(per_site)  # (B, N, 2): [skip, take] for each site
        if self.padded:  # a padded site never takes part
            logits = mask_padded_logits(logits, self._valid(batch))
        return {
            Columns.ACTION_DIST_INPUTS: logits.reshape(logits.shape[0], -1),
            Columns.EMBEDDINGS: context,
        }

    def compute_values(self, batch: dict[str, Any], embeddings: Any | None = None) -> Any:
        if embeddings is None:
            _, embeddings = self._encode(batch)
        return self.value(embeddings).squeeze(-1)


# --------------------------------------------------------------------------- a trained module


def load_module(checkpoint: str | os.PathLike[str]) -> TorchRLModule:
    """The policy's RLModule from a checkpoint that ``Algorithm.save`` wrote (or the module's
    own folder inside it)."""
    from ray.rllib.core.rl_module.rl_module import RLModule

    path = os.path.abspath(os.fspath(checkpoint))
    for inner in ("learner_group/learner/rl_module/default_policy", "rl_module/default_policy", ""):
        candidate = os.path.join(path, inner) if inner else path
        if os.path.isfile(os.path.join(candidate, "class_and_ctor_args.pkl")):
            return RLModule.from_checkpoint(candidate)
    raise FileNotFoundError(
        f"{path}: no RLlib module checkpoint there (looked for "
        "learner_group/learner/rl_module/default_policy); give the folder Algorithm.save wrote"
    )


def greedy_action(module: TorchRLModule, obs: Any) -> np.ndarray:
    """The module's most likely action for one observation (a dict, or a flat array)."""
    with torch.no_grad():
        if isinstance(obs, Mapping):
            batch = {k: torch.as_tensor(np.asarray(v))[None] for k, v in obs.items()}
        else:
            batch = torch.as_tensor(np.asarray(obs))[None]
        out = module.forward_inference({Columns.OBS: batch})
        logits = out[Columns.ACTION_DIST_INPUTS][0].reshape(-1, 2)
    return logits.argmax(dim=-1).numpy().astype(np.int64)
