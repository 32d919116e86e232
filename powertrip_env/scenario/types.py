"""The typed scenario: sites, GPU types, workload, network, episode, power files and learner.

Every class here is frozen and holds values already checked by the loader
(``powertrip_env.scenario.loading``), so the simulator never has to second-guess its inputs.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from powertrip_env.dynamics.layout import PROCESSES, SPREAD_FIELDS
from powertrip_env.units import S_PER_DAY, h_to_s


@dataclass(frozen=True)
class GpuType:
    """One accelerator model from the GPU catalogue (docs/references.md, "GPUs")."""

    name: str
    tflops_bf16: float  # dense BF16/FP16 tensor TFLOPS
    power_w: float  # board power
    memory_gb: float


@dataclass(frozen=True)
class Site:
    """A datacenter that may take part in a round."""

    name: str
    region: str
    latitude: float
    longitude: float
    gpu: str
    gpu_count: int
    capacity_kw: float  # power domain available to this job's kind of load
    pue: float
    wan_gbps: float
    data_share: float
    trace_column: str
    pv_kw: float = 0.0  # peak output of on-site solar; adds pv_kw · s(t) to the available power
    pv_column: str = ""  # the PV trace's column for s(t) (fraction of peak), if pv_kw > 0
    utc_offset_h: float | None = None  # civil time zone, for replaying a grid trace in local time
    carbon_zone: str = ""  # the grid zone of the carbon intensity file ([trace] carbon_file)

    @property
    def has_pv(self) -> bool:
        return self.pv_kw > 0.0


@dataclass(frozen=True)
class Workload:
    """What is trained: cost per sample, update size, batch sizes and the learning surrogate."""

    name: str
    flops_per_sample: float
    model_bytes: float  # size of the update exchanged each round (the pseudo-gradient)
    site_batch: int  # samples per local step at one site
    local_steps: int  # local steps per round
    mfu: float  # model FLOPs utilisation (docs/references.md: 30-50% for large models)
    eta_local: float  # discount of a local-SGD step against a true large-batch step
    noise_b0: float  # gradient noise scale B_noise at P = 0 (samples)
    noise_p_b: float  # progress over which B_noise grows: B0 * (1 + P / P_B) ** gamma
    noise_gamma: float
    a0: float  # accuracy at P = 0
    a_max: float  # asymptotic accuracy
    a_target: float  # the episode's target a*
    p0: float  # progress scale of the accuracy curve
    alpha: float  # exponent of the accuracy curve
    non_iid: float  # 0 = replicated/IID data; 1 = leaving sites out loses their share entirely
    coverage_tau_rounds: float  # rounds after which an absent site's data is mostly forgotten
    coverage_ceiling: float  # κ: the accuracy ceiling falls as coverage^κ (0: no effect)
    round_mode: str  # "fixed_quota" (default) or "fixed_time"
    round_s: float  # compute seconds per round in "fixed_time" mode
    grace: float | None = None  # fixed_time: a slow window stops at (1 + grace) · round_s
    state_bytes: float | None = None  # what a joining site fetches; None: model_bytes
    parameters: float | None = None  # the model's parameter count (the fidelity report's N)


@dataclass(frozen=True)
class Network:
    """Latency and bandwidth model (docs/model.md)."""

    hub: str  # name of the aggregator site, or of an extra location
    hub_latitude: float
    hub_longitude: float
    hub_gbps: float
    base_ms: float
    route_factor: float
    fiber_km_per_ms: float
    rtt_factor: float  # round trips a round costs (handshakes, gRPC exchanges, TCP windows)
    aggregation_s: float
    join_fixed_s: float  # a joining site's fixed cost (allocate GPUs, start); plus M / bw_i
    rtt_to_hub_ms: tuple[float, ...] | None  # measured RTTs, overriding the distance model
    allreduce: str = "hub"  # "hub": every update through the aggregator; "ring": ring all-reduce
    join_mode: str = "blocking"  # "blocking": the round waits for a joiner; or "non_blocking"


# An episode's round limit unless its scenario sets [episode] max_rounds; the registered IDs'
# max_episode_steps is the same number, so TimeLimit and the simulation end an episode alike.
DEFAULT_MAX_ROUNDS = 1000


@dataclass(frozen=True)
class Episode:
    """Episode length, reference time and the simulator's nuisance parameters."""

    time_budget_h: float
    max_rounds: int
    h_ref_h: float  # reference time-to-accuracy: the return is 1 - TTA / H_ref on success
    idle_s: float  # clock advance of a round with no site (0 = one trace interval)
    jitter_sigma: float  # log-normal sigma of compute and network times
    server_overhead: float  # wall power of a server per watt of GPU board power
    idle_fraction: float  # draw of a joined-but-waiting GPU, as a fraction of its busy draw
    train_days: tuple[int, int]
    test_days: tuple[int, int]
    # The carbon objective's scale (kg CO2eq; 0: the scenario poses none): the return of the
    # "carbon" reward is −carbon / carbon_ref_kg, and −1 more for missing the deadline.
    carbon_ref_kg: float = 0.0
    # A deadline per episode (0: every episode's is ``time_budget_h``): this slack times an
    # estimate of the episode's time to accuracy made at its start, from the compute its sites
    # offered the day before against the train days' (``dynamics.params.episode_budgets``);
    # ``deadline_ref_h`` is the best time to accuracy found on the train days, and
    # ``time_budget_h`` caps the deadline.
    deadline_slack: float = 0.0
    deadline_ref_h: float = 0.0


