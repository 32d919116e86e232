"""The planning API: ``fork()``, ``get_state()`` / ``set_state()`` and ``n_sites``.

A planner forks the episode, tries moves on the fork and plays the best on the real one; so a
fork must continue bit for bit as the original would, and nothing done to one may reach the
other.
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

import powertrip_env  # noqa: F401  (registers the IDs)
from powertrip_env.env import EpisodeState


def _actions(n: int, seed: int, count: int) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [rng.integers(0, 2, n, dtype=np.int8) for _ in range(count)]


def _flat(info: dict) -> list:
    return [(k, np.asarray(v).tobytes()) for k, v in sorted(info.items())]


def _play(env, actions) -> list:
    """Observations, rewards, flags and info of ``actions``, resetting (unseeded) at an end."""
    out = []
    for action in actions:
        obs, reward, terminated, truncated, info = env.step(action)
        out.append((obs.tobytes(), reward, terminated, truncated, _flat(info)))
        if terminated or truncated:
            obs, info = env.reset()
            out.append((obs.tobytes(), _flat(info)))
    return out


@pytest.mark.parametrize("env_id", ["PowerTrip-v0", "PowerTrip-LoRA-v0", "PowerTrip-Random-v0"])
def test_a_fork_continues_bit_for_bit_like_the_original(env_id: str) -> None:
    """Through the episode's end and the unseeded resets after it (the generator is forked)."""
    env = gym.make(env_id).unwrapped
    env.reset(seed=11)
    for action in _actions(env.action_space.shape[0], 0, 4):
        env.step(action)
    fork = env.fork()
    actions = _actions(env.action_space.shape[0], 1, 400)
    assert _play(fork, actions) == _play(env, actions)


def test_stepping_a_fork_leaves_the_original_unchanged() -> None:
    make = lambda: gym.make("PowerTrip-v0").unwrapped  # noqa: E731
    env, twin = make(), make()  # twin never forks: what env should still do
    for e in (env, twin):
        e.reset(seed=5)
        for action in _actions(e.action_space.shape[0], 2, 3):
            e.step(action)
    fork = env.fork()
    _play(fork, _actions(env.action_space.shape[0], 3, 300))  # past its end
    fork.reset(seed=99)
    actions = _actions(env.action_space.shape[0], 4, 300)
    assert _play(env, actions) == _play(twin, actions)


def test_set_state_returns_to_where_get_state_was_taken() -> None:
    env = gym.make("PowerTrip-v0").unwrapped
    env.reset(seed=7)
    env.step(np.ones(env.n_sites, dtype=np.int8))
    saved = env.get_state()
    actions = _actions(env.action_space.shape[0], 5, 300)
    first = _play(env, actions)
    env.set_state(saved)
    assert _play(env, actions) == first
    other = gym.make("PowerTrip-v0").unwrapped  # another env of the same ID takes it too
    other.set_state(saved)
    assert _play(other, actions) == first


def test_a_drawn_catalogue_comes_back_with_its_state() -> None:
    """Under ``sites=`` each episode draws a catalogue: the state carries it, and its N."""
    env = gym.make("PowerTrip-Random-v0").unwrapped
    env.reset(seed=1)
    saved, n = env.get_state(), env.n_sites
    while env.n_sites == n:  # a later episode draws another catalogue
        env.reset()
    env.set_state(saved)
    assert env.n_sites == n
    assert env.decision_view().power_w.shape == (n,)


def test_set_state_names_what_it_takes() -> None:
    env = gym.make("PowerTrip-v0").unwrapped
    env.reset(seed=0)
    with pytest.raises(TypeError, match="takes what get_state returns, not dict"):
        env.set_state({})
    lora = gym.make("PowerTrip-LoRA-v0").unwrapped
    lora.reset(seed=0)
    with pytest.raises(ValueError, match="the state is of scenario 'lora'"):
        env.set_state(lora.get_state())
    assert isinstance(env.get_state(), EpisodeState)


def test_a_fork_before_reset_is_a_fresh_env() -> None:
    env = gym.make("PowerTrip-v0").unwrapped
    fork = env.fork()
    a, _ = env.reset(seed=3)
    b, _ = fork.reset(seed=3)
    assert a.tobytes() == b.tobytes()


def test_no_tool_reads_the_engine_s_tables() -> None:
    """Baselines, references and agents go through the planning API (``decision_view``,
    ``predict_round``, ``predict_plan``, ``candidates``, ``fork``, ``get_state``, ``n_sites``
    and, for the clairvoyant references only, ``clairvoyant()``): none reads an env's
    ``params``, ``state`` or ``sim``."""
    import re
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    reach = re.compile(r"\b\w*env\w*(?:\(\))?(?:\.unwrapped)?\.(?:params|state|sim)\b")
    found = [
        f"{path.relative_to(root)}:{number}: {line.strip()}"
        for folder in ("baselines", "agents")
        for path in sorted((root / folder).rglob("*.py"))
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if reach.search(line)
    ]
    assert not found, "reads of the engine's tables:\n" + "\n".join(found)
    assert reach.search("x = self.env.unwrapped.state.rounds[0]")  # what it is for
    assert reach.search("n = env.params.n_sites")
