"""Torch pieces the SB3 site policy (``agents/``) and the RLlib ``SiteRLModule`` share.

An environment made with ``max_sites`` pads its sites to M and marks the real ones in
``obs["valid"]``. A set encoder must then pool over the valid sites only, and an action head
must never choose a padded one; both are written here once. Importing this module imports torch;
``import powertrip_env`` never does.
"""

from __future__ import annotations

import torch as th

PADDED_LOGIT = -30.0  # the "take part" logit of a padded site: probability about 1e-13


def pool_sites(embedded: th.Tensor, valid: th.Tensor | None = None) -> th.Tensor:
    """Mean and max over the sites of ``embedded`` (B, N, H) → (B, 2H).

    With ``valid`` (B, N) bool, over the valid sites only, so the result does not depend on the
    padded rows or on how many there are; a row with no valid site pools to zeros.
    """
    if valid is None:
        return th.cat([embedded.mean(dim=1), embedded.amax(dim=1)], dim=-1)
    weight = valid.unsqueeze(-1).to(embedded.dtype)
    mean = (embedded * weight).sum(dim=1) / weight.sum(dim=1).clamp(min=1.0)
    top = embedded.masked_fill(~valid.unsqueeze(-1), -th.inf).amax(dim=1)
    top = th.where(valid.any(dim=1, keepdim=True), top, th.zeros_like(top))
    return th.cat([mean, top], dim=-1)


def mask_padded_logits(logits: th.Tensor, valid: th.Tensor) -> th.Tensor:
    """Per-site logits (B, N, k) with every padded site's set to never take part.

    The last of a site's k logits is "take part" (k = 1: a Bernoulli logit; k = 2: the
    categorical [skip, take]); a padded site gets ``PADDED_LOGIT`` there and 0 elsewhere.
    """
    fill = th.zeros(logits.shape[-1], dtype=logits.dtype, device=logits.device)
    fill[-1] = PADDED_LOGIT
    return th.where(valid.unsqueeze(-1), logits, fill)