# The carbon intensity a scenario charges grid energy with (docs/data.md, "Carbon intensity"):
# life-cycle (Electricity Maps' headline figure) or direct (generation only).
CARBON_KINDS = ("lca", "direct")


@dataclass(frozen=True)
class TraceFiles:
    """The power data of a scenario and how it is laid on the episode's calendar."""

    file: Path  # grid utilisation u(t) per power domain
    pv_file: Path | None = None  # PV output s(t) as a fraction of peak
    pv_forecast_file: Path | None = None  # forecasts of s(t), issued every interval
    shift_days: int = 0  # the grid trace is replayed this many days later
    utc_offset_h: float | None = None  # the grid trace's time zone; set: shift to local time
    carbon_file: Path | None = None  # hourly grid carbon intensity per zone (gCO2eq/kWh)
    carbon_kind: str = "lca"  # its "lca" (life-cycle) or "direct" columns

    def site_shift_s(self, site: Site) -> int:
        """Seconds by which ``site`` reads the grid trace ahead of the episode clock.

        A site reads, at episode time t, the grid value recorded at ``t − shift_days +
        (site's UTC offset − the trace's UTC offset)``: the recording's local time of day lands
        on the site's local time of day (docs/model.md, "Power").
        """
        lead_h = 0.0
        if self.utc_offset_h is not None and site.utc_offset_h is not None:
            lead_h = site.utc_offset_h - self.utc_offset_h
        return round(h_to_s(lead_h)) - self.shift_days * S_PER_DAY


@dataclass(frozen=True)
class LearnerConfig:
    """How the real learner (``learner="torch"``) trains; the surrogate ignores it.

    The defaults train a one-hidden-layer MLP on scikit-learn's digits with FedAvg.
    """

    dataset: str = "digits"  # the shipped data set the sites' shards are cut from
    hidden: int = 32  # width of the MLP's hidden layer
    lr: float = 0.1  # SGD step size of the sites' local steps
    aggregation: str = "fedavg"  # "fedavg", or "diloco": an outer Nesterov step on the mean delta
    outer_lr: float = 0.7  # DiLoCo's outer learning rate
    outer_momentum: float = 0.9  # DiLoCo's outer Nesterov momentum
    dirichlet_alpha: float = 0.0  # label skew of the shards (smaller: more skewed); 0: IID
    test_fraction: float = 0.2  # share of the data held out to measure accuracy
    data_seed: int = 0  # seeds the held-out split and the shards (the episode seeds the model)


