"""The multi-job track (powertrip_env/multijob/) and the kernel's share of a site's GPUs.

PettingZoo's API and seed tests on every task and allocation rule; the bad arguments refused with
what is allowed; the allocation rules on hand-made leases; a job's share in the single-job
kernel (``SimState.shares``: 1 changes nothing, 0 does not start the site, ½ takes twice as long
for the same energy); and the multi-job env's leases, observations and team metrics over short
episodes (two short jobs on the flagship's sites: about 200 rounds, a tenth of a second).
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np
import pytest
from pettingzoo.test import api_test, seed_test

from powertrip_env import multijob
from powertrip_env.dynamics.layout import PATH_FIELDS, path_start, share_start
from powertrip_env.dynamics.state import SimState
from powertrip_env.env import PowerTripEnv
from powertrip_env.multijob.allocation import offers

SHORT_JOBS = ["lora", "opt"]  # LoRA (~1.5 h) and OPT-1.3B (~3.5 h): a whole episode is fast
CYCLES = {"PowerTrip-MultiJob-v0": 20, "PowerTrip-Wide-MultiJob-v0": 3}
EPS = 1e-12


# --------------------------------------------------------------------------- helpers


def all_sites(env: Any) -> np.ndarray:
    return np.ones(env.unwrapped.n_sites, dtype=np.int8)


def same(a: Any, b: Any) -> bool:
    """Bit-for-bit equality of observations, infos and scalars (nested dicts and arrays)."""
    if isinstance(a, dict):
        return isinstance(b, dict) and a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, np.ndarray | np.generic) or isinstance(b, np.ndarray | np.generic):
        a, b = np.asarray(a), np.asarray(b)
        return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()
    return type(a) is type(b) and a == b


def play(env: Any, seed: int) -> list[tuple[str, float, float, np.ndarray, bool]]:
    """Play ``env`` from ``reset(seed)`` to its end, every job asking for every site: one record
    per round (agent, its clock before and after, the shares it held, whether it was its last)."""
    env.reset(seed=seed)
    u = env.unwrapped
    rounds = []
    for agent in env.agent_iter():
        *_, terminated, truncated, _ = env.last()
        if terminated or truncated:
            env.step(None)
            continue
        begin = u.clock_s(agent)
        env.step(all_sites(env))
        last = bool(u.terminations[agent] or u.truncations[agent])
        rounds.append((agent, begin, u.clock_s(agent), u.infos[agent]["allocation"].copy(), last))
    return rounds


# --------------------------------------------------------------------------- PettingZoo's tests


@pytest.mark.parametrize("allocation", multijob.ALLOCATIONS)
@pytest.mark.parametrize("task", list(multijob.TASKS))
def test_pettingzoo_api_test_passes(task: str, allocation: str) -> None:
    env = multijob.env(task, allocation=allocation)
    assert env.unwrapped.allocation == allocation
    api_test(env, num_cycles=CYCLES[task])


def test_pettingzoo_seed_test_passes() -> None:
    """It compares two same-seeded envs' observations and infos with ``==`` from the first
    ``last()`` on (so an info must hold no NaN)."""
    seed_test(lambda: multijob.env(), num_cycles=20)


def test_the_same_seed_and_actions_replay_the_episode_and_another_seed_does_not() -> None:
    rng = np.random.default_rng(11)
    actions = rng.integers(0, 2, size=(30, 10)).astype(np.int8)
    actions[:, 0] = 1  # every round asks for something
    envs = [multijob.env(), multijob.env()]
    for env in envs:
        env.reset(seed=5)
    arrivals = envs[0].unwrapped.arrival_s.copy()
    np.testing.assert_array_equal(arrivals, envs[1].unwrapped.arrival_s)
    for action in actions:
        agents = [env.agent_selection for env in envs]
        assert agents[0] == agents[1]
        lasts = [env.last() for env in envs]
        (obs0, r0, te0, tr0, info0), (obs1, r1, te1, tr1, info1) = lasts
        assert same(obs0, obs1)
        assert same(r0, r1) and te0 == te1 and tr0 == tr1
        assert same(info0["tta_h"], info1["tta_h"])
        assert same(info0["arrival_h"], info1["arrival_h"])
        assert same(info0["allocation"], info1["allocation"])
        for env in envs:
            env.step(None if te0 or tr0 else action)
    clocks = [[env.unwrapped.clock_s(a) for a in env.unwrapped.possible_agents] for env in envs]
    assert clocks[0] == clocks[1]

    envs[1].reset(seed=6)
    other = envs[1].unwrapped.arrival_s
    assert other[0] == arrivals[0] == 0.0  # the first job opens the episode
    assert not np.array_equal(other, arrivals)
    envs[1].reset(seed=5)  # and the first seed again gives the first episode again
    np.testing.assert_array_equal(envs[1].unwrapped.arrival_s, arrivals)


# --------------------------------------------------------------------------- bad arguments


def refused(*parts: str) -> str:
    """A ``match`` pattern: every part, in order, anywhere in the message."""
    return "(?s)" + ".*".join(re.escape(part) for part in parts)


@pytest.mark.parametrize(
    ("kwargs", "pattern"),
    [
        (
            {"task": "PowerTrip-Nope-v0"},
            refused("'PowerTrip-Nope-v0'", str(sorted(multijob.TASKS))),
        ),
        ({"jobs": ["lora", "gpt"]}, refused("'gpt'", "['diloco', 'lora', 'opt']")),
        ({"allocation": "lottery"}, refused("'lottery'", "['fcfs', 'proportional']")),
        ({"jobs": ["lora"] * 11}, refused("11 jobs on 10 sites", "at most", "(10)")),
        ({"jobs": []}, refused("jobs=[]", "at least one job")),
        ({"render_mode": "human"}, refused("render_mode='human'", "None")),
    ],
    ids=["task", "job", "allocation", "k-above-sites", "no-jobs", "render-mode"],
)
def test_bad_arguments_are_refused_with_what_is_allowed(
    kwargs: dict[str, Any], pattern: str
) -> None:
    kwargs = dict(kwargs)
    task = kwargs.pop("task", None)
    with pytest.raises(ValueError, match=pattern):
        multijob.env(task, **kwargs)


@pytest.mark.parametrize(
    ("action", "shown"),
    [
        (np.ones(3, dtype=np.int8), "array([1, 1, 1]"),
        (np.array([2] + [0] * 9), "array([2, 0,"),
        (np.ones((2, 10), dtype=np.int8), "array([[1, 1,"),
    ],
    ids=["too-short", "a-two", "two-dimensional"],
)
def test_a_malformed_action_is_refused_by_the_raw_env(action: np.ndarray, shown: str) -> None:
    env = multijob.raw_env(jobs=SHORT_JOBS)
    env.reset(seed=0)
    with pytest.raises(ValueError, match=refused(shown, "give 10 values, each 0 or 1")):
        env.step(action)
    assert env.agent_selection == "job_0" and env.job("job_0").state.rounds[0] == 0


# --------------------------------------------------------------------------- allocation rules


def leases(k: int, n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """No job holds or wants anything; every job active."""
    return np.zeros((k, n)), np.zeros(k), np.zeros((k, n)), np.ones(k, dtype=bool)


def test_fcfs_offers_what_the_running_leases_leave() -> None:
    held, until, wanted, active = leases(3, 4)
    held[0] = [1.0, 0.5, 0.0, 0.0]  # job 0 holds site 0 whole and half of site 1 until t=100
    until[0] = 100.0
    held[2] = [0.0, 0.25, 0.0, 1.0]  # job 2's lease ended at t=40
    until[2] = 40.0
    wanted[:] = 1.0
    np.testing.assert_array_equal(
        offers("fcfs", 1, 50.0, held, until, wanted, active), [0.0, 0.5, 1.0, 1.0]
    )
    # at t=30 job 2's lease runs too
    np.testing.assert_array_equal(
        offers("fcfs", 1, 30.0, held, until, wanted, active), [0.0, 0.25, 1.0, 0.0]
    )
    # a lease is over at its end; after it the site is free again
    for t in (100.0, 150.0):
        np.testing.assert_array_equal(offers("fcfs", 1, t, held, until, wanted, active), 1.0)
    # a job's own lease never stands in its way
    np.testing.assert_array_equal(
        offers("fcfs", 0, 50.0, held, until, wanted, active), [1.0, 1.0, 1.0, 1.0]
    )
    # a leftover that is rounding is no share
    held[0] = [1.0 - 1e-13, 0.0, 0.0, 0.0]
    assert offers("fcfs", 1, 50.0, held, until, wanted, active)[0] == 0.0


def test_proportional_offers_the_smaller_of_the_leftover_and_an_equal_part() -> None:
    held, until, wanted, active = leases(4, 4)
    wanted[0] = [1, 1, 1, 0]
    wanted[1] = [1, 1, 0, 0]
    wanted[2] = [1, 0, 0, 1]  # job 3 asks now: its own wish is not another's
    wanted[3] = [1, 1, 1, 1]
    np.testing.assert_allclose(
        offers("proportional", 3, 0.0, held, until, wanted, active),
        [1 / 4, 1 / 3, 1 / 2, 1 / 2],
        rtol=0,
        atol=EPS,
    )
    # the leases running leave less than the equal part: the leftover
    held[0] = [0.8, 0.0, 0.0, 0.0]
    until[0] = 10.0
    held[1] = [0.0, 0.5, 0.0, 0.0]
    until[1] = 10.0
    np.testing.assert_allclose(
        offers("proportional", 3, 5.0, held, until, wanted, active),
        [0.2, 1 / 3, 1 / 2, 1 / 2],
        rtol=0,
        atol=EPS,
    )
    # a finished job wants nothing any more
    active[2] = False
    np.testing.assert_allclose(
        offers("proportional", 3, 5.0, held, until, wanted, active),
        [0.2, 1 / 3, 1 / 2, 1.0],
        rtol=0,
        atol=EPS,
    )
    # alone on a site, a job gets it whole
    assert offers("proportional", 0, 0.0, *leases(1, 3))[0] == 1.0


@pytest.mark.parametrize("rule", multijob.ALLOCATIONS)
def test_offers_never_take_a_site_past_its_gpus(rule: str) -> None:
    """Leases built as the env builds them (the job with the earliest clock asks, holds what it
    is offered of the sites it wants until its round ends; jobs arrive and finish): at every
    turn, what is offered plus the leases running never exceeds a site's GPUs."""
    rng = np.random.default_rng(2024)
    checked = 0
    for _ in range(150):
        k, n = int(rng.integers(1, 6)), int(rng.integers(1, 5))
        held, until, wanted, active = leases(k, n)
        clock = np.sort(rng.integers(0, 20, size=k)).astype(float)  # arrivals; ties happen
        for _ in range(40):
            live = np.flatnonzero(active)
            if live.size == 0:
                break
            j = int(live[np.argmin(clock[live])])
            t = clock[j]
            offer = offers(rule, j, t, held, until, wanted, active)
            running = (until > t) & (np.arange(k) != j)
            assert np.all((offer >= 0.0) & (offer <= 1.0))
            assert np.all(offer + held[running].sum(axis=0) <= 1.0 + EPS), (rule, offer, held)
            checked += 1
            ask = rng.random(n) < 0.7
            end = t + float(rng.integers(0, 8))  # idle rounds of no length too
            held[j] = np.where(ask & (rng.random(n) < 0.9), offer, 0.0)  # some fail to start
            until[j] = end
            wanted[j] = ask
            clock[j] = end
            if rng.random() < 0.05:  # it finishes: its last lease runs out at its end
                active[j] = False
                wanted[j] = 0.0
    assert checked > 2000


