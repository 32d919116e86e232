"""Several training jobs on one scenario's sites and power: a PettingZoo AEC environment.

Each agent is a job: a single-job ``PowerTripEnv`` of its own workload on the task's sites,
stepped by the same compiled round. Jobs arrive at their own times and act in the order of
their clocks: the next to act is the job whose round ended earliest (ties: the earlier-arrived),
so every ``step`` is one training round of one job, the unit of the single-job env. Before a
job's round, its share of each site's powered GPUs (``allocation.offers``) is written into its
state (``SimState.shares``); the round multiplies it into the site's throughput and draw, as a
power callback's. The jobs' clocks never run back: the job that acts has the earliest clock, so
every lease it sees started before it and is still running or over.

Each agent's reward is its own job's (``reward_mode="excess_gain"``: the accuracy gained in the
round less the reference rate's gain in the same wall-clock time, so its return is
``1 − TTA / H_ref``). docs/multijob.md.
"""

from __future__ import annotations

import dataclasses
from typing import Any, ClassVar

import gymnasium as gym
import numpy as np
from gymnasium.utils import seeding
from pettingzoo import AECEnv

from powertrip_env.env import PowerTripEnv
from powertrip_env.multijob.allocation import offers as allocation_offers
from powertrip_env.multijob.tasks import DEFAULT_TASK, JOBS, TASKS, MultiJobTask, check_task
from powertrip_env.simulation import load_simulation
from powertrip_env.units import s_to_h

_SEED_LIMIT = 2**31  # the jobs' seeds, drawn from the episode's generator


def resolve_task(
    task: str | None, jobs: list[str] | tuple[str, ...] | None, allocation: str | None
) -> MultiJobTask:
    """The task named ``task`` (default ``DEFAULT_TASK``), with its jobs or allocation rule
    replaced when given; every bad value is refused with what is allowed."""
    name = DEFAULT_TASK if task is None else task
    if name not in TASKS:
        raise ValueError(f"multijob: task {name!r} is not registered; allowed: {sorted(TASKS)}")
    spec = TASKS[name]
    chosen = spec.jobs if jobs is None else tuple(jobs)
    rule = spec.allocation if allocation is None else allocation
    return check_task(dataclasses.replace(spec, jobs=chosen, allocation=rule), "multijob")


