"""Fixtures shared by several test files, and how the tests share two cores.

The suite runs on pytest-xdist's workers (``-n 2 --dist loadgroup``, pyproject.toml's addopts).
A module- or session-scoped fixture is built once per worker that runs a test using it, so
``pytest_collection_modifyitems`` sends every test that uses one of the expensive ones (a
trained model, a wheel, a dataset, the clairvoyant references' episodes) to the same worker:
one ``xdist_group`` per fixture. The tests that start Ray (the ``rllib`` and ``flower`` stages)
share one worker too. Without xdist (``-n 0``) the groups change nothing.
"""

from __future__ import annotations

import inspect
import sys
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
import pytest
from scenario_files import write_powered_scenario

# ``maintainers/`` (the docs' and tables' writers) is the checkout's, not the installed package's:
# importable from the repository root whichever folder pytest was started in.
_ROOT = str(Path(__file__).resolve().parents[1])
if _ROOT not in sys.path:
    sys.path.append(_ROOT)

# Module-scoped fixtures of conftest.py that only write a small file: their tests need no group.
CHEAP_SHARED_FIXTURES = frozenset({"short_scenario", "small_scenario"})
TESTS = Path(__file__).resolve().parent

# The LoRA scenario (8 sites, synthetic trace) with quarter-hour episodes, so short training
# runs finish many.
SHORT_SCENARIO = 'extends = "lora"\n\n[episode]\ntime_budget_h = 0.25\n'


@pytest.fixture
def one_torch_thread() -> None:
    """Small networks; extra intra-op threads only contend with other tests for two cores."""
    import torch

    torch.set_num_threads(1)


@pytest.fixture(scope="module")
def short_scenario(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("scenario") / "short.toml"
    path.write_text(SHORT_SCENARIO, encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def small_scenario(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Four sites with power that changes every interval; episodes of a few dozen rounds."""
    rng = np.random.default_rng(3)
    powered = rng.integers(0, 13, size=(288 * 3, 4))
    return write_powered_scenario(
        tmp_path_factory.mktemp("small"),
        powered,
        gpus=["G100", "G200", "G100", "G100"],
        rtt_ms=[1, 30, 60, 120],
        network={"join_fixed_s": 2.0, "rtt_factor": 10.0},
        episode={"jitter_sigma": 0.05},
    )


class Played(NamedTuple):
    """A policy's episode as ``play_on_copy`` played it, and the policy after it (a reference
    keeps what it planned: ``planned_tta_h``, ``starts``, ...)."""

    run: Any  # powertrip_env.baselines.references.PolicyRun
    policy: Any  # powertrip_env.baselines.base.Policy


@pytest.fixture(scope="session")
def reference_runs() -> Iterator[Callable[[str, bool, int, str], Played]]:
    """``runs(env_id, jitter, seed, name)``: the registry's policy ``name``
    (``make_policy(name, n_sites)``, a new one per episode) played by ``play_on_copy`` from
    ``reset(seed=seed)`` of ``gym.make(env_id, split="test", jitter=jitter)``, once per test run.

    The clairvoyant Optimiser takes seconds per flagship episode, and tests/test_optimum.py and
    tests/test_benchmark.py play it on the same episodes: they ask here instead. An episode is
    fixed by the env's settings and the seed, so every asker gets the run it would have played.
    """
    import gymnasium as gym

    from powertrip_env.baselines.references import play_on_copy
    from powertrip_env.baselines.registry import make_policy

    envs: dict[tuple[str, bool], Any] = {}
    played: dict[tuple[str, bool, int, str], Played] = {}

    def runs(env_id: str, jitter: bool, seed: int, name: str) -> Played:
        key = (env_id, jitter, seed, name)
        if key not in played:
            if (env_id, jitter) not in envs:
                envs[env_id, jitter] = gym.make(env_id, split="test", jitter=jitter)
            env = envs[env_id, jitter]
            env.reset(seed=seed)
            policy = make_policy(name, env.unwrapped.params.n_sites)
            played[key] = Played(play_on_copy(env, policy), policy)
        return played[key]

    yield runs
    for env in envs.values():
        env.close()


def _shared_group(item: pytest.Item) -> str | None:
    """The xdist group of a test that uses a module- or session-scoped fixture of this folder's
    files (pytest's and plugins' own are left alone): the module that defines the fixture and
    its name, for the first such fixture the test asks for."""
    info = getattr(item, "_fixtureinfo", None)  # pytest's own record of the test's fixtures
    if info is None:
        return None
    for name in getattr(item, "fixturenames", ()):
        definitions = info.name2fixturedefs.get(name)
        if not definitions or name in CHEAP_SHARED_FIXTURES:
            continue
        fixture = definitions[-1]
        if fixture.scope not in ("module", "package", "session"):
            continue
        source = inspect.getsourcefile(fixture.func)
        if source is not None and Path(source).resolve().parent == TESTS:
            return f"{fixture.func.__module__}.{name}"
    return None


@pytest.hookimpl(tryfirst=True)  # before xdist's worker reads the groups into the node IDs
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        group = _shared_group(item)
        if item.get_closest_marker("rllib") or item.get_closest_marker("flower"):
            group = "ray"  # one local Ray instance at a time, on one worker, as without xdist
        if group is not None and item.get_closest_marker("xdist_group") is None:
            item.add_marker(pytest.mark.xdist_group(group))


@pytest.hookimpl(tryfirst=True)  # before xdist's worker sends the controller the collected IDs
def pytest_collection_finish(session: pytest.Session) -> None:
    """Keep ``--dist loadgroup`` working on pytest 9.2.

    The controller reads a test's group from an "@group" suffix of its node ID, which xdist 3.8's
    worker writes to ``item._nodeid``; pytest 9.2 keeps the ID in ``item._id`` and ignores that,
    so every group would silently be split across workers (pytest-dev/pytest-xdist#1386). Where
    the suffix took (another pytest or xdist), or pytest has no structured ID, nothing changes.
    It touches pytest's private ``_id``, so any failure of it only warns: the tests still pass,
    each worker building its own fixtures. As with xdist's own suffix, reports and ``--lf`` show
    the IDs with their ``@group``.
    """
    if not getattr(session.config.option, "loadgroup", False):
        return
    try:
        from _pytest.nodeid import NodeId
    except ImportError:
        return
    try:
        for item in session.items:
            marks = item.iter_markers("xdist_group")
            names = {str(m.args[0] if m.args else m.kwargs.get("name", "default")) for m in marks}
            suffix = "@" + "_".join(sorted(names))
            if names and hasattr(item, "_id") and not item.nodeid.endswith(suffix):
                item._id = NodeId.parse(item.nodeid + suffix)
    except Exception as exc:  # a pytest whose private IDs changed: run ungrouped, say so
        warnings.warn(f"xdist groups not applied ({exc!r}); tests run ungrouped", stacklevel=1)
