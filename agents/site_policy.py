"""A policy that decides for every site with the same weights: ``SitePolicy``.

SB3's actor-critic policies end in one dense linear layer from the latent vector to the N site
logits. Even on top of ``SiteEncoder`` that layer has separate weights per site position, so
the rule "take a site whose compute time is short enough" has to be learnt N times, and a
model cannot be used on a scenario with another N. ``SitePolicy`` replaces that layer with
``SiteActionHead``: one small MLP that reads a site's own embedding together with the pooled
context and returns that site's logits. The policy is then permutation-equivariant: permuting
the sites permutes the action probabilities the same way. The value function reads the whole
feature vector through its own MLP, as usual.

Data flow (B batch, N sites, C context width, K per-site width, k logits per site: 1 for
``MultiBinary`` (Bernoulli), 2 for MaskablePPO's per-site categorical)::

    obs ──SiteEncoder──► features (B, C + N·K) ──┬─ policy latent = features (net_arch pi = [])
                                                 │      └─ SiteActionHead ─► logits (B, N·k)
                                                 └─ vf MLP ─► value (B, 1)

``SitePolicy`` is for PPO and A2C, ``MaskableSitePolicy`` for sb3-contrib's MaskablePPO.

On an env padded with ``max_sites`` the encoder appends the valid flags to the features and the
head gives every padded site fixed logits that never take part, so the policy's choices and
their probabilities do not depend on how many padded slots there are.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial
from typing import Any

import numpy as np
import torch as th
from sb3_contrib.common.maskable.policies import MaskableMultiInputActorCriticPolicy
from stable_baselines3.common.policies import MultiInputActorCriticPolicy
from torch import nn

from powertrip_env.agents.extractors import SiteEncoder, activation_class, mlp
from powertrip_env.harness.models.registry import register_policy_class
from powertrip_env.integrations.torch_sites import mask_padded_logits


class SiteActionHead(nn.Module):
    """Per-site logits from ``[site block, context]`` with one MLP shared by all sites.

    :param context_dim: C, the width of the context at the start of the latent vector.
    :param n_sites: N.
    :param site_dim: K, the width of each site's block after the context.
    :param logits_per_site: k; the output is (B, N·k), site-major.
    :param hidden: hidden widths of the shared MLP.
    :param activation: activation class.
    :param padded: the latent ends with N valid flags (``SiteEncoder`` on a padded env); a
        padded site then gets fixed logits that never select it
        (``powertrip_env.integrations.torch_sites.mask_padded_logits``).
    """

    def __init__(
        self,
        context_dim: int,
        n_sites: int,
        site_dim: int,
        logits_per_site: int,
        hidden: Sequence[int] = (64,),
        activation: type[nn.Module] = nn.Tanh,
        padded: bool = False,
    ) -> None:
        super().__init__()
        self.context_dim, self.n_sites, self.site_dim = context_dim, n_sites, site_dim
        self.padded = padded
        self.hidden = mlp([site_dim + context_dim, *hidden], activation)
        self.out = nn.Linear(hidden[-1] if hidden else site_dim + context_dim, logits_per_site)

    def forward(self, latent: th.Tensor) -> th.Tensor:
        """(B, C + N·K) → (B, N·k); (B, C + N·K + N) → (B, N·k) when padded."""
        batch = latent.shape[0]
        c, n = self.context_dim, self.n_sites
        context = latent[:, :c]
        sites = latent[:, c : c + n * self.site_dim].reshape(batch, n, self.site_dim)
        joined = th.cat([sites, context.unsqueeze(1).expand(-1, n, -1)], dim=-1)
        logits = self.out(self.hidden(joined))  # (B, N, k)
        if self.padded:
            logits = mask_padded_logits(logits, latent[:, c + n * self.site_dim :] > 0.5)
        return logits.reshape(batch, -1)


class SiteHeadMixin:
    """Mixin over an SB3 multi-input actor-critic policy: swap the action layer for the head.

    The keyword arguments are the encoder's (``site_hidden``, ``context_dim``, ``site_out``),
    the head's (``head_hidden``), the value MLP's (``vf_net_arch``) and the usual policy ones.
    """

    def __init__(
        self,
        *args: Any,
        site_hidden: Sequence[int] = (64, 64),
        context_dim: int = 64,
        site_out: int = 16,
        head_hidden: Sequence[int] = (64,),
        vf_net_arch: Sequence[int] = (64, 64),
        activation_fn: type[nn.Module] | str = nn.Tanh,
        **kwargs: Any,
    ) -> None:
        if site_out < 1:
            raise ValueError(
                f"SitePolicy needs per-site features: site_out={site_out} must be >= 1"
            )
        act = activation_class(activation_fn) if isinstance(activation_fn, str) else activation_fn
        self.head_hidden = tuple(head_hidden)
        kwargs.setdefault("features_extractor_class", SiteEncoder)
        kwargs.setdefault(
            "features_extractor_kwargs",
            {
                "site_hidden": tuple(site_hidden),
                "context_dim": context_dim,
                "site_out": site_out,
                "activation": act,
            },
        )
        kwargs["net_arch"] = {"pi": [], "vf": list(vf_net_arch)}
        self._site_kwargs = {
            "site_hidden": tuple(site_hidden),
            "context_dim": context_dim,
            "site_out": site_out,
            "head_hidden": self.head_hidden,
            "vf_net_arch": tuple(vf_net_arch),
        }
        super().__init__(*args, activation_fn=act, **kwargs)

    def _build(self, lr_schedule: Any) -> None:
        super()._build(lr_schedule)
        encoder = self.features_extractor
        n_logits = self.action_net.out_features
        self.action_net = SiteActionHead(
            encoder.context_dim,
            encoder.n_sites,
            encoder.site_out,
            n_logits // encoder.n_sites,
            self.head_hidden,
            self.activation_fn,
            padded=encoder.padded,
        )
        if self.ortho_init:
            self.action_net.hidden.apply(partial(self.init_weights, gain=np.sqrt(2)))
            self.action_net.out.apply(partial(self.init_weights, gain=0.01))
        self.optimizer = self.optimizer_class(
            self.parameters(), lr=lr_schedule(1), **self.optimizer_kwargs
        )

    def _get_constructor_parameters(self) -> dict[str, Any]:
        # Saved with the model so that ``load`` rebuilds the same head; net_arch is derived.
        data = super()._get_constructor_parameters()
        data.pop("net_arch", None)
        data.update(self._site_kwargs)
        return data


class SitePolicy(SiteHeadMixin, MultiInputActorCriticPolicy):
    """``MultiInputActorCriticPolicy`` with ``SiteEncoder`` and a shared per-site action head."""


class MaskableSitePolicy(SiteHeadMixin, MaskableMultiInputActorCriticPolicy):
    """The same for MaskablePPO (two logits per site, masked by ``action_masks()``)."""


# Saved agents with these policies load in powertrip_env.harness.evaluation.evaluate, which never
# imports this package: it takes the classes it may load from its registry
# (powertrip_env.harness.models.registry, whose load_plugins imports this module by name, as one of
# its PLUGINS, when a model names a class it does not know yet).
register_policy_class(SitePolicy, "ppo", "a2c")
register_policy_class(MaskableSitePolicy, "maskable_ppo")
