"""Offline datasets (``powertrip_env.harness.datasets.build``): recorded, loaded back with Minari,
replayed exactly.

One small set of datasets is recorded once for the module through the command line: PowerTrip
and the Optimiser on two whole episodes of the small ``PowerTrip-Digits-v1`` (a few dozen rounds
each), and PowerTrip on the flagship cut at four rounds (``max_episode_steps``). Everything
else reads them back through ``minari.load_dataset``.
"""

from __future__ import annotations

import contextlib
import os
import re
import subprocess
import sys
from pathlib import Path

import minari
import minari.namespace
import numpy as np
import pytest
from minari.dataset.minari_dataset import parse_dataset_id

import powertrip_env
from powertrip_env.baselines import candidates
from powertrip_env.baselines.registry import LOOKAHEAD
from powertrip_env.harness.datasets import build as datasets
from powertrip_env.harness.datasets.build import load_imitation
from powertrip_env.harness.datasets.recording import nearest_slot
from powertrip_env.harness.datasets.store import DATASET_VERSION, DOCS, DatasetError, dataset_id

SMALL = "PowerTrip-Digits-v1"
FLAGSHIP = "PowerTrip-v0"
SEED = 3  # not 0, so that a recorder ignoring --seed is caught
EPISODES = 2
SMALL_IDS = [f"powertrip/{SMALL}/powertrip-v0", f"powertrip/{SMALL}/optimiser-v0"]
CUT_ID = f"powertrip/{FLAGSHIP}/powertrip-v0"
CUT_STEPS = 4


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Minari's data folder holding the module's three datasets."""
    out = tmp_path_factory.mktemp("minari")
    argv = [
        "--env",
        SMALL,
        "--policies",
        "PowerTrip,Optimiser",
        "--episodes",
        str(EPISODES),
        "--seed",
        str(SEED),
        "--out",
        str(out),
    ]
    assert datasets.main(argv) == 0
    ids = datasets.record(
        FLAGSHIP,
        "PowerTrip",
        episodes=1,
        seed=SEED,
        root=out,
        env_kwargs={"max_episode_steps": CUT_STEPS},
    )
    assert ids == [CUT_ID]
    return out


@contextlib.contextmanager
def opened(root: Path, ident: str):
    with datasets.minari_root(root):
        yield minari.load_dataset(ident)


# --------------------------------------------------------------------------- IDs


def test_ids_are_namespaced_versioned_and_parse_for_every_suite_task() -> None:
    assert datasets.DEFAULT_POLICIES == ("Optimiser", *LOOKAHEAD)
    assert dataset_id("PowerTrip-v0", "Optimiser") == "powertrip/PowerTrip-v0/optimiser-v0"
    assert dataset_id("PowerTrip-v0", "Optimiser", "test") == (
        "powertrip/PowerTrip-v0/optimiser-test-v0"
    )
    grammar = re.compile(r"^powertrip/(PowerTrip(?:-[A-Za-z]+)?-v\d+)/([a-z0-9-]+)-v(\d+)$")
    for env_id in powertrip_env.SUITE_IDS:
        for policy in datasets.DEFAULT_POLICIES:
            ident = dataset_id(env_id, policy)
            match = grammar.fullmatch(ident)
            assert match and match[1] == env_id and match[2] == policy.lower(), ident
            assert parse_dataset_id(ident) == (
                f"powertrip/{env_id}",
                policy.lower(),
                DATASET_VERSION,
            )


def test_the_datasets_and_their_namespaces_are_listed_by_minari(root: Path) -> None:
    with datasets.minari_root(root):
        listed = set(minari.list_local_datasets())
        namespaces = minari.namespace.list_local_namespaces()
        meta = {ns: minari.namespace.get_namespace_metadata(ns) for ns in namespaces}
    assert listed == {*SMALL_IDS, CUT_ID}
    assert set(namespaces) == {"powertrip", f"powertrip/{SMALL}", f"powertrip/{FLAGSHIP}"}
    for ns, data in meta.items():
        assert DOCS in data["description"], ns
    assert meta[f"powertrip/{SMALL}"]["env_id"] == SMALL
    # nothing half-written or staged is left beside them
    hidden = [p for p in root.rglob(".*")]
    assert not hidden, hidden


# --------------------------------------------------------------------------- contents


@pytest.mark.parametrize("ident", [*SMALL_IDS, CUT_ID])
def test_episodes_have_the_env_spaces_and_the_recorded_seeds(root: Path, ident: str) -> None:
    with opened(root, ident) as ds:
        env = ds.recover_environment()
        episodes = list(ds.iterate_episodes())
        seeds = [m["seed"] for m in ds.storage.get_episode_metadata(range(ds.total_episodes))]
        meta = ds.storage.metadata["powertrip"]
        eval_split = ds.recover_environment(eval_env=True).spec.kwargs["split"]
    cut = ident == CUT_ID
    n_episodes = 1 if cut else EPISODES
    assert ds.total_episodes == len(episodes) == n_episodes
    assert seeds == meta["episode_seeds"] == [SEED + e for e in range(n_episodes)]
    assert (meta["split"], meta["seed"], eval_split) == ("train", SEED, "test")
    assert meta["clairvoyant"] == ident.endswith("optimiser-v0")
    assert env.spec.kwargs["obs_mode"] == "flat" and env.spec.kwargs["split"] == "train"
    assert ds.observation_space == env.observation_space
    assert ds.action_space == env.action_space
    n_sites = env.action_space.shape[0]
    for ep in episodes:
        steps = len(ep)
        assert steps == CUT_STEPS if cut else steps > CUT_STEPS
        assert ep.observations.shape == (steps + 1, *env.observation_space.shape)
        assert ep.observations.dtype == env.observation_space.dtype == np.float32
        assert all(env.observation_space.contains(o) for o in ep.observations)
        assert ep.actions.shape == (steps, n_sites)
        assert ep.actions.dtype == env.action_space.dtype == np.int8
        assert all(env.action_space.contains(a) for a in ep.actions)
        assert ep.rewards.shape == (steps,) and ep.rewards.dtype == np.float64
        assert ep.terminations.dtype == ep.truncations.dtype == np.bool_
        ended = ep.terminations | ep.truncations
        assert ended[-1] and not ended[:-1].any()
        assert bool(ep.truncations[-1]) == cut  # the Digits episodes reach the target
        infos = ep.infos
        assert infos["candidate_features"].shape == (steps + 1, candidates.N_FEATURES)
        assert infos["candidate_features"].dtype == np.float32
        assert infos["candidate_masks"].shape == (steps + 1, candidates.N_SLOTS, n_sites)
        assert infos["candidate_slot"].dtype == np.int64
        assert infos["candidate_exact"].dtype == np.bool_
        assert infos["rounds"].tolist() == list(range(steps + 1))  # the env's own info
    env.close()


@pytest.mark.parametrize("ident", [*SMALL_IDS, CUT_ID])
def test_replaying_the_actions_reproduces_observations_rewards_and_candidates(
    root: Path, ident: str
) -> None:
    """A fresh env of the dataset's spec, reset with an episode's seed and given its actions,
    gives back every observation, reward and end flag bit for bit; the candidates it builds
    before each action are the recorded ones, so infos[t] describes the decision at obs[t]."""
    with opened(root, ident) as ds:
        env = ds.recover_environment()
        episodes = list(ds.iterate_episodes())
        seeds = [m["seed"] for m in ds.storage.get_episode_metadata(range(ds.total_episodes))]
    for ep, seed in zip(episodes, seeds, strict=True):
        obs, info = env.reset(seed=seed)
        assert np.array_equal(obs, ep.observations[0])
        assert info["trace_time"] == ep.infos["trace_time"][0]
        for t, action in enumerate(ep.actions):
            built = candidates.build(env.unwrapped)
            assert np.array_equal(built.features, ep.infos["candidate_features"][t]), t
            assert np.array_equal(built.masks, ep.infos["candidate_masks"][t]), t
            obs, reward, terminated, truncated, info = env.step(action)
            assert np.array_equal(obs, ep.observations[t + 1]), t
            assert reward == ep.rewards[t], t
            assert (terminated, truncated) == (ep.terminations[t], ep.truncations[t]), t
            assert info["elapsed_s"] == ep.infos["elapsed_s"][t + 1], t
        assert terminated or truncated
    env.close()


@pytest.mark.parametrize("ident", [*SMALL_IDS, CUT_ID])
def test_slot_labels_are_nearest_slot_of_the_recorded_action(root: Path, ident: str) -> None:
    with opened(root, ident) as ds:
        episodes = list(ds.iterate_episodes())
        share = ds.storage.metadata["powertrip"]["candidate_exact_share"]
    exact = steps = 0
    for ep in episodes:
        masks, slots = ep.infos["candidate_masks"], ep.infos["candidate_slot"]
        for t, action in enumerate(ep.actions):
            assert slots[t] == nearest_slot(masks[t], action), t
            equal = bool(np.array_equal(masks[t][slots[t]], action != 0))
            assert ep.infos["candidate_exact"][t] == equal, t
            exact += equal
        steps += len(ep)
        assert slots[-1] == -1 and not ep.infos["candidate_exact"][-1]  # no decision after
        assert not ep.infos["candidate_masks"][-1].any()
        assert 0 <= slots[:-1].min() and slots[:-1].max() < candidates.N_SLOTS
    assert share == exact / steps
    assert exact > 0


# --------------------------------------------------------------------------- the label


def test_nearest_slot_prefers_an_equal_set_then_the_highest_overlap_then_the_lowest_index():
    # equal sets: the first of them, even when an earlier slot overlaps more than it is equal
    assert nearest_slot([[1, 1, 0], [1, 0, 0], [1, 0, 0]], [1, 0, 0]) == 1
    # no equal set: Jaccard 2/4, 2/3, 0 -> slot 1
    assert nearest_slot([[1, 1, 1, 0], [0, 1, 1, 0], [1, 0, 0, 0]], [0, 1, 1, 1]) == 1
    # a tie at 1/3: the lower index
    assert nearest_slot([[0, 0, 0, 1], [1, 1, 0, 0], [0, 0, 1, 1]], [0, 1, 1, 0]) == 1
    # the empty action: equal to an empty slot; else no overlap anywhere -> slot 0
    assert nearest_slot(np.array([[1, 0], [0, 0]], dtype=bool), np.zeros(2, np.int8)) == 1
    assert nearest_slot([[1, 0], [0, 1]], [0, 0]) == 0
    assert nearest_slot(np.eye(3, dtype=bool), np.array([0, 0, 1], dtype=np.int8)) == 2
    for masks, action in (([[1, 0]], [1, 0, 0]), ([1, 0], [1, 0]), (np.zeros((0, 2)), [1, 0])):
        with pytest.raises(ValueError, match="nearest_slot"):
            nearest_slot(masks, action)


# --------------------------------------------------------------------------- loading


def test_load_imitation_returns_every_decision_as_features_and_slot(root: Path) -> None:
    features, slots = load_imitation(SMALL_IDS, root=root)
    expected_f, expected_s, exact = [], [], []
    for ident in SMALL_IDS:
        with opened(root, ident) as ds:
            for ep in ds.iterate_episodes():
                expected_f.append(ep.infos["candidate_features"][:-1])
                expected_s.append(ep.infos["candidate_slot"][:-1])
                exact.append(ep.infos["candidate_exact"][:-1])
    total = sum(len(s) for s in expected_s)
    assert features.shape == (total, candidates.N_FEATURES) and features.dtype == np.float32
    assert slots.shape == (total,) and slots.dtype == np.int64
    assert np.array_equal(features, np.concatenate(expected_f))
    assert np.array_equal(slots, np.concatenate(expected_s))
    only_f, only_s = load_imitation(SMALL_IDS, root=root, exact_only=True)
    keep = np.concatenate(exact)
    assert only_f.shape == (int(keep.sum()), candidates.N_FEATURES)
    assert np.array_equal(only_s, slots[keep])
    one_f, _ = load_imitation(CUT_ID, root=root)  # one ID as a plain string
    assert one_f.shape == (CUT_STEPS, candidates.N_FEATURES)


def test_load_imitation_refuses_a_missing_dataset_and_another_candidate_layout(
    root: Path, monkeypatch
) -> None:
    with pytest.raises(DatasetError, match="powertrip/PowerTrip-v0/forecastmpc-v0"):
        load_imitation(["powertrip/PowerTrip-v0/forecastmpc-v0"], root=root)
    layout = {**datasets.candidate_layout(), "n_features": candidates.N_FEATURES + 1}
    monkeypatch.setattr(datasets, "candidate_layout", lambda: layout)
    with pytest.raises(DatasetError, match="candidate layout"):
        load_imitation(SMALL_IDS, root=root)


# --------------------------------------------------------------------------- bad input


@pytest.mark.parametrize(
    ("argv", "words"),
    [
        (["--env", "PowerTrip-v9"], ["--env", "'PowerTrip-v9'", "PowerTrip-Wide-v0"]),
        (["--env", "PowerTrip-Random-v0"], ["--env", "'PowerTrip-Random-v0'", "allowed"]),
        (["--policies", "PowerTrip,Nope"], ["--policies", "'Nope'", "valid names", "Optimiser"]),
        (["--policies", "TopPower-99"], ["--policies", "'TopPower-99'", "1 <= k <= 8"]),
        (["--episodes", "0"], ["--episodes", "0", "positive integer"]),
        (["--seed", "-1"], ["--seed", "-1", "0 or a positive integer"]),
        (["--split", "val"], ["--split", "'val'", "train, test, all"]),
        (["--policies", "PowerTrip,PowerTrip"], ["--policies", "'PowerTrip'", "twice"]),
    ],
    ids=["unknown-id", "sampled-id", "unknown-policy", "k-out-of-range", "episodes-0",
         "negative-seed", "split", "policy-twice"],
)  # fmt: skip
def test_bad_arguments_are_refused_in_one_line_before_anything_runs(
    argv: list[str], words: list[str], tmp_path: Path, monkeypatch, capsys
) -> None:
    monkeypatch.setattr(datasets, "record_episode", _must_not_run)
    out = tmp_path / "minari"
    base = ["--env", SMALL, "--policies", "PowerTrip", "--episodes", "1"]
    try:
        code = datasets.main([*base, *argv, "--out", str(out)])
    except SystemExit as stop:  # what argparse checks (the shared options) it refuses itself
        code = stop.code
    assert code == 2
    err = capsys.readouterr().err
    line = err.splitlines()[-1]  # argparse's usage, if any, then the one error line
    assert line.startswith(("error: argument ", "powertrip datasets: error: argument ")), err
    for word in words:
        assert word in line, (word, err)
    assert not out.exists()


def test_the_api_refuses_the_same_input(tmp_path: Path) -> None:
    with pytest.raises(DatasetError, match="--env"):
        datasets.record("Nope-v0", "PowerTrip", root=tmp_path)
    with pytest.raises(DatasetError, match="unknown policy 'Nope'"):
        datasets.record(SMALL, "Nope", root=tmp_path)
    with pytest.raises(DatasetError, match="--episodes"):
        datasets.record(SMALL, "PowerTrip", episodes=0, root=tmp_path)
    assert list(tmp_path.iterdir()) == []


def _must_not_run(*args: object, **kwargs: object) -> None:
    raise AssertionError("an episode ran although the arguments were going to be refused")


# --------------------------------------------------------------------------- writing


def _files(path: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(path)): p.read_bytes() for p in sorted(path.rglob("*")) if p.is_file()
    }


def _one(out: Path, *extra: str) -> int:
    argv = ["--env", SMALL, "--policies", "PowerTrip", "--episodes", "1", "--out", str(out)]
    return datasets.main([*argv, *extra])


def test_a_full_disk_while_a_dataset_is_written_ends_in_one_line_naming_it(
    tmp_path: Path, monkeypatch, capsys
) -> None:
    """As every tool that writes a result set: exit 2, one line naming the dataset's folder and
    the error, and nothing of the dataset left behind."""

    def disk_full(*args: object, **kwargs: object) -> None:
        raise OSError(28, "No space left on device")

    out = tmp_path / "minari"
    monkeypatch.setattr(datasets, "stage_dataset", disk_full)
    assert _one(out) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: results not written to ") and err.count("\n") == 1, err
    assert SMALL_IDS[0] in err and "[Errno 28] No space left on device" in err, err
    assert not [p for p in out.rglob("*") if p.is_file()]


def test_an_existing_dataset_is_refused_unless_force_which_replaces_it(
    tmp_path: Path, monkeypatch, capsys
) -> None:
    out = tmp_path / "minari"
    assert _one(out) == 0
    before = _files(out)
    with monkeypatch.context() as patch:
        patch.setattr(datasets, "record_episode", _must_not_run)
        assert _one(out, "--seed", "1") == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and SMALL_IDS[0] in err and "--force" in err, err
    assert _files(out) == before
    assert _one(out, "--seed", "1", "--force") == 0
    with opened(out, SMALL_IDS[0]) as ds:
        assert ds.storage.metadata["powertrip"]["episode_seeds"] == [1]
        assert ds.total_episodes == 1
    assert set(_files(out)) == set(before)  # the same files, nothing of the old one beside
    assert not list(out.rglob(".*"))


@pytest.mark.parametrize("earlier", [True, False], ids=["over-a-dataset", "fresh"])
def test_a_stop_while_writing_leaves_the_earlier_dataset_or_none(
    tmp_path: Path, monkeypatch, capsys, earlier: bool
) -> None:
    out = tmp_path / "minari"
    if earlier:
        assert _one(out) == 0
    before = _files(out) if earlier else {}
    real = datasets.result_dir
    moved: list[Path] = []

    @contextlib.contextmanager
    def stop_half_way(path, *, force=False):
        with real(path, force=force) as folder:
            yield folder
            moved.extend(folder.iterdir())
            raise KeyboardInterrupt  # after the files went into the hidden folder

    monkeypatch.setattr(datasets, "result_dir", stop_half_way)
    assert _one(out, "--seed", "1", *(["--force"] if earlier else [])) == 130
    assert moved, "the stop came before the dataset was staged"
    assert "interrupted" in capsys.readouterr().err
    assert _files(out) == before
    assert not list(out.rglob(".*"))  # no staging or temporary folder left
    assert not (out / SMALL_IDS[0]).exists() or earlier


def test_the_module_imports_and_labels_without_minari() -> None:
    """``nearest_slot`` is for the imitation learner, which must not need the extra to import
    it; recording without Minari says how to install it."""
    code = (
        "import sys\nsys.modules['minari'] = None\n"
        "from powertrip_env.harness.datasets import build as datasets\n"
        "from powertrip_env.harness.datasets.recording import nearest_slot\n"
        "assert nearest_slot([[1, 0], [0, 1]], [0, 1]) == 1\n"
        "try:\n    datasets.record('PowerTrip-v0', 'PowerTrip')\n"
        "except datasets.DatasetError as exc:\n    print(exc)\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "MINARI_DATASETS_PATH"}
    repo = Path(__file__).resolve().parents[1]
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=repo, env=env, timeout=300
    )
    assert done.returncode == 0, done.stderr
    assert "powertrip-env[datasets]" in done.stdout


def test_the_default_folder_is_minaris_own(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("MINARI_DATASETS_PATH", str(tmp_path / "here"))
    assert datasets.default_root() == tmp_path / "here"
    with datasets.minari_root(tmp_path / "there"):
        assert os.environ["MINARI_DATASETS_PATH"] == str(tmp_path / "there")
    assert os.environ["MINARI_DATASETS_PATH"] == str(tmp_path / "here")
    monkeypatch.delenv("MINARI_DATASETS_PATH")
    assert datasets.default_root() == Path.home() / ".minari" / "datasets"
