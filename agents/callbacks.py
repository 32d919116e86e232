"""SB3 callbacks for training on PowerTrip environments, one job each.

* ``PowerTripMetrics``: the ``powertrip/*`` TensorBoard scalars over finished training episodes.
* ``SeededEvalCallback`` / ``SeededMaskableEvalCallback``: SB3's periodic evaluation on the
  same episodes every time, plus ``eval/tta_h`` and ``eval/success_rate``.
* ``SaveBest``: the ``callback_on_new_best`` that writes ``best_model.zip`` atomically.
* ``Checkpoint``: periodic model snapshots, written atomically.

SB3's own ``EvalCallback`` and ``CheckpointCallback`` write their zips in place; a run stopped
mid-write would leave a corrupt best model. Ours route every save through
``powertrip_env.agents.saving``.
"""

from __future__ import annotations

import json
import math
import os
import warnings
from pathlib import Path
from typing import Any

import numpy as np
from sb3_contrib.common.maskable.callbacks import MaskableEvalCallback
from stable_baselines3.common.callbacks import BaseCallback, EvalCallback

from powertrip_env.agents.powertrip_return import PowerTripReturn
from powertrip_env.agents.saving import save_model, write_text
from powertrip_env.units import s_to_h

METRIC_KEYS = (
    "powertrip/tta_h",
    "powertrip/success_rate",
    "powertrip/sites_per_round",
    "powertrip/energy_kwh",
    "powertrip/return_vs_powertrip",
)


class PowerTripMetrics(BaseCallback):
    """Log what the environment is about, per finished training episode, to TensorBoard.

    Scalars, each the mean over the episodes that finished since the logger last wrote:

    * ``powertrip/tta_h``: hours from the episode start to its end, i.e. the time-to-accuracy
      for successful episodes and the elapsed time (the budget) for failed ones.
    * ``powertrip/success_rate``: fraction of episodes that reached the target accuracy.
    * ``powertrip/sites_per_round``: mean ``info["n_selected"]`` over the episode's non-idle
      rounds (idle rounds select nobody and would only dilute it).
    * ``powertrip/energy_kwh``: energy of the whole episode.
    * ``powertrip/return_vs_powertrip``: the episode's return minus PowerTrip's return from the
      same start (``powertrip_env.agents.powertrip_return``). Running PowerTrip costs about as
      much as the agent's own episode, so only every ``compare_every``-th finished episode is
      compared; the mean is over those. Omitted when ``powertrip`` is None or no episode was
      compared.
    * ``powertrip/episodes``: how many episodes the means are over.

    Values are recorded at the end of every rollout and accumulate until the logger dumps (SB3
    clears ``logger.name_to_value`` when it does), so a ``log_interval`` above 1, or a dump by
    ``EvalCallback`` in between, neither drops nor double-counts episodes.
    """

    def __init__(
        self,
        powertrip: PowerTripReturn | None = None,
        compare_every: int = 10,
        verbose: int = 0,
    ) -> None:
        super().__init__(verbose)
        if compare_every < 1:
            raise ValueError(f"compare_every={compare_every} must be at least 1")
        self.powertrip = powertrip
        self.compare_every = compare_every
        self.finished_episodes = 0
        self._pending: list[dict[str, float]] = []  # finished since the last record
        self._window: list[dict[str, float]] = []  # recorded, not yet dumped

    def _on_training_start(self) -> None:
        n = self.training_env.num_envs
        self._return = np.zeros(n)
        self._sites = np.zeros(n)
        self._busy_rounds = np.zeros(n)

    def _on_step(self) -> bool:
        rewards, dones, infos = self.locals["rewards"], self.locals["dones"], self.locals["infos"]
        self._return += rewards
        for i, info in enumerate(infos):
            if "n_selected" in info and not info.get("idle", False):
                self._sites[i] += info["n_selected"]
                self._busy_rounds[i] += 1
            if dones[i]:
                self._pending.append(self._episode_metrics(i, info))
                self._return[i] = self._sites[i] = self._busy_rounds[i] = 0.0
        return True

    def _episode_metrics(self, i: int, info: dict[str, Any]) -> dict[str, float]:
        self.finished_episodes += 1
        # tta_h is 0.0 until the episode itself ends; a TimeLimit cut reports the elapsed time
        tta_h = float(info.get("tta_h", 0.0)) or s_to_h(float(info.get("elapsed_s", math.nan)))
        row = {
            "tta_h": float(tta_h),
            "success_rate": float(bool(info.get("success", False))),
            "energy_kwh": float(info.get("energy_kwh", math.nan)),
            "sites_per_round": (
                self._sites[i] / self._busy_rounds[i] if self._busy_rounds[i] else math.nan
            ),
            "return_vs_powertrip": math.nan,
        }
        # Compare the 1st, (k+1)-th, (2k+1)-th... episode, so even a short run gets a value.
        if self.powertrip is not None and (self.finished_episodes - 1) % self.compare_every == 0:
            start = self.powertrip.start_time_s(info)
            row["return_vs_powertrip"] = self._return[i] - self.powertrip.episode_return(start)
        return row

    def _on_rollout_end(self) -> None:
        if "powertrip/episodes" not in self.logger.name_to_value:
            self._window = []  # the logger wrote (or never saw) the previous window
        self._window += self._pending
        self._pending = []
        if not self._window:
            return
        self.logger.record("powertrip/episodes", len(self._window))
        for key in METRIC_KEYS:
            values = [row[key.split("/", 1)[1]] for row in self._window]
            values = [v for v in values if not math.isnan(v)]
            if values:
                self.logger.record(key, float(np.mean(values)))

    def _on_training_end(self) -> None:
        if self.powertrip is not None:
            self.powertrip.close()


