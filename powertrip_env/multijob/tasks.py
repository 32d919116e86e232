"""The multi-job track's tasks: which sites and power the jobs share, which jobs, how they arrive
and how a site's GPUs are split among the jobs that ask for it.

A task is a name and a ``MultiJobTask``, registered in ``TASKS`` like the single-job IDs
(versioned: a change that moves its numbers gets a new version). Each job is a workload of the
shipped scenarios on the task's sites (``JOBS``: the job's scenario file in ``jobs/``, whose own
tables come from that workload's scenario and whose sites, GPUs, power and calendar are the
base's). docs/multijob.md gives the model and the sources.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from powertrip_env.scenario import scenario_path
from powertrip_env.units import S_PER_DAY

ALLOCATIONS = ("fcfs", "proportional")
"""How a site's powered GPUs go to the jobs that ask for it (``allocation.offers``)."""

# Job arrivals: Microsoft's Philly trace (Jeon et al., USENIX ATC '19; docs/references.md,
# "Several jobs sharing power") holds 117,325 jobs submitted from 2017-08-07 to 2017-12-22, 138
# days: one every 101.6 s on average. The track draws exponential inter-arrival times of that
# mean (a Poisson process: the trace's mean, not its shape).
PHILLY_JOBS = 117_325
PHILLY_DAYS = 138
PHILLY_INTERARRIVAL_S = PHILLY_DAYS * S_PER_DAY / PHILLY_JOBS

_JOBS_DIR = Path(__file__).resolve().parent / "jobs"


@dataclass(frozen=True)
class JobWorkload:
    """A job of the track: its name, the shipped scenario it takes its workload from, and its
    scenario file on each base (``None``: the base's own job, the flagship's 1.1B DiLoCo)."""

    name: str
    source: str
    files: dict[str, str | None]

    def scenario(self, base: str) -> str:
        """The scenario a job of this workload runs on ``base``'s sites and power."""
        file = self.files[base]
        return str(scenario_path(base)) if file is None else str(_JOBS_DIR / file)


JOBS: dict[str, JobWorkload] = {
    "diloco": JobWorkload("diloco", "default", {"default": None, "wide": None}),
    "lora": JobWorkload("lora", "lora", {"default": "lora.toml", "wide": "wide-lora.toml"}),
    "opt": JobWorkload("opt", "llm-full", {"default": "opt.toml", "wide": "wide-opt.toml"}),
}
"""The jobs a task may hold, by name: the flagship's 1.1B DiLoCo pretraining (about 26 h alone on
the flagship under HorizonRule), the LLaMA-2-7B LoRA fine-tune (about 1.5 h) and the
full-parameter OPT-1.3B (about 3.4 h)."""
BASES = ("default", "wide")
"""The scenarios whose sites a task may share: every job has a scenario file on each."""


@dataclass(frozen=True)
class MultiJobTask:
    """A multi-job task: the base scenario whose sites and power the jobs share, the jobs (in
    arrival order), the allocation rule and the mean inter-arrival time (s)."""

    name: str
    base: str
    jobs: tuple[str, ...]
    allocation: str = "proportional"
    mean_interarrival_s: float = PHILLY_INTERARRIVAL_S
    description: str = ""


TASKS: dict[str, MultiJobTask] = {}
"""Every multi-job task by name, in the order of registration."""


def check_task(task: MultiJobTask, where: str) -> MultiJobTask:
    """``task`` if it can run: a base with the jobs' scenario files, at least one job, every
    job known, a known allocation rule; else one ``ValueError`` (``where`` opens it) naming
    the value and what is allowed."""
    if task.base not in BASES:
        raise ValueError(f"{where}: base={task.base!r} is not a base; allowed: {list(BASES)}")
    if not task.jobs:
        raise ValueError(f"{where}: jobs=[]: a task needs at least one job")
    unknown = [job for job in task.jobs if job not in JOBS]
    if unknown:
        raise ValueError(
            f"{where}: jobs={list(task.jobs)!r}: {unknown[0]!r} is not a job; allowed: "
            f"{sorted(JOBS)}"
        )
    if task.allocation not in ALLOCATIONS:
        raise ValueError(
            f"{where}: allocation={task.allocation!r} is not a rule; allowed: {list(ALLOCATIONS)}"
        )
    return task


def register_multijob(task: MultiJobTask) -> None:
    """Add ``task`` to ``TASKS``; a name registered twice, or a task ``check_task`` refuses,
    is refused."""
    if task.name in TASKS:
        raise ValueError(f"multi-job task {task.name!r} is registered already")
    TASKS[task.name] = check_task(task, f"multi-job task {task.name!r}")


register_multijob(
    MultiJobTask(
        "PowerTrip-MultiJob-v0",
        base="default",
        jobs=("diloco", "lora", "opt"),
        description="three jobs (DiLoCo 1.1B, LoRA 7B, OPT-1.3B) on the flagship's ten sites",
    )
)
register_multijob(
    MultiJobTask(
        "PowerTrip-Wide-MultiJob-v0",
        base="wide",
        jobs=("diloco", "lora", "opt", "diloco", "lora", "opt"),
        description="six jobs, two of each workload, on the 24-site catalogue",
    )
)
DEFAULT_TASK = "PowerTrip-MultiJob-v0"
