"""The compiled kernel against itself run as plain Python (``NUMBA_DISABLE_JIT=1``).

The kernel's functions (``powertrip_env.dynamics``) are compiled by numba, and
``NUMBA_DISABLE_JIT=1`` runs the very same source as ordinary Python, for stepping through a
round in a debugger. This module keeps that path honest: a subprocess with the variable set
plays episodes of the single env, the vector env (autoresets included), a padded dict env,
``predict_round`` over every subset, the forecast what-if of several rounds, the candidate sets,
the clairvoyant references' simulation and the lower bounds' compiled searches, a moving
episode (its path, rounds, monitor and clairvoyant simulation), a carbon task's observation and
the online estimates (``dynamics.estimates``) with the candidates built on them,
and everything it prints must equal, bit for bit, what the compiled code gives here.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]

SCRIPT = r"""
import json, sys
import numpy as np, gymnasium as gym
import powertrip_env
from powertrip_env.dynamics.round import _round

out = {"compiled": type(_round).__name__ != "function"}
rng = np.random.default_rng(0)

env = gym.make("PowerTrip-v0")
obs, info = env.reset(seed=7)
steps = []
for _ in range(15):
    obs, r, te, tr, info = env.step((rng.random(10) < 0.5).astype(np.int8))
    steps.append([obs.astype(float).tolist(), r, te, tr, info["round_time_s"],
                  info["energy_kwh"], int(info["straggler"]), info["dropped"].tolist()])
out["single"] = steps
subsets = ((np.arange(1, 2**10)[:, None] >> np.arange(10)) & 1).astype(bool)
out["predict"] = [a.tolist() for a in env.unwrapped.predict_round(subsets)]
future = env.unwrapped.clairvoyant()
out["jitter"] = future.jitter(6).tolist()
plan = future.simulate(subsets[::97], rounds=8)
out["simulate"] = [plan.state.data.tolist(), plan.tta_h.tolist()]
ahead = env.unwrapped.predict_plan(subsets[::97], rounds=6)
out["predict_plan"] = [ahead.state.data.tolist(), ahead.tta_h.tolist()]
from powertrip_env.baselines.lower_bound import join_bound_h, round_bound_h
out["bounds"] = [round_bound_h(env.unwrapped, max_steps=1500),
                 join_bound_h(env.unwrapped, max_steps=1500)]
cand = []
for _ in range(6):
    c = env.unwrapped.candidates()
    cand.append([c.masks.tolist(), c.features.tolist(), c.pool_times.tolist()])
    env.step(c.masks[0, 4].astype(np.int8))
out["candidates"] = cand

venv = gym.make_vec("PowerTrip-LoRA-v0", num_envs=3, jitter=0.2)
obs, _ = venv.reset(seed=3)
vsteps = []
n = venv.unwrapped.params.n_sites
for _ in range(200):
    obs, r, te, tr, info = venv.step(rng.integers(0, 2, (3, n)))
    vsteps.append([obs.astype(float).tolist(), r.tolist(), te.tolist(), tr.tolist()])
out["vector"] = vsteps

padded = gym.make("PowerTrip-EMNIST-v0", obs_mode="dict", max_sites=12)
obs, _ = padded.reset(seed=1)
psteps = []
for _ in range(10):
    obs, r, te, tr, info = padded.step(rng.integers(0, 2, 12))
    psteps.append([obs["sites"].astype(float).tolist(), obs["global"].astype(float).tolist(), r])
out["padded"] = psteps

from powertrip_env import dynamics
moving = gym.make("PowerTrip-Moving-v0")
world = moving.unwrapped
obs, _ = moving.reset(seed=0)
out["moving_path"] = dynamics.path_of(world.params, world.state, 600).tolist()
msteps = []
for _ in range(12):
    obs, r, te, tr, info = moving.step((rng.random(10) < 0.7).astype(np.int8))
    msteps.append([obs.astype(float).tolist(), r, te, tr, info["round_time_s"],
                   info["energy_kwh"], info["measured_compute_s"].tolist(),
                   info["measured_transfer_s"].tolist(), world.state.data.tolist(),
                   dynamics.path_now(world.params, world.state).tolist()])
out["moving"] = msteps
door = world.clairvoyant()
out["moving_monitored"] = door.monitored().vector.tolist()
ahead = door.simulate(subsets[::97], rounds=6)
out["moving_simulate"] = [ahead.state.data.tolist(), ahead.tta_h.tolist()]

carbon = gym.make("PowerTrip-Carbon-Measured-v2", carbon_obs=True, reward_mode="carbon")
obs, _ = carbon.reset(seed=2)
csteps = []
for _ in range(12):
    obs, r, te, tr, info = carbon.step((rng.random(6) < 0.6).astype(np.int8))
    csteps.append([obs.astype(float).tolist(), r, info["carbon_kg"]])
out["carbon_obs"] = csteps

from powertrip_env.baselines.adaptive import TUNED_TRACKING, Estimates
est_out = []
for eid, tracking in (("PowerTrip-Measured-v0", None), ("PowerTrip-Moving-v0", TUNED_TRACKING)):
    e = gym.make(eid).unwrapped
    e.reset(seed=4)
    estimates = Estimates(e.decision_view().scenario, 1, 0.5, tracking)
    for k in range(25):
        c = estimates.candidates(e)
        mask = c.masks[0, k % c.masks.shape[1]]
        estimates.played(mask[None, :])
        e.step(mask.astype(np.int8))
    est_out.append([estimates.est.tolist(), estimates.update(e.telemetry()).tolist()])
out["estimates"] = est_out
json.dump(out, sys.stdout)
"""


def run(disable_jit: bool) -> dict:
    env = {**os.environ, "NUMBA_DISABLE_JIT": "1" if disable_jit else "0"}
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout)


def test_plain_python_runs_the_kernel_bit_for_bit_as_compiled() -> None:
    plain = run(disable_jit=True)
    compiled = run(disable_jit=False)
    assert plain.pop("compiled") is False
    assert compiled.pop("compiled") is True
    assert plain.keys() == compiled.keys()
    for key in plain:
        assert plain[key] == compiled[key], key
    assert len(compiled["single"]) == 15 and np.isfinite(compiled["predict"]).all()
    assert any(any(te) or any(tr) for _, _, te, tr in compiled["vector"])  # autoresets ran
    assert not np.all(np.array(compiled["moving_path"]) == 1.0)  # the moving world moved
