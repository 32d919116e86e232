"""Another future for an episode: the tests that check a deployable policy reads no future
actual give it an env whose rows after the current one are scrambled, and ask whether its
decision (or its observation) moves."""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from powertrip_env.dynamics import current_row
from powertrip_env.dynamics.layout import G_PER_J, POWERED, PV_W, RATE


def scrambled_future(env: Any, seed: int) -> Any:
    """The unwrapped env's tables with every row after the current one scrambled: the grid's
    intensity, the PV and the power, as another future would have them. The forecasts issued
    up to now stay (they are the past)."""
    params = env.params
    row = int(current_row(params, env.state.time_s)[0])
    rng = np.random.default_rng(seed)
    table = params.table.copy()
    future = table[row + 1 :]
    future[:, G_PER_J] *= rng.uniform(0.05, 20.0, future[:, G_PER_J].shape)
    future[:, PV_W] *= rng.uniform(0.0, 2.0, future[:, PV_W].shape)
    keep = rng.uniform(0.2, 1.0, future[:, RATE].shape)
    future[:, RATE] *= keep
    future[:, POWERED] = np.floor(future[:, POWERED] * keep)
    return dataclasses.replace(params, table=table)


def twin_on(env: Any, params: Any) -> Any:
    """A fork of the unwrapped ``env`` at the same point whose tables are ``params``."""
    twin = env.fork()
    engine = twin._engine
    setup = engine.setup
    sim = dataclasses.replace(setup.sim, params=params)
    engine.setup = dataclasses.replace(setup, sim=sim, interface=setup.interface.on(params))
    return twin
