"""The Flower strategy (``powertrip_env.integrations.flower``): a real simulation of three
rounds whose choices are the policy's and whose dropped site's update is left out, and the
refusals of bad input. Needs the ``flower`` extra; CI runs these in a stage of their own
(``pytest -m flower``)."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("flwr")
pytestmark = pytest.mark.flower

import torch  # noqa: E402
from flwr.serverapp import ServerApp  # noqa: E402
from flwr.serverapp.strategy import FedAvg  # noqa: E402
from flwr.simulation import run_simulation  # noqa: E402
from scenario_files import write_powered_scenario  # noqa: E402

from powertrip_env.baselines.base import Policy  # noqa: E402
from powertrip_env.baselines.registry import make_policy  # noqa: E402
from powertrip_env.integrations.flower import PowerTripStrategy  # noqa: E402
from powertrip_env.integrations.flower_nodes import require_flower, site_of  # noqa: E402
from powertrip_env.integrations.flower_task import ScenarioTask, client_app, round_seed  # noqa: E402
from powertrip_env.learners.torch_fed import TorchFedLearner, local_sgd  # noqa: E402

SIM = {"client_resources": {"num_cpus": 1}}


@pytest.fixture(scope="module")
def flaky(tmp_path_factory: pytest.TempPathFactory) -> str:
    """Three sites; s1 has power only every other five minutes and rounds take about 400 s,
    so a round that starts with s1 powered loses it before s1 finishes: it drops out."""
    path = write_powered_scenario(
        tmp_path_factory.mktemp("flaky"),
        [[8, 8, 8], [8, 0, 8]],
        days=3,
        workload={"flops_per_sample": 1.6e14},
        episode={"time_budget_h": 3.0},
    )
    return str(path)


class Recording(Policy):
    """AllSites, remembering what it chose and which sites had power when it chose."""

    name = "Recording"

    def __init__(self) -> None:
        super().__init__()
        self.choices: list[tuple[np.ndarray, np.ndarray]] = []

    def act(self, obs, info):
        action = np.ones(len(info["available"]), dtype=np.int8)
        self.choices.append((action, np.asarray(info["available"]).copy()))
        return action


def _simulate(main, app, nodes: int) -> None:
    server = ServerApp()
    server.main()(main)
    run_simulation(server, app, num_supernodes=nodes, backend_config=SIM)


def test_three_rounds_follow_the_policy_and_leave_out_the_dropped_site(flaky) -> None:
    task = ScenarioTask("PowerTrip-v0", scenario=flaky)
    seeds: list[int] = []

    def initial(seed: int):
        seeds.append(seed)
        return task.initial_arrays(seed)

    policy = Recording()
    out: dict = {}

    def main(grid, context) -> None:
        strategy = PowerTripStrategy(
            policy,
            "PowerTrip-v0",
            seed=1,
            split="all",
            initial_model=initial,
            env_kwargs={"scenario": flaky},
        )
        out["result"] = strategy.start(grid, None, num_rounds=3, evaluate_fn=task.evaluate_fn)
        out["strategy"] = strategy

    _simulate(main, client_app("PowerTrip-v0", scenario=flaky), nodes=3)
    strategy = out["strategy"]
    rounds = strategy.rounds
    assert [r.round for r in rounds] == [1, 2, 3]
    assert strategy.episode["rounds"] == 3
    # the strategy trained exactly the sites the policy chose (those with power)
    chosen = policy.choices[-3:]  # the last three: the probe decision came first
    for played, (action, available) in zip(rounds, chosen, strict=True):
        expected = tuple(f"s{i}" for i in np.flatnonzero(action.astype(bool) & available))
        assert played.selected == expected
    # a round in which s1 started and lost power: its reply is excluded, the others count
    dropped = [r for r in rounds if r.excluded]
    assert dropped, "the scenario should make s1 drop out within three rounds"
    for r in dropped:
        assert r.excluded == ("s1",) and r.completed == ("s0", "s2")
    # the final model is FedAvg of the completed sites only, round by round, from the start
    weights = {
        name: tensor.clone()
        for name, tensor in task.initial_arrays(seeds[-1]).to_torch_state_dict().items()
    }
    steps, batch = 10, 100  # the scenario's local_steps and site_batch
    for r in rounds:
        trained, sizes = [], []
        for name in r.completed:
            site = int(name[1:])
            x, y = task.shards[site]
            model = task.make_model()
            model.load_state_dict(weights)
            generator = torch.Generator().manual_seed(round_seed(seeds[-1], r.round, site))
            local_sgd(model, x, y, steps, batch, 0.1, generator)
            trained.append(model.state_dict())
            sizes.append(len(y))
        total = sum(sizes)
        weights = {
            k: sum(t[k] * (n / total) for t, n in zip(trained, sizes, strict=True)) for k in weights
        }
    final = out["result"].arrays.to_torch_state_dict()
    for key, value in weights.items():
        np.testing.assert_allclose(final[key].numpy(), value.numpy(), rtol=1e-5, atol=1e-6)
    # and the accuracy the episode recorded is the evaluation of that model
    assert rounds[-1].accuracy == pytest.approx(
        float(task.evaluate_fn(3, out["result"].arrays)["accuracy"])
    )


def test_more_nodes_than_sites_is_refused_naming_the_sites(flaky) -> None:
    task = ScenarioTask("PowerTrip-v0", scenario=flaky)

    def main(grid, context) -> None:
        strategy = PowerTripStrategy(
            "AllSites",
            "PowerTrip-v0",
            split="all",
            initial_model=task.initial_arrays,
            env_kwargs={"scenario": flaky},
        )
        strategy.start(grid, None, num_rounds=1, evaluate_fn=task.evaluate_fn)

    with pytest.raises(ValueError, match=r"4 Flower nodes .* 3 sites \(s0, s1, s2\)"):
        _simulate(main, client_app("PowerTrip-v0", scenario=flaky), nodes=4)


def test_a_node_that_names_no_site_is_refused_with_the_sites() -> None:
    names = ("a", "b", "c")
    assert site_of({"site": "b"}, names) == 1
    assert site_of({"partition-id": 2, "num-partitions": 3}, names) == 2
    with pytest.raises(ValueError, match=r"site='x' is not a site .* 0: a, 1: b, 2: c"):
        site_of({"site": "x"}, names)
    with pytest.raises(ValueError, match=r"partition-id=3 is not a site: the scenario has 3"):
        site_of({"partition-id": 3}, names)
    with pytest.raises(ValueError, match="names no site"):
        site_of({}, names)


class FiveSites(Policy):
    """A user's rule written for a scenario of five sites."""

    name = "FiveSites"

    def act(self, obs, info):
        return np.array([1, 0, 1, 0, 1], dtype=np.int8)