def test_an_unknown_rule_is_refused() -> None:
    with pytest.raises(ValueError, match=refused("'lottery'", "'fcfs', 'proportional'")):
        offers("lottery", 0, 0.0, *leases(2, 3))


# --------------------------------------------------------------------------- the kernel's share


@pytest.fixture(scope="module")
def single() -> PowerTripEnv:
    """The flagship without jitter, reset: a fork of it plays one round with given shares."""
    env = PowerTripEnv("default", jitter=False)
    env.reset(seed=0)
    assert env.available().all()
    return env


@pytest.fixture(scope="module")
def moving() -> PowerTripEnv:
    """The flagship on the moving track (fail-slows, power callbacks), without jitter, reset."""
    env = PowerTripEnv("moving", jitter=False)
    env.reset(seed=0)
    return env


def one_round(env: PowerTripEnv, mask: np.ndarray, **fields: Any) -> tuple[PowerTripEnv, tuple]:
    fork = env.fork()
    if fields:
        fork.state = fork.state.replace(**fields)
    return fork, fork.step(np.asarray(mask, dtype=np.int8))


# The clock, energy and progress after test_shares_of_one_change_nothing_bit_for_bit's four rounds,
# as the kernel before shares (commit 3895ced, the parent of the one that added them) played them:
# a share of 1 must leave every result bit for bit. Like tests/test_versions.py's pins, a change of
# the dynamics moves them (re-pin then).
BEFORE_SHARES = {
    "single": ["0x1.1ed4789eaba4cp+16", "0x1.9b22c5c1d128ap+29", "0x1.56e76e3387b74p+9"],
    "moving": ["0x1.15b26b8fe9889p+16", "0x1.6c55379cda400p+29", "0x1.a5f3a13b47bfep+9"],
}


