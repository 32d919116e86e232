"""The pieces in agents/: site encoder, hyperparameter files, callbacks, reference, saving."""

from __future__ import annotations

from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
import torch
import yaml
from gymnasium import spaces
from sb3_contrib import MaskablePPO
from stable_baselines3 import A2C, PPO
from stable_baselines3.common.logger import KVWriter, Logger
from stable_baselines3.common.utils import LinearSchedule
from stable_baselines3.common.vec_env import DummyVecEnv

import powertrip_env  # noqa: F401  (registers the IDs)
from powertrip_env import dynamics
from powertrip_env.agents import hyperparams, saving
from powertrip_env.agents.callbacks import Checkpoint, PowerTripMetrics
from powertrip_env.agents.candidates import CandidateSets
from powertrip_env.agents.extractors import SiteEncoder
from powertrip_env.agents.hyperparams import ConfigError
from powertrip_env.agents.powertrip_return import PowerTripReturn
from powertrip_env.agents.saving import append_to_list, save_model, write_text
from powertrip_env.agents.site_policy import MaskableSitePolicy, SiteActionHead, SitePolicy
from powertrip_env.baselines.registry import make_policy

# PowerTrip-v0 (the flagship): 10 sites of dynamics.SITE_FEATURES, and the global features
N_SITES, N_FEATURES, N_GLOBAL = 10, len(dynamics.SITE_FEATURES), len(dynamics.GLOBAL_FEATURES)
pytestmark = pytest.mark.usefixtures("one_torch_thread")


def dict_space(n: int = N_SITES) -> spaces.Dict:
    return spaces.Dict(
        {
            "sites": spaces.Box(-1.0, 1.0, (n, N_FEATURES), dtype=np.float32),
            "global": spaces.Box(-1.0, 1.0, (N_GLOBAL,), dtype=np.float32),
        }
    )


def random_obs(batch: int = 5, n: int = N_SITES, seed: int = 0) -> dict[str, torch.Tensor]:
    gen = torch.Generator().manual_seed(seed)
    return {
        "sites": torch.rand(batch, n, N_FEATURES, generator=gen) * 2 - 1,
        "global": torch.rand(batch, N_GLOBAL, generator=gen) * 2 - 1,
    }


# --------------------------------------------------------------------------- site encoder


def test_site_encoder_output_has_the_documented_width() -> None:
    encoder = SiteEncoder(dict_space(), site_hidden=(32, 16), context_dim=24, site_out=4)
    out = encoder(random_obs())
    assert encoder.features_dim == 24 + N_SITES * 4
    assert out.shape == (5, encoder.features_dim)


def test_pooled_site_encoder_is_invariant_to_the_order_of_sites() -> None:
    torch.manual_seed(0)
    encoder = SiteEncoder(dict_space(), site_out=0)
    obs = random_obs()
    perm = torch.randperm(N_SITES)
    shuffled = {"sites": obs["sites"][:, perm], "global": obs["global"]}
    with torch.no_grad():
        assert torch.allclose(encoder(obs), encoder(shuffled), atol=1e-6)


def test_per_site_block_follows_the_sites_and_context_stays_invariant() -> None:
    torch.manual_seed(1)
    encoder = SiteEncoder(dict_space(), context_dim=16, site_out=3)
    obs = random_obs()
    perm = torch.randperm(N_SITES)
    shuffled = {"sites": obs["sites"][:, perm], "global": obs["global"]}
    with torch.no_grad():
        a, b = encoder(obs), encoder(shuffled)
    assert torch.allclose(a[:, :16], b[:, :16], atol=1e-6)
    blocks_a = a[:, 16:].reshape(5, N_SITES, 3)
    blocks_b = b[:, 16:].reshape(5, N_SITES, 3)
    assert torch.allclose(blocks_a[:, perm], blocks_b, atol=1e-6)