class MultiJobEnv(AECEnv):
    """K training jobs sharing one scenario's sites and spare power (``multijob.env()``).

    Agents ``"job_0"`` … ``"job_{K-1}"`` in arrival order. Observation: a ``Box`` of the job's
    own single-job observation (``PowerTripEnv``'s flat one) followed by, per site, the share
    of its powered GPUs the job would hold if it asked now (``offers``) and the share of the
    other active jobs that asked for it in their latest round. Action: ``MultiBinary(N)``, the
    sites of the job's round, as the single-job env's. ``info`` of a job: its single-job info
    (``tta_h`` on its last step), its ``arrival_h``, the ``allocation`` (the share it held of
    each site in the round) and ``team`` (``team_metrics``).
    """

    metadata: ClassVar[dict[str, Any]] = {
        "name": "powertrip_multijob_v0",
        "render_modes": [],
        "is_parallelizable": False,
    }

    def __init__(
        self,
        task: str | None = None,
        *,
        jobs: list[str] | tuple[str, ...] | None = None,
        allocation: str | None = None,
        split: str = "train",
        jitter: bool | float = True,
        render_mode: str | None = None,
    ) -> None:
        super().__init__()
        if render_mode is not None:
            raise ValueError(
                f"multijob: render_mode={render_mode!r}: this env renders nothing (None)"
            )
        self.task = resolve_task(task, jobs, allocation)
        self.allocation = self.task.allocation
        self._split, self._jitter = split, jitter
        self.jobs = [
            PowerTripEnv(JOBS[job].scenario(self.task.base), split=split, jitter=jitter)
            for job in self.task.jobs
        ]
        n = self.jobs[0].n_sites
        if len(self.jobs) > n:
            raise ValueError(
                f"multijob: {len(self.jobs)} jobs on {n} sites: K must be at most the number of "
                f"sites ({n}), so that the sites can be dealt out with one for each job"
            )
        self.n_sites = n
        self.site_names = self.jobs[0].site_names
        self.possible_agents = [f"job_{j}" for j in range(len(self.jobs))]
        self._index = {agent: j for j, agent in enumerate(self.possible_agents)}
        inner = self.jobs[0].observation_space
        low = np.concatenate([inner.low, np.zeros(2 * n, dtype=np.float32)])
        high = np.concatenate([inner.high, np.ones(2 * n, dtype=np.float32)])
        self.observation_spaces = {  # one space per agent: seeding one seeds no other
            a: gym.spaces.Box(low, high, dtype=np.float32) for a in self.possible_agents
        }
        self.action_spaces = {a: gym.spaces.MultiBinary(n) for a in self.possible_agents}
        self.render_mode = None
        self.np_random, _ = seeding.np_random(None)
        self._seeded = False

    @staticmethod
    def base_has_carbon(task: MultiJobTask) -> bool:
        """Whether ``task``'s sites have a grid carbon intensity series (else carbon is 0)."""
        return load_simulation(JOBS[task.jobs[0]].scenario(task.base)).params.carbon

    # ------------------------------------------------------------------ PettingZoo API

    def observation_space(self, agent: str) -> gym.spaces.Space:
        return self.observation_spaces[agent]

    def action_space(self, agent: str) -> gym.spaces.Space:
        return self.action_spaces[agent]

    def reset(self, seed: int | None = None, options: dict[str, Any] | None = None) -> None:
        """A new episode: arrivals drawn (exponential, the task's mean), the first job's start
        drawn from the split's rows where every job's whole budget fits (``start_window``), or
        ``options={"start_time": ...}`` (as the single-job env's), and each job's env reset at
        that start plus its arrival, with a seed drawn from this episode's generator. Other
        options are ignored (PettingZoo's API test passes one of its own)."""
        if seed is not None or not self._seeded:
            self.np_random, _ = seeding.np_random(seed)
            self._seeded = True
        rng = self.np_random
        k, n = len(self.jobs), self.n_sites
        gaps = rng.exponential(self.task.mean_interarrival_s, size=k - 1)
        self.arrival_s = np.concatenate([[0.0], np.cumsum(gaps)])
        seeds = rng.integers(0, _SEED_LIMIT, size=k)
        given = (options or {}).get("start_time")
        if given is None:
            first, last = self.start_window()
            start = float(rng.integers(first, last + 1)) * self.jobs[0].params.interval_s
        else:
            start = self.jobs[0].starts.start_time(given)
        self._obs: list[np.ndarray] = []
        self.job_starts: list[tuple[int, float]] = []
        infos = []
        for j, job in enumerate(self.jobs):
            at = start + float(self.arrival_s[j])
            obs, info = job.reset(seed=int(seeds[j]), options={"start_time": at})
            self.job_starts.append((int(seeds[j]), at))
            self._obs.append(obs)
            infos.append(info)
        self._held = np.zeros((k, n))
        self._held_until = np.zeros(k)
        self._wanted = np.zeros((k, n))
        self._done = np.zeros(k, dtype=bool)
        self._tta_h = np.full(k, np.nan)
        self._last_info = infos
        self._offers: dict[int, np.ndarray] = {}  # each job's offers until the next round
        self._energy = np.zeros(k)
        self._carbon = np.zeros(k)
        self.agents = list(self.possible_agents)
        self.rewards = dict.fromkeys(self.agents, 0.0)
        self._cumulative_rewards = dict.fromkeys(self.agents, 0.0)
        self.terminations = dict.fromkeys(self.agents, False)
        self.truncations = dict.fromkeys(self.agents, False)
        self.infos = {
            a: self._job_info(j, infos[j], np.zeros(n)) for j, a in enumerate(self.agents)
        }
        self.agent_selection = self._next_agent()

    def observe(self, agent: str) -> np.ndarray:
        j = self._index[agent]
        others = self._active()
        others[j] = False
        wanting = self._wanted[others].sum(axis=0) / max(len(self.jobs) - 1, 1)
        extra = np.concatenate([self.offers(agent), wanting]).astype(np.float32)
        return np.concatenate([self._obs[j], extra])

    def step(self, action: Any) -> None:
        agent = self.agent_selection
        if self.terminations[agent] or self.truncations[agent]:
            self._was_dead_step(action)
            return
        self._cumulative_rewards[agent] = 0.0  # last() gave it what it earned since its turn
        j = self._index[agent]
        job = self.jobs[j]
        mask = self._checked(action, agent)
        share = self.offers(agent)
        job.state = job.state.replace(shares=share)
        obs, reward, terminated, truncated, info = job.step(mask)
        job.state = job.state.replace(shares=1.0)  # what-ifs between rounds: the job alone
        self._obs[j] = obs
        selected = np.asarray(info["selected"], dtype=bool)[: self.n_sites]
        self._held[j] = np.where(selected, share, 0.0)
        self._held_until[j] = self.clock_s(agent)
        self._wanted[j] = mask
        self._last_info[j] = info
        self._energy[j] = info["energy_kwh"]
        self._carbon[j] = info["carbon_kg"]
        self._offers.clear()  # a round changes what every job would be offered
        self._clear_rewards()
        self.rewards[agent] = float(reward)
        if terminated or truncated:
            self._done[j] = True
            self._tta_h[j] = float(info["tta_h"])
            self._wanted[j] = 0.0  # its last lease runs out with its round; it asks no more
        self.terminations[agent] = bool(terminated)
        self.truncations[agent] = bool(truncated)
        self.infos[agent] = self._job_info(j, info, self._held[j])
        self._accumulate_rewards()
        following = self._next_agent()
        if terminated or truncated:  # its last step comes next, then the next job's
            self._skip_agent_selection = following
            self.agent_selection = agent
        else:
            self.agent_selection = following

    def render(self) -> None:
        return None

    def close(self) -> None:
        for job in self.jobs:
            job.close()

    # ------------------------------------------------------------------ what rules read

    def job(self, agent: str) -> PowerTripEnv:
        """The single-job env of ``agent``: what its rules read (``decision_view``,
        ``predict_round``, ...), as a lone job's rules read the single-job env. Step the
        multi-job env, never it."""
        return self.jobs[self._index[agent]]

    def start_window(self) -> tuple[int, int]:
        """The trace rows (first, last, inclusive) the first job may start at so that every
        job, starting at that row plus its arrival, has its whole time budget in the split's
        days (each job's own start range, ``EpisodeStarts.rows``, moved back by its arrival)."""
        iv = self.jobs[0].params.interval_s
        pairs = list(zip(self.jobs, self.arrival_s, strict=True))
        lo = max(job.starts.rows[0] * iv - a for job, a in pairs)
        hi = min((job.starts.rows[1] - 1) * iv - a for job, a in pairs)
        first, last = int(np.ceil(lo / iv)), int(np.floor(hi / iv))
        if first > last:
            raise ValueError(
                f"multijob: the jobs' arrivals span {s_to_h(self.arrival_s[-1]):.1f} h, so no "
                f"start in the split {self._split!r} leaves every job its time budget"
            )
        return first, last

    def alone(self, agent: str) -> tuple[PowerTripEnv, int, dict[str, Any]]:
        """A fresh single-job env of ``agent``'s job with the seed and options that start the
        episode this job has here, alone on all the power (the lower bound's episodes):
        ``env.reset(seed=seed, options=options)``."""
        j = self._index[agent]
        seed, start = self.job_starts[j]
        lone = PowerTripEnv(self.jobs[j].scenario, split=self._split, jitter=self._jitter)
        return lone, seed, {"start_time": start}

    def clock_s(self, agent: str) -> float:
        """The job's clock: the end of its latest round, or its arrival (s since row 0)."""
        return float(self.jobs[self._index[agent]].state.time_s[0])

    def offers(self, agent: str) -> np.ndarray:
        """(N,) the share of each site's powered GPUs ``agent`` would hold if it asked now."""
        j = self._index[agent]
        cached = self._offers.get(j)
        if cached is None:
            cached = allocation_offers(
                self.allocation, j, self.clock_s(agent), self._held, self._held_until,
                self._wanted, self._active(),
            )  # fmt: skip
            self._offers[j] = cached
        return cached.copy()

    def wanted(self) -> dict[str, np.ndarray]:
        """The sites each unfinished job asked for in its latest round (none before its first)."""
        return {a: self._wanted[self._index[a]] > 0.0 for a in self.agents}

    def job_results(self) -> dict[str, np.ndarray]:
        """(K,) per job, as its latest info says: TTA (h; NaN until it ends), arrival (h from
        the first job's), energy (kWh), carbon (kg) and whether it reached its target."""
        return {
            "tta_h": self._tta_h.copy(),
            "arrival_h": s_to_h(self.arrival_s),
            "energy_kwh": self._energy.copy(),
            "carbon_kg": self._carbon.copy(),
            "success": np.array([bool(i["success"]) for i in self._last_info]),
        }

    def team_metrics(self) -> dict[str, float]:
        """The jobs' mean TTA, the makespan (the last job's end, from the first arrival), the
        energy and the carbon so far; the TTAs over the finished jobs, 0.0 before any finishes
        (as a single-job info's ``tta_h`` before its episode ends)."""
        done = self._done
        any_done = bool(done.any())
        tta = self._tta_h[done]
        return {
            "mean_tta_h": float(tta.mean()) if any_done else 0.0,
            "makespan_h": float((s_to_h(self.arrival_s[done]) + tta).max()) if any_done else 0.0,
            "jobs_done": int(done.sum()),
            "energy_kwh": float(self._energy.sum()),
            "carbon_kg": float(self._carbon.sum()),
        }

    # ------------------------------------------------------------------ helpers

    def _active(self) -> np.ndarray:
        """(K,) the jobs not finished (one that has not arrived has asked for nothing yet)."""
        return ~self._done

    def _next_agent(self) -> str:
        live = [j for j in range(len(self.jobs)) if not self._done[j]]
        if not live:
            return self.agent_selection
        clocks = [self.clock_s(self.possible_agents[j]) for j in live]
        return self.possible_agents[live[int(np.argmin(clocks))]]

    def _checked(self, action: Any, agent: str) -> np.ndarray:
        """The job's action as a 0/1 mask, checked by its single-job env's own rule before
        anything of the round is written."""
        job = self.jobs[self._index[agent]]
        try:
            mask = job.interface.as_masks(action, job.action_space, None)[0]
        except ValueError:
            raise ValueError(
                f"multijob: action {action!r} of {agent}: give {self.n_sites} values, each 0 "
                "or 1 (MultiBinary(N): the sites of the job's round)"
            ) from None
        return mask.astype(np.int8)

    def _job_info(self, j: int, info: dict[str, Any], held: np.ndarray) -> dict[str, Any]:
        return {
            **info,
            "arrival_h": float(s_to_h(self.arrival_s[j])),
            "allocation": held.copy(),
            "team": self.team_metrics(),
        }