def test_a_policy_for_another_number_of_sites_is_refused_before_any_training() -> None:
    with pytest.raises(ValueError, match=r"policy 'FiveSites' chose .*shape \(5,\).* has 8 sites"):
        PowerTripStrategy(FiveSites(), "PowerTrip-Digits-v1")
    # the baselines size themselves to the scenario they are bound to
    assert PowerTripStrategy(make_policy("Nearest-2", 5)).policy.name == "Nearest-2"


def test_an_inner_strategy_that_would_resample_the_sites_is_refused() -> None:
    with pytest.raises(ValueError, match=r"fraction_train=0\.5, must be 1\.0"):
        PowerTripStrategy("AllSites", inner=FedAvg(fraction_train=0.5))
    with pytest.raises(ValueError, match="min_available_nodes=2, must be at most 1"):
        PowerTripStrategy("AllSites", inner=FedAvg(min_train_nodes=1))


def test_a_flower_release_outside_the_range_is_refused(monkeypatch) -> None:
    import flwr

    assert require_flower() == flwr.__version__
    for version in ("1.41.2", "2.0.0"):
        monkeypatch.setattr(flwr, "__version__", version)
        with pytest.raises(ImportError, match=rf"flwr {version} .* supports flwr>=1.42,<2"):
            require_flower()


class _SeedRecording(TorchFedLearner):
    def reset(self, sim, seed):
        self.seed = seed
        return super().reset(sim, seed)


def test_the_clients_hold_the_in_process_learners_shards_and_initial_model() -> None:
    import gymnasium as gym

    task = ScenarioTask("PowerTrip-Digits-v1")
    learner = _SeedRecording()
    env = gym.make("PowerTrip-Digits-v1", learner=learner)
    env.reset(seed=3)
    assert len(task.shards) == len(learner.shards) == 8
    for (x, y), (x2, y2) in zip(task.shards, learner.shards, strict=True):
        assert torch.equal(x, x2) and torch.equal(y, y2)
    # the in-process learner's untrained model is the one initial_arrays gives for its seed
    ours = task.initial_arrays(learner.seed).to_torch_state_dict()
    for (name, value), theirs in zip(ours.items(), learner.model.parameters(), strict=True):
        assert torch.equal(value, theirs.detach()), name


def test_evaluate_fn_is_the_held_out_accuracy() -> None:
    task = ScenarioTask("PowerTrip-Digits-v1")
    arrays = task.initial_arrays(0)
    record = task.evaluate_fn(0, arrays)
    x, y = task.test_set
    with torch.no_grad():
        expected = float((task.model(arrays)(x).argmax(-1) == y).float().mean())
    assert record["accuracy"] == pytest.approx(expected)
