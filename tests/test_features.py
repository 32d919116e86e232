"""The observation's features are declared once (powertrip_env/dynamics/features.py): the
spaces, the kernel's slots, docs/model.md's tables and ``PowerTripEnv``'s docstring must all say
what the declaration says."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import gymnasium as gym
import numpy as np

import powertrip_env  # noqa: F401  (registers the IDs)
from powertrip_env.dynamics import features
from powertrip_env.env import PowerTripEnv

ROOT = Path(__file__).resolve().parents[1]
MODEL_MD = ROOT / "docs" / "model.md"


def test_docs_model_md_has_the_declared_tables():
    text = MODEL_MD.read_text(encoding="utf-8")
    assert features.rewrite(text) == text, (
        "docs/model.md's observation tables are out of date: run "
        "python -m powertrip_env.dynamics --write docs/model.md"
    )
    for row in (*features.SITE_ROWS, *features.GLOBAL_ROWS):
        assert row.formula in text


def test_the_env_docstring_has_the_declared_table():
    doc = PowerTripEnv.__doc__
    assert features.ENV_TABLE_PLACEHOLDER not in doc
    assert textwrap.indent(features.env_table(), "    ") in doc
    f, g = features.N_SITE_FEATURES, features.N_GLOBAL
    words = " ".join(doc.split())
    assert f"`N * {f} + {g}` float32" in words
    assert f'`{{"sites": Box(N, {f}), "global": Box({g})}}`' in words
    for row in (*features.SITE_ROWS, *features.GLOBAL_ROWS):
        assert row.label in doc


def test_the_declaration_gives_the_names_bounds_and_slots():
    assert features.SITE_FEATURES == tuple(n for r in features.SITE_ROWS for n in r.names)
    assert len(set(features.SITE_FEATURES)) == features.N_SITE_FEATURES == 15
    assert len(set(features.GLOBAL_FEATURES)) == features.N_GLOBAL == 6
    assert (features.SITE_LOW < features.SITE_HIGH).all()
    assert (features.GLOBAL_LOW < features.GLOBAL_HIGH).all()
    site_slots = sorted(
        getattr(features, name) + (q if name == "F_FORECAST" else 0)
        for name in dir(features)
        if name.startswith("F_")
        for q in (range(features.FORECAST_QUARTERS) if name == "F_FORECAST" else [0])
    )
    assert site_slots == list(range(features.N_SITE_FEATURES))  # every column written once
    global_slots = sorted(getattr(features, n) for n in dir(features) if n.startswith("G_"))
    assert global_slots == list(range(features.N_GLOBAL))


def test_observations_stay_in_the_declared_bounds():
    env = gym.make("PowerTrip-v0", obs_mode="dict")
    obs, _ = env.reset(seed=3)
    rng = np.random.default_rng(0)
    for _ in range(30):
        sites, glob = obs["sites"], obs["global"]
        assert ((sites >= features.SITE_LOW) & (sites <= features.SITE_HIGH)).all()
        assert ((glob >= features.GLOBAL_LOW) & (glob <= features.GLOBAL_HIGH)).all()
        obs, _, terminated, truncated, _ = env.step(rng.integers(0, 2, 10).astype(np.int8))
        if terminated or truncated:
            obs, _ = env.reset()
    space = env.observation_space["sites"]
    np.testing.assert_array_equal(space.low[0], features.SITE_LOW)
    np.testing.assert_array_equal(space.high[0], features.SITE_HIGH)


def test_the_generator_rewrites_a_stale_page(tmp_path):
    stale = MODEL_MD.read_text(encoding="utf-8").replace("| 1 | powered GPUs |", "| 1 | GPUs |")
    page = tmp_path / "model.md"
    page.write_text(stale, encoding="utf-8")
    run = [sys.executable, "-m", "powertrip_env.dynamics"]
    checked = subprocess.run([*run, "--check", str(page)], capture_output=True, text=True)
    assert checked.returncode == 1 and "--write" in checked.stderr
    written = subprocess.run([*run, "--write", str(page)], capture_output=True, text=True)
    assert written.returncode == 0, written.stderr
    assert page.read_text(encoding="utf-8") == MODEL_MD.read_text(encoding="utf-8")
    again = subprocess.run([*run, "--check", str(page)], capture_output=True, text=True)
    assert again.returncode == 0, again.stderr