@pytest.mark.parametrize("world", ["single", "moving"])
def test_shares_of_one_change_nothing_bit_for_bit(
    request: pytest.FixtureRequest, world: str
) -> None:
    """On a static world and on a moving one (whose path's factors the share multiplies); and
    the same as before the kernel had shares (``BEFORE_SHARES``)."""
    single = request.getfixturevalue(world)
    n = single.n_sites
    rng = np.random.default_rng(0)
    masks = [np.ones(n), rng.integers(0, 2, size=n), np.eye(n)[3], np.ones(n)]
    plain, given = single.fork(), single.fork()
    for mask in masks:
        a = plain.step(mask.astype(np.int8))
        given.state = given.state.replace(shares=np.ones(n))
        b = given.step(mask.astype(np.int8))
        for x, y in zip(a, b, strict=True):
            assert same(x, y)
        assert plain.state.data.tobytes() == given.state.data.tobytes()
    assert plain.state.rounds[0] == len(masks)
    np.testing.assert_array_equal(plain.state.shares, 1.0)  # a fresh episode holds every site
    got = [
        float(x[0]).hex() for x in (plain.state.time_s, plain.state.energy_j, plain.state.progress)
    ]
    assert got == BEFORE_SHARES[world]


def test_the_shares_of_sites_not_chosen_change_nothing(single: PowerTripEnv) -> None:
    n = single.n_sites
    mask = np.zeros(n)
    mask[[1, 4, 7]] = 1
    shares = np.where(mask > 0, 1.0, np.linspace(0.0, 0.9, n))
    plain, a = one_round(single, mask)
    given, b = one_round(single, mask, shares=shares)
    for x, y in zip(a, b, strict=True):
        assert same(x, y)
    np.testing.assert_array_equal(given.state.shares[0], shares)  # the round keeps them
    lo = share_start(n)  # the state's last block: only the shares differ
    assert plain.state.data[:, :lo].tobytes() == given.state.data[:, :lo].tobytes()


