"""One agent for any site catalogue: padding (``max_sites``), drawn catalogues
(``PowerTrip-Random-v0``), the padded site policy, and the shipped pretrained agent."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
import torch as th
import yaml
from gymnasium.utils.env_checker import check_env
from scenario_files import dump_toml

import powertrip_env
import train_agent
from maintainers import pretrain
from maintainers.doc_blocks import read_block
from powertrip_env.agents.candidates import CandidatePolicy
from powertrip_env.agents.extractors import SiteEncoder
from powertrip_env.agents.site_policy import SiteActionHead
from powertrip_env.errors import EvaluationError
from powertrip_env.harness.evaluation.evaluate import evaluate
from powertrip_env.harness.models.loading import pretrained_model_path
from powertrip_env.integrations.torch_sites import PADDED_LOGIT
from powertrip_env.scenario import load_scenario
from powertrip_env.scenario.sampling import SiteSampler
from powertrip_env.vector_env import PowerTripVectorEnv

REPO = Path(__file__).resolve().parents[1]
HELD_OUT = [REPO / "examples" / "scenarios" / f for f in ("grid-7.toml", "solar-12.toml")]
pytestmark = pytest.mark.usefixtures("one_torch_thread")


def one_site_scenario(folder: Path) -> Path:
    """The flagship's job on Berlin alone."""
    berlin = dataclasses.asdict(load_scenario("default").sites[0])
    doc = {
        "extends": "default",
        "name": "one-site",
        "sites": {"hub": berlin["name"], "site": [{**berlin, "data_share": 1.0}]},
    }
    path = folder / "one-site.toml"
    path.write_text(dump_toml(doc), encoding="utf-8")
    return path


def play(env: gym.Env, seed: int, actions: np.ndarray, width: int) -> list[tuple]:
    """(obs, reward, flags, info) of every step under fixed actions, padded to ``width``."""
    obs, info = env.reset(seed=seed)
    out = [(obs, info)]
    for a in actions:
        padded = np.ones(width, dtype=np.int8)  # padded entries set: they must be ignored
        padded[: len(a)] = a
        out.append(env.step(padded))
        if out[-1][2] or out[-1][3]:
            break
    return out


# --------------------------------------------------------------------------- padding


@pytest.mark.parametrize("obs_mode", ["dict", "flat"])
def test_padding_changes_no_dynamics_and_zeroes_the_padded_sites(obs_mode: str) -> None:
    n, m = 10, 13
    rng = np.random.default_rng(0)
    actions = rng.integers(0, 2, size=(40, n))
    plain = play(gym.make("PowerTrip-v0", obs_mode=obs_mode), 7, actions, n)
    padded = play(gym.make("PowerTrip-v0", obs_mode=obs_mode, max_sites=m), 7, actions, m)
    assert len(plain) == len(padded) > 1
    for step, (a, b) in enumerate(zip(plain, padded, strict=True)):
        obs_a, obs_b = a[0], b[0]
        if obs_mode == "dict":
            np.testing.assert_array_equal(obs_b["sites"][:n], obs_a["sites"])
            assert not obs_b["sites"][n:].any()
            np.testing.assert_array_equal(obs_b["global"], obs_a["global"])
            np.testing.assert_array_equal(obs_b["valid"], np.r_[np.ones(n), np.zeros(m - n)])
        else:
            f = len(powertrip_env.dynamics.SITE_FEATURES)
            np.testing.assert_array_equal(obs_b[: n * f], obs_a[: n * f])
            assert not obs_b[n * f : m * f].any()
            np.testing.assert_array_equal(obs_b[m * f : -m], obs_a[n * f :])
            np.testing.assert_array_equal(obs_b[-m:], np.r_[np.ones(n), np.zeros(m - n)])
        if step:
            assert a[1:4] == b[1:4]  # reward, terminated, truncated
        info_a, info_b = a[-1], b[-1]
        for key, value in info_a.items():
            if isinstance(value, np.ndarray) and value.ndim:  # per site (flags are 0-d)
                np.testing.assert_array_equal(info_b[key][:n], value)
                assert not info_b[key][n:].any(), key
            else:
                assert info_b[key] == value, key


def test_padded_sites_can_never_be_chosen_and_spaces_have_m_sites() -> None:
    env = gym.make("PowerTrip-v0", max_sites=12)
    assert env.action_space == gym.spaces.MultiBinary(12)
    env.reset(seed=0)
    mask = env.unwrapped.action_masks().reshape(12, 2)
    assert mask[10:, 0].all() and not mask[10:, 1].any()
    check_env(env.unwrapped, skip_render_check=True)
    with pytest.raises(ValueError, match=r"shape \(12,\).*entries 10\.\.11 are padding"):
        env.step(np.ones(10, dtype=np.int8))