@dataclass(frozen=True)
class UnknownSpreads:
    """``[unknowns]``: how far this job's world may depart from the values the scenario states:
    the spreads the factors are drawn with, not the factors (``dynamics.UnknownFactors``).

    At each reset the episode draws, from its seed, a factor per site on its throughput, RTT,
    bandwidth and join time and two on the job's progress curve: log-normal with these σ
    (median 1), a site a slow outlier with ``slow_probability`` (its throughput divided by
    ``slow_factor``). Policies are told the stated values and must measure the rest
    (docs/model.md, "What is unknown"). All zero, the default, is the known track.
    """

    throughput_sigma: float = 0.0
    slow_probability: float = 0.0
    slow_factor: float = 1.0
    rtt_sigma: float = 0.0
    bandwidth_sigma: float = 0.0
    join_sigma: float = 0.0
    pace_sigma: float = 0.0
    noise_sigma: float = 0.0

    @property
    def drawn(self) -> bool:
        """Whether episodes draw anything: the measured track."""
        sigmas = (getattr(self, f) for f in SPREAD_FIELDS if f.endswith("_sigma"))
        outliers = self.slow_probability > 0.0 and self.slow_factor > 1.0
        return outliers or any(v > 0.0 for v in sigmas)

    def spreads(self) -> tuple[float, ...]:
        """The values in ``SPREAD_FIELDS`` order, as the draw takes them (the slow factor as
        given)."""
        return tuple(float(getattr(self, f)) for f in SPREAD_FIELDS)


@dataclass(frozen=True)
class MovingProcesses:
    """``[moving]``: what moves while the job runs, per site (docs/moving.md).

    Three processes, each calm or in an event, with exponentially distributed phases: a
    fail-slow divides the site's throughput by ``slow_factor``; a link excursion leaves its WAN
    bandwidth ``1 − link_depth`` of itself; a power callback takes ``callback_depth`` of its spare
    power, and so of the GPUs it can run. Each starts ``*_per_day`` times a day per site on
    average while calm and lasts ``*_hours`` on average. A rate of 0, the default, turns the
    process off; all off is the static world of the known and measured tracks.
    """

    slow_per_day: float = 0.0
    slow_hours: float = 1.0
    slow_factor: float = 1.0
    link_per_day: float = 0.0
    link_hours: float = 1.0
    link_depth: float = 0.5
    callback_per_day: float = 0.0
    callback_hours: float = 1.0
    callback_depth: float = 0.25

    @property
    def on(self) -> bool:
        """Whether any process runs: the moving track."""
        return any(rate > 0.0 for rate, _, _ in self.processes())

    def processes(self) -> tuple[tuple[float, float, float], ...]:
        """(per day, hours, depth or factor) of each process, in layout.PROCESSES' order."""
        return (
            (self.slow_per_day, self.slow_hours, self.slow_factor),
            (self.link_per_day, self.link_hours, self.link_depth),
            (self.callback_per_day, self.callback_hours, self.callback_depth),
        )

    def constants(self) -> dict[str, float]:
        """The kernel's scalars (layout.CONSTS, from ``slow_rate_per_s`` to ``moving``)."""
        out: dict[str, float] = {}
        for name, (per_day, hours, depth) in zip(PROCESSES, self.processes(), strict=True):
            out[f"{name}_rate_per_s"] = per_day / S_PER_DAY
            out[f"{name}_mean_s"] = h_to_s(hours)
            out[f"{name}_{'factor' if name == 'slow' else 'depth'}"] = depth
        out["moving"] = float(self.on)
        return out


@dataclass(frozen=True)
class Scenario:
    """A complete, validated scenario."""

    name: str
    description: str
    source: str  # the file it came from, for messages
    sites: tuple[Site, ...]
    gpus: dict[str, GpuType]
    workload: Workload
    network: Network
    episode: Episode
    trace: TraceFiles
    hub_index: int = field(default=-1)  # index of the hub among sites, -1 if it is extra
    inputs: tuple[Path, ...] = ()  # every file the scenario was read from (cache validation)
    sites_source: str = ""  # where the sites are written: the catalogue CSV or the TOML
    learner: LearnerConfig = field(default_factory=LearnerConfig)
    unknowns: UnknownSpreads = field(default_factory=UnknownSpreads)  # off: the known track
    moving: MovingProcesses = field(default_factory=MovingProcesses)  # off: a static world

    @property
    def trace_file(self) -> Path:
        """The grid trace (kept for callers that only need the one file)."""
        return self.trace.file

    @property
    def n_sites(self) -> int:
        return len(self.sites)

    def __str__(self) -> str:
        gpu_mix = sorted({s.gpu for s in self.sites})
        regions = sorted({s.region for s in self.sites})
        return (
            f"Scenario {self.name!r}: {self.n_sites} sites in {len(regions)} regions "
            f"({', '.join(regions)}), GPUs {', '.join(gpu_mix)}; workload "
            f"{self.workload.name}; hub {self.network.hub}; trace {self.trace.file.name}"
            + (f", PV {self.trace.pv_file.name}" if self.trace.pv_file else "")
        )