def test_a_share_of_zero_does_not_start_the_site(single: PowerTripEnv) -> None:
    n = single.n_sites
    site = 2
    alone = np.eye(n)[site]
    shares = np.where(alone > 0, 0.0, 1.0)
    _, (*_, info) = one_round(single, alone, shares=shares)
    assert info["idle"] and info["n_selected"] == 0
    assert info["invalid_selections"] == 1
    assert not info["selected"][site]
    assert info["round_energy_kwh"] == 0.0 and info["delta_progress"] == 0.0
    _, (*_, nothing) = one_round(single, np.zeros(n))  # as idle as asking for no site
    assert info["round_time_s"] == nothing["round_time_s"] > 0.0

    pair = alone.copy()
    pair[5] = 1
    _, (*_, info) = one_round(single, pair, shares=shares)
    assert not info["idle"] and info["n_selected"] == 1 and info["invalid_selections"] == 1
    assert info["selected"][5] and not info["selected"][site]


def test_half_a_site_takes_twice_as_long_for_the_same_energy(single: PowerTripEnv) -> None:
    """A quota scenario: the site's quota on half its GPUs. Joined already, so the round's compute
    is the quota's alone; the trace may move under the longer round, hence the tolerances."""
    n = single.n_sites
    compared = 0
    for site in range(n):
        alone = np.eye(n)[site].astype(bool)
        runs = {}
        for share in (1.0, 0.5):
            shares = np.where(alone, share, 1.0)
            _, (*_, info) = one_round(single, alone, shares=shares, prev_selected=alone)
            runs[share] = info
        whole, half = runs[1.0], runs[0.5]
        if whole["dropped"][site] or half["dropped"][site]:  # its power ran out: no comparison
            continue
        assert whole["measured_join_s"][site] == half["measured_join_s"][site] == 0.0
        assert half["delta_progress"] == whole["delta_progress"] > 0.0  # the same samples
        assert 1.5 < half["compute_s"] / whole["compute_s"] < 2.6
        assert 0.7 <= half["round_energy_kwh"] / whole["round_energy_kwh"] <= 1.5
        compared += 1
    assert compared >= 5


