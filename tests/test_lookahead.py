"""The lookahead rules (baselines/lookahead.py) and the forecast what-if they plan with
(``env.predict_plan``): what each rule picks, that they read no future actual, bad input."""

from __future__ import annotations

import dataclasses

import gymnasium as gym
import numpy as np
import pytest

import powertrip_env  # noqa: F401  (registers the IDs)
from powertrip_env import dynamics
from powertrip_env.baselines.base import subset_matrix
from powertrip_env.baselines.candidates import (
    HORIZONS,
    N_SLOTS,
    STICKY_HORIZONS,
    STICKY_MARGIN,
    build,
)
from powertrip_env.baselines.lookahead import TUNED, ForecastMPC, HorizonRule
from powertrip_env.baselines.registry import default_policy_names, make_policy
from powertrip_env.dynamics.candidates import TUNED_RULE
from powertrip_env.dynamics.layout import CUM_SAMPLES, RATE
from powertrip_env.harness.evaluation.evaluate import evaluate


def _advance(env: gym.Env, rounds: int, seed: int = 3) -> None:
    env.reset(seed=seed)
    mask = np.zeros(env.unwrapped.params.n_sites, dtype=np.int8)
    mask[:3] = 1
    for _ in range(rounds):
        env.step(mask)


@pytest.fixture(scope="module")
def flagship() -> gym.Env:
    return gym.make("PowerTrip-v0")


def test_first_round_of_a_plan_is_predict_round(flagship: gym.Env) -> None:
    """The forecast world's first round is the what-if every policy already reads."""
    _advance(flagship, 6)
    env = flagship.unwrapped
    masks = subset_matrix(env.params.n_sites)[::17]
    one = env.predict_round(masks)
    out = env.predict_plan(masks, rounds=1)
    np.testing.assert_allclose(out.state.time_s - env.state.time_s[0], one.round_time_s, rtol=1e-9)
    np.testing.assert_allclose(
        out.state.progress - env.state.progress[0], one.delta_progress, rtol=1e-9, atol=1e-9
    )
    assert (out.state.prev_selected <= masks).all()  # only requested sites can have joined


def test_predict_plan_reads_no_future_actual(flagship: gym.Env) -> None:
    """Rewriting the true trace after the current row changes nothing the planner sees."""
    _advance(flagship, 4)
    env = flagship.unwrapped
    p, state = env.params, env.state
    row = int(dynamics.current_row(p, state.time_s)[0])
    table = p.table.copy()
    table[row + 1 :, RATE] *= 0.25
    table[row + 1 :, CUM_SAMPLES] = 0.0
    other = dataclasses.replace(p, table=table)
    masks = subset_matrix(p.n_sites)[::29]
    a = dynamics.predict_plan(p, state, masks, rounds=10)
    b = dynamics.predict_plan(other, state, masks, rounds=10)
    assert a.state.data.tobytes() == b.state.data.tobytes()
    # ... while the forecast it is built from does matter
    forecast = p.forecast_rate.copy()
    forecast[row, 1:] *= 0.5
    c = dynamics.predict_plan(dataclasses.replace(p, forecast_rate=forecast), state, masks, 10)
    assert not np.array_equal(a.state.time_s, c.state.time_s)


def test_predict_plan_leaves_the_episode_alone(flagship: gym.Env) -> None:
    _advance(flagship, 2)
    env = flagship.unwrapped
    before = env.state.data.copy()
    out = env.predict_plan(np.ones((2, 5, env.params.n_sites), dtype=bool))
    assert out.state.batch == 2
    assert (env.state.data == before).all()
    assert out.state.rounds.max() <= env.state.rounds[0] + 5


@pytest.mark.parametrize("shape", [(10,), (2, 9), (1, 2, 3, 10)])
def test_predict_plan_refuses_bad_shapes(flagship: gym.Env, shape: tuple[int, ...]) -> None:
    flagship.reset(seed=0)
    with pytest.raises(ValueError, match=r"expected \(M, 10\) or \(M, R, 10\)"):
        flagship.unwrapped.predict_plan(np.ones(shape, dtype=bool))


def _decisions(env: gym.Env, policy, rounds: int, seed: int = 1):
    """(policy's masks, the candidate builder's slots) along ``policy``'s own episode."""
    env.reset(seed=seed)
    policy.reset(env)
    chosen, slots = [], []
    for _ in range(rounds):
        slots.append(build(env.unwrapped).masks)
        mask = policy.act(None, {})
        chosen.append(mask.astype(bool))
        *_, terminated, truncated, _ = env.step(mask)
        if terminated or truncated:
            break
    return chosen, slots


def test_the_agents_last_slot_is_the_tuned_horizon_rule(flagship: gym.Env) -> None:
    """The candidates' last slot is the rule the registry builds: its tuned parameters."""
    assert TUNED_RULE == (TUNED["HorizonRule"]["horizon"], TUNED["HorizonRule"]["margin"])
    chosen, slots = _decisions(flagship, make_policy("HorizonRule", n_sites=10), 60)
    assert all((c == s[N_SLOTS - 1]).all() for c, s in zip(chosen, slots, strict=True))


def test_horizon_rule_is_the_agents_sticky_slot(flagship: gym.Env) -> None:
    """One implementation serves the rule and the agent: HorizonRule(h, 5%) plays exactly the
    candidate slot "sticky h", and with no margin the slot "best at h"."""
    for h in (8, 16):
        slot = 2 + len(HORIZONS) + STICKY_HORIZONS.index(h)
        chosen, slots = _decisions(flagship, HorizonRule(h, STICKY_MARGIN), 60)
        assert all((c == s[slot]).all() for c, s in zip(chosen, slots, strict=True))
    chosen, slots = _decisions(flagship, HorizonRule(4, 0.0), 60)
    slot = 1 + HORIZONS.index(4)
    assert all((c == s[slot]).all() for c, s in zip(chosen, slots, strict=True))