def test_the_native_vector_env_pads_like_the_single_env() -> None:
    vec = gym.make_vec("PowerTrip-v0", num_envs=2, obs_mode="dict", max_sites=12)
    single = gym.make("PowerTrip-v0", obs_mode="dict", max_sites=12)
    obs, _ = vec.reset(seed=5)
    ref, _ = single.reset(seed=5)
    for key in ref:
        np.testing.assert_array_equal(obs[key][0], ref[key])
    action = np.zeros((2, 12), dtype=np.int8)
    action[:, [0, 3, 11]] = 1  # 11 is padding
    obs, reward, *_, info = vec.step(action)
    ref, ref_reward, *_, ref_info = single.step(action[0])
    assert reward[0] == ref_reward
    np.testing.assert_array_equal(info["selected"][0], ref_info["selected"])
    assert vec.action_masks().shape == (2, 24)


@pytest.mark.parametrize(
    ("max_sites", "match"),
    [(9, r"max_sites=9: the scenario 'default' .* has 10 sites; give max_sites >= 10"),
     (True, r"max_sites=True: give a whole number >= 10"),
     ("12", r"max_sites='12': give a whole number >= 10")],
)  # fmt: skip
def test_bad_max_sites_is_a_clear_error(max_sites: object, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        gym.make("PowerTrip-v0", max_sites=max_sites)
    with pytest.raises(ValueError, match=match):
        gym.make_vec("PowerTrip-v0", num_envs=2, max_sites=max_sites)


# --------------------------------------------------------------------------- drawn catalogues


def test_random_catalogues_are_seeded_varied_and_inside_their_ranges() -> None:
    env = gym.make("PowerTrip-Random-v0", obs_mode="dict")
    sampler = SiteSampler()
    cities = {s.name for s in load_scenario("default").sites}
    counts = set()
    for seed in range(12):
        obs, _ = env.reset(seed=seed)
        sc = env.unwrapped.scenario
        n = sc.n_sites
        counts.add(n)
        assert sampler.n_sites[0] <= n <= sampler.n_sites[1]
        assert obs["valid"].sum() == n and obs["sites"].shape == (32, 15)
        assert sc.network.hub in {s.name for s in sc.sites}
        for s in sc.sites:
            assert s.name.rsplit("-", 1)[0] in cities
            assert s.gpu in sampler.gpus and s.gpu_count % 8 == 0
            assert (s.pv_kw > 0) == bool(s.pv_column)
        assert abs(sum(s.data_share for s in sc.sites) - 1.0) < 1e-9
    assert len(counts) >= 5

    def episode(seed: int) -> list:
        out = [env.reset(seed=seed)[0]["sites"]]
        for _ in range(30):
            out.append(env.step(np.ones(32, dtype=np.int8))[:2])
        return out

    first, again, other = episode(3), episode(3), episode(4)
    assert repr(first) == repr(again)
    assert repr(first) != repr(other)


def test_random_env_passes_the_checker_and_vectorises_in_sync_mode() -> None:
    check_env(gym.make("PowerTrip-Random-v0").unwrapped, skip_render_check=True)
    vec = gym.make_vec("PowerTrip-Random-v0", num_envs=2)
    assert isinstance(vec, gym.vector.SyncVectorEnv)
    vec.reset(seed=0)
    vec.step(np.zeros((2, 32), dtype=np.int8))
    with pytest.raises(ValueError, match="vectorization_mode='sync'"):
        PowerTripVectorEnv(2, sites="random")


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [({"n_sites": (0, 4)}, r"'n_sites' = \(0, 4\): give a tuple \(low, high\) of whole numbers"),
     ({"pue": (1.5, 1.2)}, r"'pue' = \(1.5, 1.2\).*low <= high"),
     ({"pv_probability": 2.0}, r"'pv_probability' = 2.0: give a probability in \[0, 1\]"),
     ({"wan_gbps": ()}, r"'wan_gbps' = \(\): give positive bandwidths")],
)  # fmt: skip
def test_bad_sampler_ranges_name_the_field(kwargs: dict, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        SiteSampler(**kwargs)


def test_sampler_refuses_what_the_scenario_cannot_serve() -> None:
    with pytest.raises(ValueError, match=r"'gpus': \['B200'\] are not in the GPU catalogue"):
        gym.make("PowerTrip-v0", sites=SiteSampler(gpus=("B200",)))
    with pytest.raises(ValueError, match=r"'cities' = 'nowhere.csv': no such site catalogue"):
        gym.make("PowerTrip-v0", sites=SiteSampler(cities="nowhere.csv"))
    with pytest.raises(ValueError, match=r"max_sites=8: the site sampler draws up to 16 sites"):
        gym.make("PowerTrip-Random-v0", max_sites=8)
    with pytest.raises(ValueError, match=r"sites='everywhere': give None .*'random'"):
        gym.make("PowerTrip-v0", sites="everywhere")


# --------------------------------------------------------------------------- the padded policy


def test_padded_encoder_and_head_ignore_padding_and_follow_the_sites() -> None:
    th.manual_seed(0)
    box = gym.spaces.Box
    space = gym.spaces.Dict(
        {"sites": box(-1, 1, (6, 15)), "global": box(-1, 1, (6,)), "valid": box(0, 1, (6,))}
    )
    encoder = SiteEncoder(space, site_out=4, activation="tanh")
    head = SiteActionHead(encoder.context_dim, 6, 4, 1, padded=encoder.padded)
    sites = th.rand(1, 6, 15)
    valid = th.tensor([[1.0, 1.0, 1.0, 1.0, 0.0, 0.0]])
    glob = th.rand(1, 6)

    def logits(sites: th.Tensor, valid: th.Tensor) -> th.Tensor:
        return head(encoder({"sites": sites, "global": glob, "valid": valid}))[0]

    base = logits(sites, valid)
    garbage = sites.clone()
    garbage[:, 4:] = th.rand(1, 2, 15) * 5
    th.testing.assert_close(logits(garbage, valid), base)  # padded rows are not read
    assert (base[4:] == PADDED_LOGIT).all()
    perm = th.tensor([2, 0, 3, 1, 4, 5])
    th.testing.assert_close(logits(sites[:, perm], valid), base[perm])  # equivariant


@pytest.fixture(scope="module")
def padded_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A few hundred PPO steps of the site policy on drawn catalogues, padded to 16 sites."""
    out = tmp_path_factory.mktemp("padded")
    argv = [
        "--env",
        "PowerTrip-Random-v0",
        "--max-sites",
        "16",
        "--n-envs",
        "2",
        "--extractor",
        "sites",
        "--timesteps",
        "256",
        "--hp",
        "n_steps=64",
        "--hp",
        "batch_size=64",
        "--eval-freq",
        "0",
        "--checkpoint-freq",
        "0",
        "--final-episodes",
        "1",
        "--final-policies",
        "PowerTrip",
        "--out",
        str(out),
        "--no-progress",
    ]
    assert train_agent.main(argv) == 0
    return out / "final_model.zip"


def test_a_padded_model_runs_on_1_7_and_12_sites(padded_model: Path, tmp_path: Path) -> None:
    for scenario, n in [(one_site_scenario(tmp_path), 1), *zip(HELD_OUT, (7, 12), strict=True)]:
        result = evaluate(
            "PowerTrip-v0",
            ["PowerTrip"],
            episodes=1,
            models=[(str(padded_model), "ppo")],
            env_kwargs={"scenario": str(scenario)},
            progress=False,
        )
        assert load_scenario(scenario).n_sites == n
        assert list(result.summary["policy"]) == ["PowerTrip", "final_model"]
        assert result.summary["mean_tta_h"].gt(0).all()


def test_a_scenario_larger_than_the_padding_is_a_clear_error(padded_model: Path) -> None:
    with pytest.raises(EvaluationError, match=r"cannot run on PowerTrip-Large-v0: max_sites=16"):
        evaluate(
            "PowerTrip-Large-v0",
            ["PowerTrip"],
            episodes=1,
            models=[(str(padded_model), "ppo")],
            progress=False,
        )


def test_training_on_several_scenario_files_pads_to_the_largest(tmp_path: Path) -> None:
    out = tmp_path / "run"
    argv = [
        "--scenario",
        str(HELD_OUT[0]),
        "--scenario",
        str(HELD_OUT[1]),
        "--n-envs",
        "2",
        "--extractor",
        "sites",
        "--timesteps",
        "128",
        "--hp",
        "n_steps=64",
        "--hp",
        "batch_size=64",
        "--eval-freq",
        "0",
        "--checkpoint-freq",
        "0",
        "--final-episodes",
        "0",
        "--out",
        str(out),
        "--no-progress",
    ]
    assert train_agent.main(argv) == 0
    from stable_baselines3 import PPO

    model = PPO.load(out / "final_model.zip", device="cpu")
    assert model.observation_space["valid"].shape == (12,)


def test_the_pretrained_agent_is_shipped_and_evaluates_by_name() -> None:
    assert pretrained_model_path().is_file()
    result = evaluate(
        "PowerTrip-Large-v0",
        [],
        episodes=1,
        models=[("pretrained", "ppo")],
        env_kwargs={"jitter": False},
        progress=False,
    )
    assert list(result.summary["policy"]) == ["pretrained"]
    assert result.summary["success_rate"].iloc[0] == 1.0


def test_too_small_max_sites_is_a_usage_error_naming_the_argument(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["--scenario", str(HELD_OUT[1]), "--max-sites", "8", "--out", str(tmp_path)]
    assert train_agent.main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("train_agent.py: error: argument --max-sites: 8: max_sites=8:")
    assert "has 12 sites; give max_sites >= 12" in err


def test_more_scenario_files_than_training_envs_is_a_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = [
        "--scenario",
        str(HELD_OUT[0]),
        "--scenario",
        str(HELD_OUT[1]),
        "--n-envs",
        "1",
        "--out",
        str(tmp_path),
    ]
    assert train_agent.main(argv) == 2
    assert "argument --n-envs: 1 training envs for 2 --scenario files" in capsys.readouterr().err


def test_the_pretrain_command_teaches_one_student_on_every_suite_task(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """It labels every suite task for one student, ships that student's model and records the
    command and the run's summary beside it (a short run: the shipped arguments, fewer steps)."""
    env_ids = pretrain.IMITATION_ARGS[1 : 2 * len(powertrip_env.SUITE_IDS) : 2]
    assert env_ids == list(powertrip_env.SUITE_IDS)
    short = [
        *pretrain.IMITATION_ARGS[: 2 * len(env_ids)],
        "--n-envs",
        "2",
        "--steps",
        "1",
        "--dagger",
        "0",
        "--epochs",
        "1",
    ]
    monkeypatch.setattr(pretrain, "IMITATION_ARGS", short)
    dest = tmp_path / "shipped"
    dest.mkdir()
    assert pretrain.train(tmp_path / "run", dest) == 0
    record = yaml.safe_load((dest / "config.yaml").read_text(encoding="utf-8"))
    assert record["command"].startswith("powertrip imitation --env PowerTrip-v0")
    assert record["summary"]["env"] == list(powertrip_env.SUITE_IDS)
    assert record["summary"]["states"] == len(env_ids) * 2
    from stable_baselines3 import PPO

    agent = CandidatePolicy(PPO.load(dest / "model.zip", device="cpu"), "student")
    env = gym.make("PowerTrip-Wide-v0")
    obs, info = env.reset(seed=0)
    agent.reset(env)
    assert env.action_space.contains(agent.act(obs, info))


def test_the_docs_show_the_table_the_pretrained_agent_achieved() -> None:
    results = (pretrained_model_path().parent / "RESULTS.md").read_text(encoding="utf-8")
    block = read_block("zero-shot", REPO / "README.md")  # README.md or the docs/ page holding it
    assert block.strip() and block.strip() in results
    for label, *_ in pretrain.TARGETS:
        assert f"| {label} |" in block


def test_the_docs_show_the_beyond_16_table_the_pretrained_agent_achieved() -> None:
    results = (pretrained_model_path().parent / "RESULTS.md").read_text(encoding="utf-8")
    block = read_block("beyond-16", REPO / "README.md")  # README.md or the docs/ page holding it
    assert block.strip() and block.strip() in results
    for label, *_ in pretrain.BEYOND_16:
        assert label in block.splitlines()[0]
    for name in ("pretrained", "PowerTrip", "FedZeroLike", "BestFixedSet", "BeamPlanner"):
        assert f"| {name} |" in block or f"| **{name}** |" in block, name


def test_evaluate_cli_runs_the_pretrained_agent(tmp_path: Path) -> None:
    from powertrip_env.harness.evaluation.evaluate import main

    argv = [
        "--env",
        "PowerTrip-v0",
        "--scenario",
        str(HELD_OUT[0]),
        "--model",
        "pretrained",
        "--policies",
        "PowerTrip",
        "--episodes",
        "1",
        "--out",
        str(tmp_path),
        "--no-progress",
    ]
    assert main(argv) == 0
    assert "| pretrained |" in (tmp_path / "summary.md").read_text(encoding="utf-8")
