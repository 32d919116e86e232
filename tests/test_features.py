"""The observation's features are declared once (powertrip_env/dynamics/features.py): the
spaces, the kernel's slots, docs/model.md's tables and ``PowerTripEnv``'s docstring must all say
what the declaration says."""

from __future__ import annotations

import shutil
import textwrap
from pathlib import Path

import gymnasium as gym
import numpy as np

import powertrip_env  # noqa: F401  (registers the IDs)
from maintainers import doc_blocks, feature_tables
from powertrip_env.dynamics import features
from powertrip_env.env import PowerTripEnv

ROOT = Path(__file__).resolve().parents[1]
MODEL_MD = ROOT / "docs" / "model.md"


def test_docs_model_md_has_the_declared_tables():
    """The block ``powertrip docs`` writes (and ``--check`` holds) is on the page, fresh."""
    text = MODEL_MD.read_text(encoding="utf-8")
    block = doc_blocks.contents(text, feature_tables.BLOCK)
    assert block == feature_tables.feature_tables(), (
        "docs/model.md's observation tables are out of date: run powertrip docs"
    )
    assert doc_blocks.holder(feature_tables.BLOCK, ROOT / "README.md") == MODEL_MD
    for row in (*features.SITE_ROWS, *features.GLOBAL_ROWS):
        assert f"| {row.label} | {row.formula} |" in block


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


def test_powertrip_docs_checks_and_rewrites_a_stale_observation_table(tmp_path):
    """The observation tables are one of ``powertrip docs``' generated blocks: ``--check`` names
    the stale page, and writing restores it, like every other generated page."""
    from maintainers import docs_site

    root = tmp_path / "checkout"
    shutil.copytree(ROOT / "docs", root / "docs")
    for name in ("README.md", "mkdocs.yml"):
        shutil.copy(ROOT / name, root / name)
    page = root / "docs" / "model.md"
    stale = page.read_text(encoding="utf-8").replace("| 1 | powered GPUs |", "| 1 | GPUs |")
    page.write_text(stale, encoding="utf-8")
    assert "docs/model.md: out of date" in docs_site.stale(root)
    assert page in docs_site.write(root)
    assert page.read_text(encoding="utf-8") == MODEL_MD.read_text(encoding="utf-8")
    assert not [line for line in docs_site.stale(root) if "model.md" in line]