def test_mpc_of_one_round_is_the_one_round_rule(flagship: gym.Env) -> None:
    """Looking one round ahead with no margin, the MPC ranks by the one-round efficiency, as
    the horizon rule does with joins charged to the round (until a set can finish)."""
    mpc, rule = _decisions(flagship, ForecastMPC(1, 0.0), 80), None
    chosen, slots = mpc
    rule = [s[1] for s in slots]  # slot 1: the best set at horizon 1
    assert all((c == r).all() for c, r in zip(chosen, rule, strict=True))


def test_mpc_keeps_the_current_set_within_its_margin(flagship: gym.Env) -> None:
    """With a margin no set can clear, the MPC plays the joined, available set whenever there
    is one; with none, a set it predicts to make progress."""
    flagship.reset(seed=2)
    env = flagship.unwrapped
    policy = ForecastMPC(4, 10.0)
    policy.reset(flagship)
    kept = 0
    for _ in range(40):
        now = env.decision_view()
        current = now.joined & now.available
        mask = policy.act(None, {}).astype(bool)
        if current.any():
            assert (mask == current).all()
            kept += 1
        *_, terminated, truncated, _ = flagship.step(mask.astype(np.int8))
        assert not (terminated or truncated)
    assert kept >= 30


def test_a_plan_knows_the_progress_its_coverage_needs(flagship: gym.Env) -> None:
    """Without a coverage ceiling every plan needs the full-coverage progress; with one
    (PowerTrip-Digits-v1), a set that leaves label-skewed sites out needs more, or cannot get
    there, and the MPC's projection must see it."""
    _advance(flagship, 5)
    env = flagship.unwrapped
    masks = subset_matrix(env.params.n_sites)[::31]
    out = env.predict_plan(masks, rounds=6)
    assert (out.progress_needed == dynamics.progress_needed(env.params)).all()

    digits = gym.make("PowerTrip-Digits-v1")
    digits.reset(seed=0)
    n = digits.unwrapped.n_sites
    alone, everyone = np.zeros((1, n), bool), np.ones((1, n), bool)
    alone[0, 0] = True
    out = digits.unwrapped.predict_plan(np.concatenate([alone, everyone]), rounds=12)
    full = dynamics.progress_needed(digits.unwrapped.params)
    assert out.progress_needed[1] == pytest.approx(full, rel=1e-6)
    assert out.progress_needed[0] > 1.05 * full


def test_mpc_does_not_stall_under_a_coverage_ceiling() -> None:
    """Projecting a one-site set's progress to the full-coverage target once led the MPC on
    PowerTrip-Digits-v1 to a site whose shard caps the accuracy below the target, where it
    stayed for the whole 0.25 h budget; it reaches the target as fast as PowerTrip now."""
    result = evaluate(
        "PowerTrip-Digits-v1", ["ForecastMPC", "PowerTrip"], episodes=3, progress=False
    )
    tta = result.episodes.groupby("policy")["tta_h"].mean()
    assert tta["ForecastMPC"] < 1.1 * tta["PowerTrip"]


def test_lookahead_rules_read_no_clairvoyant(monkeypatch: pytest.MonkeyPatch) -> None:
    env = gym.make("PowerTrip-v0")

    def forbidden(*args, **kwargs):
        raise AssertionError("a deployable rule read the clairvoyant future")

    monkeypatch.setattr(type(env.unwrapped), "clairvoyant", forbidden)
    monkeypatch.setattr(dynamics, "jitter_factors", forbidden)
    for policy in (HorizonRule(8, 0.05), ForecastMPC(6, 0.05)):
        chosen, _ = _decisions(env, policy, 25)
        assert len(chosen) == 25


def test_the_registry_builds_the_tuned_rules() -> None:
    rule = make_policy("HorizonRule", n_sites=10)
    mpc = make_policy("ForecastMPC", n_sites=10)
    assert (rule.horizon, rule.margin) == (
        TUNED["HorizonRule"]["horizon"],
        TUNED["HorizonRule"]["margin"],
    )
    assert (mpc.lookahead, mpc.margin) == (
        int(TUNED["ForecastMPC"]["lookahead"]),
        TUNED["ForecastMPC"]["margin"],
    )
    names = default_policy_names(10)
    assert "HorizonRule" in names and "ForecastMPC" in names
    assert "HorizonRule" in default_policy_names(32)  # no enumeration: any N


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda: HorizonRule(0.5, 0.05), "horizon=0.5"),
        (lambda: HorizonRule(8, -0.1), "margin=-0.1"),
        (lambda: HorizonRule(float("nan"), 0.0), "horizon=nan"),
        (lambda: ForecastMPC(0, 0.05), "lookahead=0"),
    ],
)
def test_bad_parameters_are_named(make, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        make()


def test_lookahead_rules_beat_the_myopic_rules_on_the_flagship() -> None:
    """The point of charging joins over a horizon: on paired test episodes both rules are
    faster than PowerTrip and MyopicOptimal (measured: 30 episodes, README's leaderboard)."""
    result = evaluate(
        "PowerTrip-v0",
        ["PowerTrip", "MyopicOptimal", "HorizonRule", "ForecastMPC"],
        episodes=4,
        progress=False,
    )
    mean = result.episodes.groupby("policy")["tta_h"].mean()
    assert mean["HorizonRule"] < min(mean["PowerTrip"], mean["MyopicOptimal"])
    assert mean["ForecastMPC"] < min(mean["PowerTrip"], mean["MyopicOptimal"])