@pytest.mark.parametrize("site_out", [0, 8])
def test_site_encoder_output_changes_when_one_site_changes(site_out: int) -> None:
    torch.manual_seed(2)
    encoder = SiteEncoder(dict_space(), site_out=site_out)
    obs = random_obs()
    changed = {"sites": obs["sites"].clone(), "global": obs["global"]}
    changed["sites"][:, 3, 0] += 0.5
    with torch.no_grad():
        assert not torch.allclose(encoder(obs), encoder(changed), atol=1e-6)


def test_pooled_site_encoder_accepts_any_number_of_sites() -> None:
    encoder = SiteEncoder(dict_space(8), site_out=0)
    with torch.no_grad():
        assert encoder(random_obs(n=20)).shape == (5, encoder.features_dim)


def test_site_encoder_refuses_a_flat_observation() -> None:
    with pytest.raises(ValueError, match="obs_mode='dict'"):
        SiteEncoder(spaces.Box(0.0, 1.0, (70,), dtype=np.float32))


@pytest.mark.parametrize("algo_cls", [PPO, A2C, MaskablePPO])
def test_site_encoder_trains_with_every_algorithm(algo_cls: type) -> None:
    env = gym.make("PowerTrip-v0", obs_mode="dict")
    model = algo_cls(
        "MultiInputPolicy",
        env,
        n_steps=16,
        policy_kwargs={"features_extractor_class": SiteEncoder},
        device="cpu",
        seed=0,
        **({"batch_size": 16} if algo_cls is not A2C else {}),
    )
    model.learn(32)
    action, _ = model.predict(env.reset(seed=0)[0], deterministic=True)
    assert action.shape == (N_SITES,)
    assert isinstance(model.policy.features_extractor, SiteEncoder)


# --------------------------------------------------------------------------- hyperparameters


@pytest.mark.parametrize("algo", sorted(hyperparams.ALGOS))
@pytest.mark.parametrize("extractor", hyperparams.EXTRACTORS)
def test_shipped_config_builds_a_model(algo: str, extractor: str) -> None:
    raw = hyperparams.load_config(hyperparams.default_config_path(algo), algo)
    assert "gamma" in raw and "policy_kwargs" in raw
    assert 0.99 <= raw["gamma"] <= 1.0  # episodes are a hundred rounds or more
    policy, kwargs = hyperparams.model_kwargs(raw, algo, extractor)
    obs_mode = "dict" if extractor == "sites" else "flat"

    def make() -> gym.Env:  # as trained
        env = gym.make("PowerTrip-v0", obs_mode=obs_mode)
        return CandidateSets(env) if extractor == "candidates" else env

    env = DummyVecEnv([make] * 16)
    model = hyperparams.ALGOS[algo](policy, env, device="cpu", **kwargs)
    assert model.gamma == raw["gamma"]