class _SeededEvaluation:
    """Mixin for SB3's eval callbacks: the same evaluation episodes every time, and TTA.

    SB3 resets the eval env without a seed, so each evaluation would draw new start times and
    the "best model" would partly be the one that met the easiest episodes. Re-seeding the eval
    env before every evaluation makes them paired. Also records ``eval/tta_h`` and, from the
    env's ``info["success"]``, SB3's ``eval/success_rate``.
    """

    eval_seed: int = 0

    def _init_callback(self) -> None:
        # SB3 warns when the training envs run in subprocesses and the eval env does not; that
        # is deliberate here (one eval env is cheapest in-process), so the warning is noise.
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", "Training and eval env are not of the same type")
            super()._init_callback()

    def _on_step(self) -> bool:
        if self.eval_freq > 0 and self.n_calls % self.eval_freq == 0:
            self.eval_env.seed(self.eval_seed)
            self._tta_h: list[float] = []
        return super()._on_step()

    def _log_success_callback(self, locals_: dict[str, Any], globals_: dict[str, Any]) -> None:
        info = locals_["info"]
        if locals_["done"]:
            if "success" in info:
                self._is_success_buffer.append(bool(info["success"]))
            if float(info.get("tta_h", 0.0)) > 0.0:  # 0.0 until the episode itself ends
                self._tta_h.append(float(info["tta_h"]))
                self.logger.record("eval/tta_h", float(np.mean(self._tta_h)))


class SeededEvalCallback(_SeededEvaluation, EvalCallback):
    """``EvalCallback`` on fixed episodes (see ``_SeededEvaluation``). Extra arg: ``eval_seed``."""

    def __init__(self, *args: Any, eval_seed: int = 0, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.eval_seed = eval_seed


class SeededMaskableEvalCallback(_SeededEvaluation, MaskableEvalCallback):
    """``MaskableEvalCallback`` (passes ``action_masks()``) on fixed episodes."""

    def __init__(self, *args: Any, eval_seed: int = 0, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.eval_seed = eval_seed


class SaveBest(BaseCallback):
    """``callback_on_new_best`` of an eval callback: save ``best_model.zip`` atomically.

    Beside it, ``best_model.json`` records the mean evaluation reward and the step count, so a
    resumed run (``read_best``) keeps the old best unless it really beats it.
    """

    def __init__(self, save_dir: str | os.PathLike[str], verbose: int = 0) -> None:
        super().__init__(verbose)
        self.save_dir = Path(save_dir)
        self.path = self.save_dir / "best_model.zip"

    def _on_step(self) -> bool:
        save_model(self.model, self.path)
        record = {
            "mean_reward": float(self.parent.best_mean_reward),
            "timesteps": self.num_timesteps,
        }
        write_text(self.save_dir / "best_model.json", json.dumps(record) + "\n")
        if self.verbose:
            print(f"new best model ({record['mean_reward']:.4f}) saved to {self.path}")
        return True

    @staticmethod
    def read_best(save_dir: str | os.PathLike[str]) -> float:
        """Mean reward of the saved best model in ``save_dir``, or -inf if there is none."""
        path = Path(save_dir) / "best_model.json"
        try:
            return float(json.loads(path.read_text(encoding="utf-8"))["mean_reward"])
        except (OSError, ValueError, KeyError, TypeError):
            return -math.inf


class Checkpoint(BaseCallback):
    """Save ``<save_dir>/<prefix>_<steps>_steps.zip`` every ``save_freq`` environment steps.

    ``save_freq`` counts steps of all environments together (``model.num_timesteps``), unlike
    SB3's ``CheckpointCallback``, which counts calls; a resumed run keeps the same grid.
    """

    def __init__(
        self,
        save_freq: int,
        save_dir: str | os.PathLike[str],
        prefix: str = "model",
        verbose: int = 0,
    ) -> None:
        super().__init__(verbose)
        if save_freq < 1:
            raise ValueError(f"save_freq={save_freq} must be at least 1")
        self.save_freq = save_freq
        self.save_dir = Path(save_dir)
        self.prefix = prefix
        self._next = save_freq

    def _on_training_start(self) -> None:
        self._next = (self.num_timesteps // self.save_freq + 1) * self.save_freq

    def _on_step(self) -> bool:
        if self.num_timesteps >= self._next:
            path = save_model(
                self.model, self.save_dir / f"{self.prefix}_{self.num_timesteps}_steps"
            )
            self._next = (self.num_timesteps // self.save_freq + 1) * self.save_freq
            if self.verbose:
                print(f"checkpoint saved to {path}")
        return True
