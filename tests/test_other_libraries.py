"""docs/other-libraries.md: each snippet runs as written, and the libraries read info.

The snippets are read from the page (each follows an ``<!-- other-libraries:NAME -->`` line) and
run in a fresh interpreter in an empty folder, so the page cannot drift from what was tested
and the snippets need no file of the checkout. A snippet that needs TorchRL, Tianshou or skrl is
skipped where that library is not installed (the project does not depend on them: ``pip install
torchrl tianshou skrl`` beside it to run them); the CleanRL-style loop needs Gymnasium only and
always runs. The numeric info contract itself is tested without any of them in ``test_env.py``
and ``test_vector_env.py``.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "docs" / "other-libraries.md"
SNIPPET = re.compile(r"<!-- other-libraries:(\S+) -->\n```python\n(.*?)```", re.DOTALL)


def page_snippets() -> dict[str, str]:
    """The page's snippets, by the name in their marker."""
    return dict(SNIPPET.findall(PAGE.read_text(encoding="utf-8")))


def run_python(code: str, cwd: Path, timeout: float = 600) -> str:
    """Run ``code`` in a fresh interpreter in the folder ``cwd``; return its stdout.

    A fresh process is what a reader who pastes the snippet gets, and keeps the libraries'
    global settings (TorchRL sets multiprocessing's start method) out of the test session;
    what they write (skrl's experiment folders) lands in ``cwd``.
    """
    done = subprocess.run(
        [sys.executable, "-c", code],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
        env={**os.environ, "PYTHONWARNINGS": "ignore"},
    )
    assert done.returncode == 0, done.stderr[-4000:]
    return done.stdout


def test_the_section_has_the_four_snippets():
    assert set(page_snippets()) == {"cleanrl", "torchrl", "tianshou", "skrl"}


def test_the_cleanrl_style_loop_runs_and_reports_episode_ends(tmp_path):
    out = run_python(page_snippets()["cleanrl"], tmp_path)
    assert re.search(r"env \d: TTA \d+\.\d h, success (True|False)", out), out[-2000:]


def test_the_torchrl_snippet_runs_and_reads_tta_at_episode_ends(tmp_path):
    pytest.importorskip("torchrl")
    out = run_python(page_snippets()["torchrl"], tmp_path)
    assert "tensor([" in out and "tensor([]" not in out, out[-2000:]  # some episodes ended


def test_the_tianshou_snippet_runs_and_stores_info_in_the_buffer(tmp_path):
    pytest.importorskip("tianshou")
    out = run_python(page_snippets()["tianshou"], tmp_path)
    assert re.search(r"\[\s*\d", out), out[-2000:]  # the TTA of at least one finished episode


def test_the_skrl_snippet_runs(tmp_path):
    pytest.importorskip("skrl")
    run_python(page_snippets()["skrl"] + "\nassert observations.shape == (4, 156)\n", tmp_path)


def test_torchrl_gym_env_with_num_envs_reads_every_info_key_as_a_tensor(tmp_path):
    """The original failure: ``GymEnv(ID, num_envs=N)`` builds its info reader from the first
    info and stacks every value; a string, a Python float or keys that differ between reset and
    step broke it."""
    pytest.importorskip("torchrl")
    code = textwrap.dedent(
        """
        from torchrl.envs import GymEnv

        if __name__ == "__main__":  # TorchRL starts the sub-envs in spawned processes
            # the module path registers the IDs in TorchRL's spawned sub-env processes too
            env = GymEnv("powertrip_env:PowerTrip-v0", num_envs=2)
            rollout = env.rollout(5)
            from powertrip_env.interface import INFO_KEYS

            for key in INFO_KEYS:
                assert rollout["next", key].shape[:2] == (2, 5), key
            assert str(rollout["next", "straggler"].dtype) == "torch.int64"
            assert str(rollout["next", "idle"].dtype) == "torch.bool"
            print("ok")
        """
    )
    assert run_python(code, tmp_path).strip().endswith("ok")


def test_skrl_ppo_trains_on_the_multidiscrete_action_mode(tmp_path):
    """skrl has no MultiBinary: its PPO with a MultiCategoricalMixin policy over
    ``action_mode="multidiscrete"`` trains on a same-step-autoreset vector env."""
    pytest.importorskip("skrl")
    code = page_snippets()["skrl"] + textwrap.dedent(
        """
        from torch import nn
        from skrl.agents.torch.ppo import PPO
        from skrl.memories.torch import RandomMemory
        from skrl.models.torch import DeterministicMixin, Model, MultiCategoricalMixin
        from skrl.trainers.torch import SequentialTrainer

        class Policy(MultiCategoricalMixin, Model):
            def __init__(self, observation_space, action_space, device):
                Model.__init__(self, observation_space=observation_space,
                               action_space=action_space, device=device)
                MultiCategoricalMixin.__init__(self)
                self.net = nn.Linear(self.num_observations, int(action_space.nvec.sum()))

            def compute(self, inputs, role=""):
                return self.net(inputs["observations"]), {}

        class Value(DeterministicMixin, Model):
            def __init__(self, observation_space, action_space, device):
                Model.__init__(self, observation_space=observation_space,
                               action_space=action_space, device=device)
                DeterministicMixin.__init__(self)
                self.net = nn.Linear(self.num_observations, 1)

            def compute(self, inputs, role=""):
                return self.net(inputs["observations"]), {}

        spaces = (env.observation_space, env.action_space, env.device)
        agent = PPO(
            models={"policy": Policy(*spaces), "value": Value(*spaces)},
            memory=RandomMemory(memory_size=16, num_envs=env.num_envs, device=env.device),
            observation_space=env.observation_space, action_space=env.action_space,
            device=env.device,
            cfg={"rollouts": 16, "mini_batches": 2,
                 "experiment": {"write_interval": 0, "checkpoint_interval": 0}},
        )
        cfg = {"timesteps": 48, "headless": True, "disable_progressbar": True}
        SequentialTrainer(env=env, agents=agent, cfg=cfg).train()
        print("trained")
        """
    )
    assert run_python(code, tmp_path).strip().endswith("trained")