def in_event(env: PowerTripEnv, site: int, event: str | None) -> PowerTripEnv:
    """A fork of ``env`` whose ``site`` is calm for good, or in ``event`` ("slow", "link",
    "callback") for good: the path's columns (``layout.PATH_FIELDS``) set by hand."""
    fork = env.fork()
    n = env.n_sites
    data = fork.state.data.copy()
    for p in range(len(PATH_FIELDS) // 2):
        on = path_start(n) + 2 * p * n + site
        data[:, on] = 1.0 if PATH_FIELDS[2 * p] == f"{event}_on" else 0.0
        data[:, on + n] = np.inf  # the phase never ends
    fork.state = SimState(data)
    return fork


def test_a_share_compounds_with_the_moving_worlds_slowdowns(moving: PowerTripEnv) -> None:
    """A share multiplies into the path's factors (a fail-slow's, a power callback's) rather
    than replacing them: the event slows half a site as much as the whole one."""
    n = moving.n_sites
    compared = 0
    for site in range(n):
        alone = np.eye(n)[site].astype(bool)
        runs = {}
        for share in (1.0, 0.5):
            for event in (None, "slow", "callback"):
                world = in_event(moving, site, event)
                _, (*_, info) = one_round(
                    world, alone, shares=np.where(alone, share, 1.0), prev_selected=alone
                )
                runs[share, event] = info
        if any(info["dropped"][site] for info in runs.values()):
            continue
        for event in ("slow", "callback"):
            for key in ("compute_s", "round_energy_kwh"):
                whole = runs[1.0, event][key] / runs[1.0, None][key]
                half = runs[0.5, event][key] / runs[0.5, None][key]
                assert half == pytest.approx(whole, rel=0.05), (site, event, key)
            assert runs[0.5, event]["compute_s"] > 1.2 * runs[0.5, None]["compute_s"]
        compared += 1
    assert compared >= 5


@pytest.mark.parametrize(
    "shares",
    [1.5, -0.1, np.nan, [0.5] * 11, np.ones((1, 1, 10))],
    ids=["above-one", "negative", "nan", "wrong-length", "three-dimensional"],
)
def test_a_share_outside_0_1_or_of_the_wrong_shape_is_refused(
    single: PowerTripEnv, shares: Any
) -> None:
    with pytest.raises(ValueError, match="shares"):
        single.state.replace(shares=shares)


# --------------------------------------------------------------------------- the multi-job env


def test_fcfs_keeps_a_site_held_whole_from_the_next_job_while_the_lease_runs() -> None:
    env = multijob.env(jobs=SHORT_JOBS, allocation="fcfs")
    env.reset(seed=0)
    u = env.unwrapped
    seen = 0
    for step, agent in enumerate(env.agent_iter()):
        if step >= 40 or u.terminations["job_0"] or u.truncations["job_0"]:
            break
        if agent == "job_1" and u.clock_s("job_1") < u.clock_s("job_0"):  # A's lease runs
            a_holds = u.infos["job_0"]["allocation"]
            assert a_holds.max() == 1.0  # alone when it asked: it holds its sites whole
            offered = u.offers("job_1")
            np.testing.assert_array_equal(offered[a_holds > 0], 0.0)
            np.testing.assert_array_equal(offered[a_holds == 0], 1.0)
            seen += 1
        env.step(all_sites(env))
    assert seen >= 1


def test_proportional_gives_each_of_two_jobs_at_most_half() -> None:
    env = multijob.env(jobs=SHORT_JOBS, allocation="proportional")
    env.reset(seed=0)
    u = env.unwrapped
    asked: set[str] = set()
    halves = 0
    for step, agent in enumerate(env.agent_iter()):
        if step >= 60 or any(u.terminations.values()) or any(u.truncations.values()):
            break
        both_asked = asked == {"job_0", "job_1"}
        env.step(all_sites(env))
        held = u.infos[agent]["allocation"]
        selected = np.asarray(u.infos[agent]["selected"], dtype=bool)[: u.n_sites]
        np.testing.assert_array_equal(held > 0, selected)
        if both_asked:
            assert np.all(held[selected] <= 0.5 + EPS), (step, agent, held)
            halves += int(np.isclose(held, 0.5).any())
        asked.add(agent)
    assert halves >= 10


@pytest.mark.parametrize("allocation", multijob.ALLOCATIONS)
def test_the_jobs_on_a_site_never_hold_more_than_its_gpus(allocation: str) -> None:
    """Over whole episodes: at the start of every round, the shares of the rounds running then
    (each from its clock before to its clock after) add up to at most 1 on every site, the last
    round of a finishing job included."""
    env = multijob.env(jobs=SHORT_JOBS, allocation=allocation)
    for seed in range(3):
        rounds = play(env, seed)
        assert env.unwrapped.team_metrics()["jobs_done"] == 2
        for agent, begin, _, _, _ in rounds:
            running = [r for r in rounds if r[1] <= begin < r[2]]
            total = np.sum([r[3] for r in running], axis=0)
            assert np.all(total <= 1.0 + EPS), (
                f"seed {seed}: {agent}'s round from t={begin} takes a site to {total.max()}: "
                + "; ".join(
                    f"{r[0]} [{r[1]}, {r[2]}) {r[3]}" + " (its last)" * r[4] for r in running
                )
            )


def test_team_metrics_after_an_episode() -> None:
    env = multijob.env(jobs=SHORT_JOBS)
    env.reset(seed=0)
    u = env.unwrapped
    finals: dict[str, dict[str, Any]] = {}
    steps = 0
    for agent in env.agent_iter(max_iter=2000):
        *_, terminated, truncated, info = env.last()
        if terminated or truncated:
            finals[agent] = info
            env.step(None)
            continue
        env.step(all_sites(env))
        steps += 1
    assert not env.agents and sorted(finals) == ["job_0", "job_1"]
    team = u.team_metrics()
    tta = np.array([finals[a]["tta_h"] for a in ("job_0", "job_1")])
    arrival = np.array([finals[a]["arrival_h"] for a in ("job_0", "job_1")])
    assert np.all(tta > 0.0) and arrival[0] == 0.0 < arrival[1]
    assert team["jobs_done"] == 2
    assert team["mean_tta_h"] == pytest.approx(tta.mean(), rel=EPS)
    assert team["makespan_h"] == pytest.approx((arrival + tta).max(), rel=EPS)
    assert team["energy_kwh"] == pytest.approx(sum(f["energy_kwh"] for f in finals.values()))
    assert finals["job_1"]["team"]["jobs_done"] == 2  # the last job's info saw the end
    assert 20 < steps < 2000


def test_an_observation_is_the_jobs_own_then_offers_then_the_others_wishes() -> None:
    env = multijob.env(jobs=SHORT_JOBS, allocation="proportional")
    env.reset(seed=3)
    u = env.unwrapped
    n = u.n_sites
    inner = u.job("job_0").observation_space.shape[0]
    assert u.observation_space("job_1").shape == (inner + 2 * n,)
    rng = np.random.default_rng(1)
    expected: dict[str, tuple] = {}  # each job's own step, replayed on a fork of its env
    for step, agent in enumerate(env.agent_iter()):
        if step >= 30:
            break
        obs, reward, *_ = env.last()
        assert obs.shape == (inner + 2 * n,) and obs.dtype == np.float32
        assert env.observation_space(agent).contains(obs)
        np.testing.assert_array_equal(obs[inner : inner + n], u.offers(agent).astype(np.float32))
        wishes = [w for other, w in u.wanted().items() if other != agent]
        np.testing.assert_allclose(obs[inner + n :], np.mean(wishes, axis=0), atol=1e-7)
        if agent in expected:  # its own part is what its single-job env's round returned
            own_obs, own_reward = expected[agent]
            assert same(obs[:inner], own_obs)
            assert reward == own_reward
        action = rng.integers(0, 2, size=n).astype(np.int8)
        fork = u.job(agent).fork()
        fork.state = fork.state.replace(shares=u.offers(agent))
        own_obs, own_reward, *_ = fork.step(action)
        expected[agent] = (own_obs, own_reward)
        env.step(action)
    assert len(expected) == 2