def write_config(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "config.yaml"
    path.write_text(text, encoding="utf-8")
    return path


def test_unknown_hyperparameter_is_named_with_the_allowed_keys(tmp_path: Path) -> None:
    path = write_config(tmp_path, "gamma: 0.99\nclip_rnage: 0.1\n")
    with pytest.raises(
        ConfigError, match=r"unknown hyperparameter 'clip_rnage' for ppo.*clip_range"
    ):
        hyperparams.load_config(path, "ppo")


def test_a_ppo_only_key_is_refused_for_a2c(tmp_path: Path) -> None:
    path = write_config(tmp_path, "n_epochs: 4\n")
    with pytest.raises(ConfigError, match="'n_epochs' for a2c"):
        hyperparams.load_config(path, "a2c")


def test_malformed_yaml_names_the_file_and_line(tmp_path: Path) -> None:
    path = write_config(tmp_path, "gamma: 0.99\npolicy_kwargs: {net_arch: [64\n")
    with pytest.raises(ConfigError, match=r"malformed at line \d+"):
        hyperparams.load_config(path, "ppo")


@pytest.mark.parametrize(
    ("text", "match"),
    [
        ("- 1\n- 2\n", "must be a mapping"),
        ("n_steps: 12.5\n", r"n_steps=12.5: expected a int"),
        ("gamma: fast\n", r"gamma='fast': expected a float"),
        ("learning_rate: exp_1e-3\n", "lin_<number>"),
        ("policy_kwargs: {net_arch: [64, -1]}\n", "net_arch"),
        ("policy_kwargs: {activation_fn: swish}\n", "activation 'swish'"),
        ("policy_kwargs: {features_extractor_class: X}\n", "set by --extractor"),
        ("policy_kwargs: {net_arc: [64]}\n", r"policy_kwargs: unknown key 'net_arc'"),
        (
            "site_policy: {hidden: [8]}\n",
            r"site_policy: unknown key 'hidden'; allowed: .*head_hidden",
        ),
        ("site_policy: {site_out: 1.5}\n", r"site_policy.site_out=1.5: expected a int"),
        ("site_policy: {net_arch: [64]}\n", r"site_policy: unknown key 'net_arch'"),
    ],
)
def test_bad_values_are_refused_before_training(tmp_path: Path, text: str, match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        hyperparams.load_config(write_config(tmp_path, text), "ppo")


def test_missing_config_file_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read"):
        hyperparams.load_config(tmp_path / "nope.yaml", "ppo")


def test_overrides_set_nested_keys_and_are_checked() -> None:
    raw = {"gamma": 0.99, "policy_kwargs": {"net_arch": [64, 64]}}
    out = hyperparams.apply_overrides(
        raw, ["gamma=0.999", "policy_kwargs.net_arch=[32]", "learning_rate=lin_1e-3"], "ppo"
    )
    assert out["gamma"] == 0.999 and out["policy_kwargs"]["net_arch"] == [32]
    assert raw["policy_kwargs"]["net_arch"] == [64, 64]  # the input is not modified
    with pytest.raises(ConfigError, match="--hp"):
        hyperparams.apply_overrides(raw, ["gamma"], "ppo")
    with pytest.raises(ConfigError, match="unknown hyperparameter 'gama'"):
        hyperparams.apply_overrides(raw, ["gama=0.9"], "ppo")


def test_linear_schedule_and_activation_names_become_objects() -> None:
    raw = {"learning_rate": "lin_1e-3", "policy_kwargs": {"activation_fn": "relu"}}
    policy, kwargs = hyperparams.model_kwargs(raw, "ppo", "mlp")
    assert policy == "MlpPolicy"
    assert isinstance(kwargs["learning_rate"], LinearSchedule)
    assert kwargs["learning_rate"](1.0) == pytest.approx(1e-3)
    assert kwargs["learning_rate"](0.5) == pytest.approx(5e-4)
    assert kwargs["policy_kwargs"]["activation_fn"] is torch.nn.ReLU


@pytest.mark.parametrize(
    ("algo", "expected"), [("ppo", SitePolicy), ("maskable_ppo", MaskableSitePolicy)]
)
def test_sites_extractor_selects_the_site_policy_with_its_table(algo: str, expected: type) -> None:
    raw = {"policy_kwargs": {"net_arch": [8]}, "site_policy": {"site_out": 2}}
    policy, kwargs = hyperparams.model_kwargs(raw, algo, "sites")
    assert policy is expected
    assert kwargs["policy_kwargs"] == {"site_out": 2}


# --------------------------------------------------------------------------- site policy


@pytest.mark.parametrize("algo_cls", [PPO, MaskablePPO])
def test_site_policy_permutes_its_action_logits_with_the_sites(algo_cls: type) -> None:
    policy_cls = MaskableSitePolicy if algo_cls is MaskablePPO else SitePolicy
    env = gym.make("PowerTrip-v0", obs_mode="dict")
    model = algo_cls(policy_cls, env, n_steps=16, batch_size=16, device="cpu", seed=0)
    torch.nn.init.normal_(model.policy.action_net.out.weight)  # not the near-zero init
    obs = random_obs(batch=3)
    perm = torch.randperm(N_SITES, generator=torch.Generator().manual_seed(3))
    shuffled = {"sites": obs["sites"][:, perm], "global": obs["global"]}
    with torch.no_grad():
        logits = model.policy.action_net(model.policy.extract_features(obs))
        logits_shuffled = model.policy.action_net(model.policy.extract_features(shuffled))
    per_site = logits.reshape(3, N_SITES, -1)
    assert torch.allclose(per_site[:, perm], logits_shuffled.reshape(3, N_SITES, -1), atol=1e-5)


@pytest.mark.parametrize("algo_cls", [PPO, MaskablePPO])
def test_site_policy_model_saves_and_loads_with_its_head(algo_cls: type, tmp_path: Path) -> None:
    policy_cls = MaskableSitePolicy if algo_cls is MaskablePPO else SitePolicy
    env = gym.make("PowerTrip-v0", obs_mode="dict")
    kwargs = {"site_out": 4, "head_hidden": [16], "vf_net_arch": [32], "activation_fn": "relu"}
    model = algo_cls(policy_cls, env, n_steps=16, batch_size=16, policy_kwargs=kwargs, device="cpu")
    model.learn(16)
    model.save(tmp_path / "m.zip")
    loaded = algo_cls.load(tmp_path / "m.zip", device="cpu")
    assert isinstance(loaded.policy.action_net, SiteActionHead)
    obs = env.reset(seed=1)[0]
    assert np.array_equal(
        model.predict(obs, deterministic=True)[0], loaded.predict(obs, deterministic=True)[0]
    )


def test_site_policy_refuses_an_encoder_without_per_site_features() -> None:
    env = gym.make("PowerTrip-v0", obs_mode="dict")
    with pytest.raises(ValueError, match="site_out=0"):
        PPO(SitePolicy, env, policy_kwargs={"site_out": 0}, device="cpu")


# --------------------------------------------------------------------------- reference


def test_reference_recovers_the_start_and_matches_a_powertrip_run() -> None:
    ref = PowerTripReturn("PowerTrip-v0")
    env = gym.make("PowerTrip-v0", split="test")
    obs, info = env.reset(seed=3)
    start = info["start_time_s"]
    done = False
    while not done:
        obs, _, terminated, truncated, info = env.step(env.action_space.sample())
        done = terminated or truncated
    assert ref.start_time_s(info) == pytest.approx(start, abs=1e-3)

    plain = gym.make("PowerTrip-v0", jitter=False)
    policy = make_policy("PowerTrip", N_SITES)
    obs, info = plain.reset(options={"start_time": start})
    policy.reset(plain)
    total, done = 0.0, False
    while not done:
        obs, reward, terminated, truncated, info = plain.step(policy.act(obs, info))
        total += reward
        done = terminated or truncated
    assert ref.episode_return(start) == pytest.approx(total)
    assert ref.episode_return(start) == pytest.approx(total)  # cached
    assert len(ref._cache) == 1


# --------------------------------------------------------------------------- callbacks


class Collect(KVWriter):
    """A logger output that keeps every dump."""

    def __init__(self) -> None:
        self.dumps: list[dict[str, float]] = []

    def write(self, key_values: dict, key_excluded: dict, step: int = 0) -> None:
        self.dumps.append({k: v for k, v in key_values.items() if k.startswith("powertrip/")})


def test_metrics_callback_logs_every_finished_episode_exactly_once(short_scenario: Path) -> None:
    env = DummyVecEnv([lambda: gym.make("PowerTrip-v0", scenario=short_scenario)] * 2)
    model = PPO("MlpPolicy", env, n_steps=32, batch_size=64, n_epochs=1, device="cpu", seed=0)
    writer = Collect()
    model.set_logger(Logger(folder=None, output_formats=[writer]))
    callback = PowerTripMetrics(PowerTripReturn("PowerTrip-v0", {"scenario": short_scenario}))
    model.learn(640, callback=callback)

    dumps = [d for d in writer.dumps if d]
    assert callback.finished_episodes >= 4
    assert sum(d["powertrip/episodes"] for d in dumps) == callback.finished_episodes
    for d in dumps:
        assert 0.0 <= d["powertrip/success_rate"] <= 1.0
        assert 1.0 <= d["powertrip/sites_per_round"] <= N_SITES
        assert 0.0 < d["powertrip/tta_h"] <= 0.25 + 1.0  # the budget plus one round
        assert d["powertrip/energy_kwh"] > 0.0
    assert any("powertrip/return_vs_powertrip" in d for d in dumps)


def test_checkpoint_counts_environment_steps(tmp_path: Path) -> None:
    env = gym.make("PowerTrip-v0")
    model = PPO("MlpPolicy", env, n_steps=32, batch_size=32, n_epochs=1, device="cpu")
    model.learn(96, callback=Checkpoint(40, tmp_path / "ck"))
    names = sorted(p.name for p in (tmp_path / "ck").iterdir())
    assert names == ["model_40_steps.zip", "model_80_steps.zip"]


# --------------------------------------------------------------------------- saving


def test_save_model_replaces_atomically_and_leaves_no_temporary_files(tmp_path: Path) -> None:
    env = gym.make("PowerTrip-v0")
    model = PPO("MlpPolicy", env, n_steps=32, batch_size=32, device="cpu")
    path = save_model(model, tmp_path / "best_model")
    assert path == tmp_path / "best_model.zip"
    assert PPO.load(path, device="cpu").n_steps == 32
    assert [p.name for p in tmp_path.iterdir()] == ["best_model.zip"]


def test_failed_save_keeps_the_previous_file(tmp_path: Path) -> None:
    write_text(tmp_path / "model.zip", "previous")

    class Broken:
        def save(self, path: Path) -> None:
            Path(path).write_text("half", encoding="utf-8")
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        save_model(Broken(), tmp_path / "model.zip")
    assert (tmp_path / "model.zip").read_text(encoding="utf-8") == "previous"
    assert [p.name for p in tmp_path.iterdir()] == ["model.zip"]


def test_append_to_list_keeps_the_text_and_adds_the_entry() -> None:
    text = "# the run\ncommand: python train_agent.py\nargs:\n  seed: 3\n"
    once = append_to_list(text, "resumes", {"at_timesteps": 64, "changed": {}})
    twice = append_to_list(once, "resumes", {"at_timesteps": 128, "changed": {"timesteps": 9}})
    assert once.startswith(text) and twice.startswith(once)  # byte for byte, then the entry
    assert yaml.safe_load(twice) == {
        "command": "python train_agent.py",
        "args": {"seed": 3},
        "resumes": [
            {"at_timesteps": 64, "changed": {}},
            {"at_timesteps": 128, "changed": {"timesteps": 9}},
        ],
    }
    # A list that is not the last entry cannot be appended to as text; the values are kept.
    edited = "resumes:\n- at_timesteps: 64\nargs:\n  seed: 3"
    assert yaml.safe_load(append_to_list(edited, "resumes", {"at_timesteps": 96})) == {
        "resumes": [{"at_timesteps": 64}, {"at_timesteps": 96}],
        "args": {"seed": 3},
    }


def test_install_results_replaces_the_set_with_the_summary_last(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    run = tmp_path / "run"
    for name in ("summary.md", "episodes.csv", "tta.png", "final_model.zip"):
        write_text(run / name, f"old {name}")
    new = tmp_path / "new"
    for name in ("episodes.csv", "summary.md"):
        write_text(new / name, f"new {name}")
    moved: list[str] = []
    replace = saving.os.replace

    def watched(src: Path, dst: Path) -> None:
        moved.append(Path(dst).name)
        assert not (run / "summary.md").exists()  # the old summary went first
        replace(src, dst)

    monkeypatch.setattr(saving.os, "replace", watched)
    saving.install_results(new, run)
    assert moved == ["episodes.csv", "summary.md"]
    assert {p.name: p.read_text(encoding="utf-8") for p in run.iterdir()} == {
        "summary.md": "new summary.md",
        "episodes.csv": "new episodes.csv",
        "final_model.zip": "old final_model.zip",  # not a result: kept; the old plot is gone
    }
    assert not new.exists()
