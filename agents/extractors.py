"""The site encoder: a feature extractor that treats the sites as a set.

A flat MLP over ``N × F + G`` numbers has to learn the same rule ("a site with a lot of power
and a short RTT is worth adding") once per site position, and it cannot be reused on a scenario
with a different number of sites. ``SiteEncoder`` reads ``obs_mode="dict"`` observations and
applies one small MLP to every site's features with shared weights, then pools the per-site
embeddings with mean and max, which do not depend on the order of the sites or on N. The pooled
summary and the global features go through a second MLP.

Shapes (B = batch, N = sites, F = features per site, G = global features, H = site embedding):

=====================  ==================================================================
``obs["sites"]``       (B, N, F) float32
``obs["global"]``      (B, G) float32
per-site embedding     (B, N, H) = site_mlp(sites), the same weights for every site
pooled                 (B, 2H) = [mean over N, max over N]
context                (B, context_dim) = context_mlp([pooled, global])
output                 (B, context_dim + N · site_out): the context, then (if ``site_out``
                       > 0) a ``site_out``-wide projection of every site's embedding, in site
                       order; with padding, then the N valid flags
=====================  ==================================================================

Padding: an env made with ``max_sites`` (M) adds ``obs["valid"]`` (B, M), 1 for the scenario's
real sites. The encoder then pools over the valid sites only, zeroes the padded sites' blocks
and appends the flags to its output, so that the action head can rule padded sites out. The
output does not depend on how many padded rows there are, and one model acts on any N <= M.

Why the per-site block: after the extractor, SB3's default policies put a dense linear layer
with one output per site. Given only the pooled context (``site_out=0``), that layer would see
nothing that tells site 3 from site 5 at this moment and could only learn fixed per-position
preferences. With each site's own embedding appended, a policy can read the features of the
site it decides for: ``powertrip_env.agents.site_policy.SitePolicy`` does so with one head shared by
all sites. The context part is permutation-invariant either way; the per-site block is
permutation-equivariant (permuting the sites permutes its blocks). ``site_out=0`` gives the
purely invariant encoder.

Works with any SB3 policy that accepts ``features_extractor_class`` for a ``Dict`` observation
(``MultiInputPolicy`` of PPO, A2C and sb3-contrib's MaskablePPO).
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence

import torch as th
from gymnasium import spaces
from stable_baselines3.common.torch_layers import BaseFeaturesExtractor
from torch import nn

from powertrip_env.harness.models.registry import register_network_classes
from powertrip_env.integrations.torch_sites import pool_sites


def mlp(sizes: Sequence[int], activation: type[nn.Module] = nn.ReLU) -> nn.Sequential:
    """Linear layers between consecutive ``sizes``, each followed by ``activation``."""
    layers: list[nn.Module] = []
    for n_in, n_out in itertools.pairwise(sizes):
        layers += [nn.Linear(n_in, n_out), activation()]
    return nn.Sequential(*layers)


class SiteEncoder(BaseFeaturesExtractor):
    """Shared per-site MLP, mean+max pooling over sites, and a context MLP (see module doc).

    :param observation_space: ``Dict`` with ``"sites"`` ``Box(N, F)`` and ``"global"`` ``Box(G)``.
    :param site_hidden: widths of the per-site MLP; the last one is the embedding width H.
    :param context_dim: width of the pooled-context output (the context MLP's last layer).
    :param context_hidden: hidden widths of the context MLP before ``context_dim``.
    :param site_out: width of each site's own block in the output; 0 for none.
    :param activation: activation class, or its name (``"relu"``, ``"tanh"``, ...).
    """

    def __init__(
        self,
        observation_space: spaces.Dict,
        site_hidden: Sequence[int] = (64, 64),
        context_dim: int = 64,
        context_hidden: Sequence[int] = (),
        site_out: int = 8,
        activation: type[nn.Module] | str = nn.ReLU,
    ) -> None:
        is_dict = isinstance(observation_space, spaces.Dict)
        keys = set(observation_space.spaces) if is_dict else set()
        if not {"sites", "global"} <= keys:
            raise ValueError(
                f"SiteEncoder needs a Dict observation with 'sites' and 'global' "
                f"(obs_mode='dict'); got {observation_space}"
            )
        sites_space = observation_space["sites"]
        global_space = observation_space["global"]
        if len(sites_space.shape) != 2 or len(global_space.shape) != 1:
            raise ValueError(
                f"SiteEncoder expects sites of shape (N, F) and global of shape (G,); got "
                f"{sites_space.shape} and {global_space.shape}"
            )
        if not site_hidden or min(site_hidden) < 1 or context_dim < 1 or site_out < 0:
            raise ValueError(
                f"SiteEncoder: site_hidden={list(site_hidden)}, context_dim={context_dim} and "
                f"site_out={site_out} must be positive widths (site_out may be 0)"
            )
        n_sites, n_site_features = sites_space.shape
        n_global = global_space.shape[0]
        act = activation_class(activation) if isinstance(activation, str) else activation
        self.padded = "valid" in keys
        super().__init__(
            observation_space,
            features_dim=context_dim + n_sites * site_out + (n_sites if self.padded else 0),
        )

        width = int(site_hidden[-1])
        self.n_sites, self.context_dim, self.site_out = int(n_sites), context_dim, site_out
        self.site_mlp = mlp([n_site_features, *site_hidden], act)
        self.context_mlp = mlp([2 * width + n_global, *context_hidden, context_dim], act)
        self.site_head = nn.Linear(width, site_out) if site_out > 0 else None

    def forward(self, observations: dict[str, th.Tensor]) -> th.Tensor:
        """(B, N, F) sites and (B, G) global → (B, features_dim), as laid out in the module doc."""
        embedded = self.site_mlp(observations["sites"])  # (B, N, H)
        valid = observations["valid"] > 0.5 if self.padded else None  # (B, N)
        pooled = pool_sites(embedded, valid)  # (B, 2H)
        context = self.context_mlp(th.cat([pooled, observations["global"]], dim=-1))
        parts = [context]
        if self.site_head is not None:
            per_site = self.site_head(embedded)  # (B, N, site_out)
            if valid is not None:
                per_site = per_site * valid.unsqueeze(-1)
            parts.append(per_site.flatten(start_dim=1))  # (B, N · site_out)
        if valid is not None:
            parts.append(valid.to(context.dtype))
        return th.cat(parts, dim=-1) if len(parts) > 1 else context


ACTIVATIONS: dict[str, type[nn.Module]] = {
    "relu": nn.ReLU,
    "tanh": nn.Tanh,
    "elu": nn.ELU,
    "gelu": nn.GELU,
    "silu": nn.SiLU,
    "leaky_relu": nn.LeakyReLU,
}


def activation_class(name: str) -> type[nn.Module]:
    """The torch activation class for a name used in the YAML files (``"tanh"``, ``"relu"``)."""
    try:
        return ACTIVATIONS[name.lower()]
    except KeyError:
        raise ValueError(
            f"activation {name!r} is not supported; allowed: {', '.join(ACTIVATIONS)}"
        ) from None


# A saved agent's policy_kwargs may name the encoder and these activations, by class or by name
# (``activation_fn="tanh"``, as SitePolicy takes it): powertrip_env.harness.models.loading rebuilds
# them from there, with the classes registered here (powertrip_env.harness.models.registry).
register_network_classes(SiteEncoder, *ACTIVATIONS.values(), activation_names=ACTIVATIONS)
