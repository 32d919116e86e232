"""Typed, validated scenario description: sites, GPU types, workload, network and episode.

A scenario is a TOML file (see ``powertrip_env/scenarios/default.toml`` for a fully commented
one). Sites and GPUs may come from CSV catalogues (``traces/sites_*.csv``, ``traces/gpus.csv``)
or be written inline, so a user's scenario can be one self-contained file. Everything is checked
here, at load time, so that the simulator never has to second-guess its inputs: a bad value is
reported with the file, the field, the value and what is allowed.
"""

from __future__ import annotations

import csv
import difflib
import math
import os
import tomllib
import warnings
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from powertrip_env.errors import ScenarioError

_PACKAGE_DIR = Path(__file__).resolve().parent
SCENARIO_DIR = _PACKAGE_DIR / "scenarios"


def data_dir() -> Path:
    """Where the shipped catalogues and traces live.

    In an installed wheel they travel inside the package (``powertrip_env/_data``); in a source
    checkout (and an editable install) they are the repository's ``traces/`` folder.
    """
    for candidate in (_PACKAGE_DIR / "_data", _PACKAGE_DIR.parent / "traces"):
        if (candidate / "gpus.csv").is_file():
            return candidate
    raise ScenarioError(
        f"the packaged data folder was not found (looked in {_PACKAGE_DIR / '_data'} and "
        f"{_PACKAGE_DIR.parent / 'traces'}); reinstall powertrip-env"
    )


# --------------------------------------------------------------------------- dataclasses


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


@dataclass(frozen=True)
class TraceFiles:
    """The power data of a scenario and how it is laid on the episode's calendar."""

    file: Path  # grid utilisation u(t) per power domain
    pv_file: Path | None = None  # PV output s(t) as a fraction of peak
    pv_forecast_file: Path | None = None  # forecasts of s(t), issued every interval
    shift_days: int = 0  # the grid trace is replayed this many days later
    utc_offset_h: float | None = None  # the grid trace's time zone; set: shift to local time

    def site_shift_s(self, site: Site) -> int:
        """Seconds by which ``site`` reads the grid trace ahead of the episode clock.

        A site reads, at episode time t, the grid value recorded at ``t − shift_days +
        (site's UTC offset − the trace's UTC offset)``: the recording's local time of day lands
        on the site's local time of day (docs/model.md, "Power").
        """
        lead_h = 0.0
        if self.utc_offset_h is not None and site.utc_offset_h is not None:
            lead_h = site.utc_offset_h - self.utc_offset_h
        return round(lead_h * 3600.0) - self.shift_days * 86_400


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


# --------------------------------------------------------------------------- field reading

_REQUIRED = object()


class _Table:
    """Reads typed, range-checked fields out of one TOML table, naming the file in errors.

    ``lineage`` (for a scenario that ``extends`` another) lets a message say which base file
    wrote an inherited value, and why a base's value the user may expect was not inherited.
    """

    def __init__(
        self, data: dict[str, Any], source: str, section: str, lineage: _Lineage | None = None
    ) -> None:
        if not isinstance(data, dict):
            raise ScenarioError(f"{source}: [{section}] must be a table, got {data!r}")
        self.data = data
        self.source = source
        self.section = section
        self.lineage = lineage
        self.used: set[str] = set()

    def _where(self, key: str) -> str:
        origin = self.lineage.inherited.get((self.section, key)) if self.lineage else None
        inherited = f" (inherited from {origin} through 'extends')" if origin else ""
        return f"{self.source}: [{self.section}] field {key!r}{inherited}"

    def dropped(self, key: str) -> str:
        """Why the base's ``key`` was not inherited, as a clause to append; "" if it was not."""
        return self.lineage.dropped.get((self.section, key), "") if self.lineage else ""

    def has(self, key: str) -> bool:
        return key in self.data

    def raw(self, key: str, default: Any = _REQUIRED) -> Any:
        self.used.add(key)
        if key not in self.data:
            if default is _REQUIRED:
                raise ScenarioError(
                    f"{self._where(key)} is missing; it is required{self.dropped(key)}"
                )
            return default
        return self.data[key]

    def number(
        self,
        key: str,
        default: Any = _REQUIRED,
        *,
        lo: float | None = None,
        hi: float | None = None,
        lo_open: bool = False,
    ) -> float:
        value = self.raw(key, default)
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise ScenarioError(f"{self._where(key)} = {value!r}: must be a number")
        value = float(value)
        if not math.isfinite(value):
            raise ScenarioError(f"{self._where(key)} = {value!r}: must be finite")
        _check_range(self._where(key), value, lo, hi, lo_open)
        return value

    def integer(self, key: str, default: Any = _REQUIRED, *, lo: int = 0) -> int:
        value = self.raw(key, default)
        if isinstance(value, bool) or not isinstance(value, int):
            raise ScenarioError(f"{self._where(key)} = {value!r}: must be an integer")
        if value < lo:
            raise ScenarioError(f"{self._where(key)} = {value!r}: must be >= {lo}")
        return int(value)

    def string(self, key: str, default: Any = _REQUIRED, *, choices: tuple[str, ...] = ()) -> str:
        value = self.raw(key, default)
        if not isinstance(value, str) or not value:
            raise ScenarioError(f"{self._where(key)} = {value!r}: must be a non-empty string")
        if choices and value not in choices:
            raise ScenarioError(f"{self._where(key)} = {value!r}: must be one of {choices}")
        return value

    def day_range(self, key: str, default: tuple[int, int]) -> tuple[int, int]:
        value = self.raw(key, list(default))
        if (
            not isinstance(value, list)
            or len(value) != 2
            or not all(isinstance(v, int) and not isinstance(v, bool) for v in value)
            or not 1 <= value[0] <= value[1]
        ):
            raise ScenarioError(
                f"{self._where(key)} = {value!r}: must be [first_day, last_day], "
                "1-based whole days with first <= last"
            )
        return int(value[0]), int(value[1])

    def finish(self) -> None:
        """Unknown keys are almost always typos; name them instead of ignoring them."""
        unknown = sorted(set(self.data) - self.used)
        if unknown:
            raise ScenarioError(
                f"{self.source}: [{self.section}] has unknown field(s) {unknown}; "
                f"allowed: {sorted(self.used)}"
            )


def _check_range(
    where: str, value: float, lo: float | None, hi: float | None, lo_open: bool = False
) -> None:
    if lo is not None and (value <= lo if lo_open else value < lo):
        bound = f"> {lo:g}" if lo_open else f">= {lo:g}"
        raise ScenarioError(f"{where} = {value!r}: must be {bound}")
    if hi is not None and value > hi:
        raise ScenarioError(f"{where} = {value!r}: must be <= {hi:g}")


# --------------------------------------------------------------------------- catalogues


def _read_csv_rows(path: Path, required: tuple[str, ...], what: str) -> list[dict[str, str]]:
    """Rows of a catalogue as dicts of stripped cells.

    Catalogues are often edited in spreadsheets: Excel's "CSV UTF-8" starts the file with a
    byte-order mark (``utf-8-sig`` drops it), and hand-written headers such as ``name, region``
    carry spaces after the commas. Both would otherwise hide a column that is plainly there.
    """
    try:
        with path.open(newline="", encoding="utf-8-sig") as fh:
            reader = csv.DictReader(fh)
            header = [h.strip() for h in reader.fieldnames or []]
            reader.fieldnames = header
            rows = [
                {k: v.strip() if isinstance(v, str) else v for k, v in row.items()}
                for row in reader
            ]
    except OSError as exc:
        raise ScenarioError(f"{path}: cannot read {what}: {exc.strerror or exc}") from None
    except (UnicodeDecodeError, csv.Error) as exc:
        raise ScenarioError(f"{path}: {what} is not a readable CSV file: {exc}") from None
    if not rows:
        raise ScenarioError(f"{path}: {what} is empty; expected a header and at least one row")
    missing = [c for c in required if c not in header]
    if missing:
        raise ScenarioError(
            f"{path}: {what} is missing column(s) {missing}; required: {list(required)}; "
            f"the header has {header}"
        )
    return rows


def _csv_value(path: Path, row_no: int, column: str, text: str | None, kind: type) -> Any:
    where = f"{path}: row {row_no}, column {column!r}"
    if text is None or text.strip() == "":
        raise ScenarioError(f"{where} is empty; a {kind.__name__} is required")
    try:
        value = kind(text)
    except ValueError:
        raise ScenarioError(f"{where} = {text!r}: must be a {kind.__name__}") from None
    if kind is float and not math.isfinite(value):
        raise ScenarioError(f"{where} = {text!r}: must be finite")
    return value


_GPU_COLUMNS = ("name", "tflops_bf16", "power_w", "memory_gb")


def load_gpu_catalogue(path: Path) -> dict[str, GpuType]:
    """Read ``gpus.csv``: the accelerator models a site may name."""
    rows = _read_csv_rows(path, _GPU_COLUMNS, "GPU catalogue")
    gpus: dict[str, GpuType] = {}
    for i, row in enumerate(rows, start=2):  # row 1 is the header
        name = (row["name"] or "").strip()
        if not name:
            raise ScenarioError(f"{path}: row {i}, column 'name' is empty")
        if name in gpus:
            raise ScenarioError(f"{path}: row {i}, column 'name' = {name!r} appears twice")
        values = {c: _csv_value(path, i, c, row[c], float) for c in _GPU_COLUMNS[1:]}
        for column, value in values.items():
            if value <= 0:
                raise ScenarioError(f"{path}: row {i}, column {column!r} = {value!r}: must be > 0")
        gpus[name] = GpuType(name=name, **values)
    return gpus


SITE_FIELDS = (
    "name", "region", "latitude", "longitude", "gpu", "gpu_count", "capacity_kw", "pue",
    "wan_gbps", "data_share", "trace_column",
)  # fmt: skip
SITE_KINDS: dict[str, type] = {
    "name": str, "region": str, "latitude": float, "longitude": float, "gpu": str,
    "gpu_count": int, "capacity_kw": float, "pue": float, "wan_gbps": float,
    "data_share": float, "trace_column": str,
}  # fmt: skip
_SITE_RANGES: dict[str, tuple[float | None, float | None, bool]] = {
    "latitude": (-90.0, 90.0, False),
    "longitude": (-180.0, 180.0, False),
    "gpu_count": (1, None, False),
    "capacity_kw": (0.0, None, True),
    "pue": (1.0, 3.0, False),
    "wan_gbps": (0.0, None, True),
    "data_share": (0.0, 1.0, False),
    "pv_kw": (0.0, None, False),
    "utc_offset_h": (-12.0, 14.0, False),
}
# Columns a catalogue may leave out, with their defaults (None: not given).
OPTIONAL_SITE_FIELDS: dict[str, tuple[type, Any]] = {
    "pv_kw": (float, 0.0),
    "pv_column": (str, ""),
    "utc_offset_h": (float, None),
}


def _make_site(values: dict[str, Any], where: str) -> Site:
    for key, (lo, hi, lo_open) in _SITE_RANGES.items():
        if values.get(key) is not None:
            _check_range(f"{where}, field {key!r}", float(values[key]), lo, hi, lo_open)
    for key in ("name", "region", "gpu", "trace_column"):
        if not values[key]:
            raise ScenarioError(f"{where}, field {key!r} is empty")
    if values.get("pv_kw", 0.0) > 0 and not values.get("pv_column"):
        raise ScenarioError(
            f"{where}, field 'pv_kw' = {values['pv_kw']!r}: a site with on-site solar needs "
            "'pv_column', the column of the PV trace ([trace] pv_file) that drives it"
        )
    return Site(**values)


def load_site_catalogue(path: str | os.PathLike[str]) -> list[Site]:
    """The validated sites of a site-catalogue CSV (traces/README.md documents the columns)."""
    return _sites_from_csv(Path(path))


def _sites_from_csv(path: Path) -> list[Site]:
    rows = _read_csv_rows(path, SITE_FIELDS, "site catalogue")
    sites = []
    for i, row in enumerate(rows, start=2):
        values = {}
        for column in SITE_FIELDS:
            kind = SITE_KINDS[column]
            if kind is str:
                values[column] = (row[column] or "").strip()
            else:
                values[column] = _csv_value(path, i, column, row[column], kind)
        for column, (kind, default) in OPTIONAL_SITE_FIELDS.items():
            text = (row.get(column) or "").strip()
            if not text:
                values[column] = default
            elif kind is str:
                values[column] = text
            else:
                values[column] = _csv_value(path, i, column, text, kind)
        sites.append(_make_site(values, f"{path}: row {i}"))
    return sites


def _sites_from_toml(entries: Any, source: str) -> list[Site]:
    if not isinstance(entries, list) or not entries:
        raise ScenarioError(
            f"{source}: [[sites.site]] must be a non-empty array of tables, got {entries!r}"
        )
    sites = []
    for i, entry in enumerate(entries):
        table = _Table(entry, source, f"sites.site #{i + 1}")
        values: dict[str, Any] = {}
        for key in SITE_FIELDS:
            kind = SITE_KINDS[key]
            if kind is str:
                values[key] = table.string(key)
            elif kind is int:
                values[key] = table.integer(key, lo=1)
            else:
                values[key] = table.number(key)
        for key, (kind, default) in OPTIONAL_SITE_FIELDS.items():
            if not table.has(key):
                values[key] = default
            elif kind is str:
                values[key] = table.string(key)
            else:
                values[key] = table.number(key)
        table.finish()
        sites.append(_make_site(values, f"{source}: [sites.site #{i + 1}]"))
    return sites


# --------------------------------------------------------------------------- scenario loading


def _resolve_file(name: str, scenario_path: Path, where: str) -> Path:
    """A data file named in a scenario: next to the scenario first, then the shipped data."""
    candidate = Path(os.path.expanduser(name))
    if candidate.is_absolute():
        options = [candidate]
    else:
        options = [scenario_path.parent / candidate, data_dir() / candidate]
    for option in options:
        if option.is_file():
            return option.resolve()
    raise ScenarioError(
        f"{where} = {name!r}: file not found (looked in {', '.join(str(o) for o in options)})"
    )


def scenario_names() -> list[str]:
    """The named scenarios that ship with the package."""
    return sorted(p.stem for p in SCENARIO_DIR.glob("*.toml"))


def scenario_path(name_or_path: str | os.PathLike[str]) -> Path:
    """Map a scenario name (``"default"``) or a path to the TOML file it means."""
    text = os.fspath(name_or_path)
    if text in scenario_names():
        return SCENARIO_DIR / f"{text}.toml"
    path = Path(os.path.expanduser(text))
    if path.suffix == ".toml" or os.sep in text or path.exists():
        if not path.is_file():
            raise ScenarioError(f"{path}: scenario file not found")
        return path.resolve()
    raise ScenarioError(
        f"unknown scenario {text!r}: give one of {scenario_names()} or the path of a .toml file"
    )


def load_scenario(name_or_path: str | os.PathLike[str]) -> Scenario:
    """Load and validate a named scenario or a user's TOML file.

    Data shares that sum to within ``SHARE_SUM_TOLERANCE`` of 1 are normalised with a
    ``UserWarning``; everything else that is wrong raises ``ScenarioError``.
    """
    path = scenario_path(name_or_path)
    source = str(path)
    doc = _read_toml(path, source)
    if not doc:
        raise ScenarioError(f"{source}: the scenario file is empty")
    tomls: list[Path] = [path]
    lineage = _Lineage()
    doc, path = _apply_extends(doc, path, source, seen=(str(path),), read=tomls, lineage=lineage)

    def table(key: str, default: Any = _REQUIRED) -> _Table:
        return _Table(top.raw(key, default), source, key, lineage)

    top = _Table(doc, source, "top level")
    name = top.string("name", path.stem)
    description = top.string("description", name)

    gpus_table = table("gpus", {})
    gpu_file = _resolve_file(
        gpus_table.string("catalogue", "gpus.csv"), path, f"{source}: [gpus] field 'catalogue'"
    )
    gpus_table.finish()
    gpus = load_gpu_catalogue(gpu_file)

    sites_table = table("sites")
    if sites_table.has("catalogue") == sites_table.has("site"):
        raise ScenarioError(
            f"{source}: [sites] must have exactly one of 'catalogue' (a CSV file) or "
            "[[sites.site]] tables"
        )
    if sites_table.has("catalogue"):
        site_file = _resolve_file(
            sites_table.string("catalogue"), path, f"{source}: [sites] field 'catalogue'"
        )
        sites = _sites_from_csv(site_file)
        share_field = f"{site_file}: field 'data_share'"
    else:
        site_file = path
        # Inline sites taken from a base are reported where they are written.
        written_in = lineage.inherited.get(("sites", "site"), source)
        sites = _sites_from_toml(sites_table.raw("site"), written_in)
        share_field = f"{written_in}: field 'data_share'"
    sites_source = str(site_file)
    shares = sites_table.raw("data_shares", None)
    if shares is not None:
        if (
            not isinstance(shares, list)
            or len(shares) != len(sites)
            or not all(isinstance(v, int | float) and not isinstance(v, bool) for v in shares)
        ):
            raise ScenarioError(
                f"{sites_table._where('data_shares')} = {shares!r}: must be a list of "
                f"{len(sites)} numbers (one per site, in site order) summing to 1"
            )
        sites = [
            _make_site({**vars(s), "data_share": float(v)}, f"{source}: [sites] data_shares")
            for s, v in zip(sites, shares, strict=True)
        ]
        site_file = path
        share_field = f"{sites_table._where('data_shares')} = {shares!r} (field 'data_share')"
    sites = _normalised_shares(sites, share_field)
    _check_sites(sites, gpus, str(site_file), source)

    trace_table = table("trace")
    trace = _load_trace_files(trace_table, path, sites)

    workload = _load_workload(table("workload"))
    network, hub_index = _load_network(table("network"), sites, sites_table)
    sites_table.finish()
    episode = _load_episode(table("episode", {}), trace_table)
    trace_table.finish()
    learner = load_learner_config(table("learner", {}))
    top.finish()
    data_files = [gpu_file, site_file, trace.file, trace.pv_file, trace.pv_forecast_file]
    inputs = dict.fromkeys([*tomls, *(f for f in data_files if f is not None)])
    return Scenario(
        name=name,
        description=description,
        source=source,
        sites=tuple(sites),
        gpus=gpus,
        workload=workload,
        network=network,
        episode=episode,
        trace=trace,
        hub_index=hub_index,
        inputs=tuple(inputs),
        sites_source=sites_source,
        learner=learner,
    )


DATASETS = ("digits",)
AGGREGATIONS = ("fedavg", "diloco")


def load_learner_config(t: _Table) -> LearnerConfig:
    """``[learner]``: the real learner's model, optimiser and data split (all optional)."""
    d = LearnerConfig()
    config = LearnerConfig(
        dataset=t.string("dataset", d.dataset, choices=DATASETS),
        hidden=t.integer("hidden", d.hidden, lo=1),
        lr=t.number("lr", d.lr, lo=0.0, lo_open=True, hi=10.0),
        aggregation=t.string("aggregation", d.aggregation, choices=AGGREGATIONS),
        outer_lr=t.number("outer_lr", d.outer_lr, lo=0.0, lo_open=True, hi=10.0),
        outer_momentum=t.number("outer_momentum", d.outer_momentum, lo=0.0, hi=0.999),
        dirichlet_alpha=t.number("dirichlet_alpha", d.dirichlet_alpha, lo=0.0),
        test_fraction=t.number("test_fraction", d.test_fraction, lo=0.05, hi=0.5),
        data_seed=t.integer("data_seed", d.data_seed, lo=0),
    )
    t.finish()
    return config


def _load_trace_files(t: _Table, path: Path, sites: list[Site]) -> TraceFiles:
    """``[trace]``: the grid trace, the optional PV trace and forecasts, and their calendar."""

    def optional_file(key: str) -> Path | None:
        if not t.has(key):
            return None
        return _resolve_file(t.string(key), path, f"{t.source}: [trace] field {key!r}")

    trace = TraceFiles(
        file=_resolve_file(t.string("file"), path, f"{t.source}: [trace] field 'file'"),
        pv_file=optional_file("pv_file"),
        pv_forecast_file=optional_file("pv_forecast_file"),
        shift_days=t.integer("shift_days", 0, lo=-100_000),
        utc_offset_h=t.number("utc_offset_h", lo=-12.0, hi=14.0) if t.has("utc_offset_h") else None,
    )
    if trace.pv_forecast_file is not None and trace.pv_file is None:
        raise ScenarioError(
            f"{t.source}: [trace] field 'pv_forecast_file' needs 'pv_file' too: forecasts "
            "complement the PV trace, they do not replace it"
        )
    solar = [s.name for s in sites if s.has_pv]
    if solar and trace.pv_file is None:
        raise ScenarioError(
            f"{t.source}: site(s) {solar} have pv_kw > 0 but [trace] has no 'pv_file' to drive "
            f"their solar output; add one or set pv_kw = 0{t.dropped('pv_file')}"
        )
    if trace.utc_offset_h is not None:
        missing = [s.name for s in sites if s.utc_offset_h is None]
        if missing:
            inherited = t.lineage is not None and ("trace", "utc_offset_h") in t.lineage.inherited
            own_file = (
                ", or write [trace] file in this file: the base's utc_offset_h describes the "
                "base's trace and is not inherited with a trace of your own"
                if inherited
                else ""
            )
            raise ScenarioError(
                f"{t._where('utc_offset_h')} = {trace.utc_offset_h!r} replays the grid trace in "
                f"each site's local time, so every site needs 'utc_offset_h'; missing for "
                f"{missing}: give those sites a utc_offset_h (in [-12, 14]){own_file}"
            )
    return trace


def _read_toml(path: Path, source: str) -> dict[str, Any]:
    try:
        with path.open("rb") as fh:
            return tomllib.load(fh)
    except OSError as exc:
        raise ScenarioError(f"{source}: cannot read scenario: {exc.strerror or exc}") from None
    except tomllib.TOMLDecodeError as exc:
        raise ScenarioError(f"{source}: not valid TOML: {exc}") from None


_FILE_KEYS = ("catalogue", "file", "pv_file", "pv_forecast_file")

_SPLIT_DAYS = (("trace", "train_days"), ("trace", "test_days"))
_SITE_LISTS = (("sites", "hub"), ("sites", "data_shares"), ("network", "rtt_to_hub_ms"))
# What a scenario's fields describe, as (table, field): ``extends`` inherits a base's field on
# the right only together with the field on the left. A scenario that writes a field on the left
# itself gets none of the base's fields on the right (it keeps the ones it writes), because they
# describe a file, sites or hub that are no longer its own, and TOML cannot unset a field: the
# time zone of the flagship's Google trace, inherited by a user's trace that replaced it, refused
# every site without one. Writing the base's own value again counts as writing it: restating
# [trace] file takes the base's trace without its time zone and shift. docs/scenarios.md
# ("Starting from a shipped scenario") lists the same table.
TIED_FIELDS: dict[tuple[str, str], tuple[tuple[str, str], ...]] = {
    # The grid trace: its time zone and shift, the PV data laid on its calendar, and the day
    # split counted on that calendar.
    ("trace", "file"): (
        ("trace", "utc_offset_h"), ("trace", "shift_days"), ("trace", "pv_file"),
        ("trace", "pv_forecast_file"), *_SPLIT_DAYS,
    ),
    # The PV trace: its forecasts; and the calendar (where every file has data) moves with it.
    ("trace", "pv_file"): (("trace", "pv_forecast_file"), *_SPLIT_DAYS),
    ("trace", "pv_forecast_file"): _SPLIT_DAYS,
    # The sites: the hub names one of them; data_shares and rtt_to_hub_ms are in their order.
    ("sites", "catalogue"): (("sites", "site"), *_SITE_LISTS),
    ("sites", "site"): (("sites", "catalogue"), *_SITE_LISTS),
    # The hub: rtt_to_hub_ms are round trips to it.
    ("sites", "hub"): (("network", "rtt_to_hub_ms"),),
}  # fmt: skip


@dataclass
class _Lineage:
    """Where the fields of a scenario merged through ``extends`` came from, for messages.

    A value the user never wrote, or one they expected but did not get, is confusing in an
    error unless the message says which base wrote it or why it was left out.
    """

    inherited: dict[tuple[str, str], str] = field(default_factory=dict)  # -> the base file
    dropped: dict[tuple[str, str], str] = field(default_factory=dict)  # -> why, as a clause


def _shown(value: Any) -> str:
    """A base's value as a message shows it: inline sites by their count, not in full."""
    if isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
        return f"[{len(value)} site table(s)]"
    return repr(value)


def _apply_extends(
    doc: dict[str, Any],
    path: Path,
    source: str,
    seen: tuple[str, ...],
    read: list[Path],
    lineage: _Lineage | None = None,
) -> tuple[dict[str, Any], Path]:
    """``extends = "default"`` starts from another scenario and overrides it table by table.

    Fields of a table in this file replace the same fields of the base; relative data files
    keep resolving against the file that names them. The base's fields that describe what this
    file replaces (``TIED_FIELDS``) are left out. Returns the merged document and the path that
    relative names in it resolve against; ``lineage`` records where the fields came from.
    """
    lineage = lineage if lineage is not None else _Lineage()
    base_name = doc.pop("extends", None)
    if base_name is None:
        return doc, path
    if not isinstance(base_name, str):
        raise ScenarioError(f"{source}: field 'extends' = {base_name!r}: must be a scenario name")
    names = scenario_names()
    if base_name not in names:
        # A name that is neither shipped nor an existing file is most likely a misspelt
        # scenario name; scenario_path would report a path the user never wrote.
        candidate = path.parent / os.path.expanduser(base_name)
        if not candidate.is_file():
            close = difflib.get_close_matches(Path(base_name).stem, names, n=1)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            raise ScenarioError(
                f"{source}: field 'extends' = {base_name!r}: not a shipped scenario and no such "
                f"file ({candidate} not found); allowed: one of {names} or the path of a "
                f"scenario .toml file, relative to {path.parent}{hint}"
            )
        base_name = str(candidate)
    base_path = scenario_path(base_name)
    if str(base_path) in seen:
        raise ScenarioError(f"{source}: 'extends' forms a cycle through {base_path}")
    base_doc = _read_toml(base_path, str(base_path))
    read.append(base_path)
    base_doc, base_root = _apply_extends(
        base_doc, base_path, str(base_path), (*seen, str(base_path)), read, lineage
    )

    def writes(table: str, key: str) -> bool:
        own = doc.get(table)
        return isinstance(own, dict) and key in own

    base = {t: dict(v) if isinstance(v, dict) else v for t, v in base_doc.items()}
    for (table, key), tied in TIED_FIELDS.items():
        if not writes(table, key):
            continue
        for t, k in tied:
            if writes(t, k) or not isinstance(base.get(t), dict) or k not in base[t]:
                continue
            value = base[t].pop(k)
            origin = lineage.inherited.pop((t, k), str(base_path))
            own = "[[sites.site]]" if (table, key) == ("sites", "site") else f"[{table}] {key}"
            lineage.dropped[(t, k)] = (
                f" (the base's [{t}] {k} = {_shown(value)} in {origin} is not inherited through "
                f"'extends': it describes what {source} replaces with its own {own})"
            )
    for t, k in [*lineage.inherited, *lineage.dropped]:
        if writes(t, k):  # this file's own value stands
            lineage.inherited.pop((t, k), None)
            lineage.dropped.pop((t, k), None)
    for table, value in base.items():
        if isinstance(value, dict):
            for key in _FILE_KEYS:  # keep the base's data files findable
                if key in value and not writes(table, key):
                    where = f"{base_path}: [{table}] field {key!r}"
                    value[key] = str(_resolve_file(value[key], base_root, where))
            for key in value:
                if not writes(table, key):
                    lineage.inherited.setdefault((table, key), str(base_path))
        if table in doc and isinstance(doc[table], dict) and isinstance(value, dict):
            doc[table] = {**value, **doc[table]}
        elif table not in doc and table not in ("name", "description"):
            doc[table] = value
    return doc, path


# A sum of data shares this close to 1 is 1 (decimals as written): the shares are used as they
# are. Up to SHARE_SUM_TOLERANCE off, they are rounded decimals (twelve sites at 0.083333 sum to
# 0.999996) and are normalised, with a warning; further off is a mistake and refused.
SHARE_SUM_EXACT = 1e-6
SHARE_SUM_TOLERANCE = 1e-3


def _normalised_shares(sites: list[Site], where: str) -> list[Site]:
    """``sites`` with data shares that sum to 1, normalising a sum that is nearly 1.

    Shares are usually written as rounded decimals, and 1/12 cannot be written exactly, so an
    exact sum would refuse honest files; but a sum well off 1 is most likely a share left out
    or mistyped, which normalising would hide. ``where`` names the file and field, for the
    warning and the error.

    Raises:
        ScenarioError: if the sum is more than ``SHARE_SUM_TOLERANCE`` away from 1.
    """
    total = math.fsum(s.data_share for s in sites)
    if abs(total - 1.0) <= SHARE_SUM_EXACT:
        return sites
    if abs(total - 1.0) > SHARE_SUM_TOLERANCE:
        raise ScenarioError(
            f"{where} sums to {total:.6g} over the sites; it must sum to 1 (a sum within "
            f"{SHARE_SUM_TOLERANCE:g} of 1 is accepted and normalised)"
        )
    warnings.warn(
        f"{where} sums to {total:.6g} over the sites, not 1; the shares were normalised to "
        f"sum to 1 (each divided by {total:.6g})",
        UserWarning,
        stacklevel=3,
    )
    return [replace(s, data_share=s.data_share / total) for s in sites]


def _check_sites(sites: list[Site], gpus: dict[str, GpuType], site_file: str, source: str) -> None:
    names = [s.name for s in sites]
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        raise ScenarioError(f"{site_file}: site name(s) {duplicates} appear more than once")
    for site in sites:
        if site.gpu not in gpus:
            raise ScenarioError(
                f"{site_file}: site {site.name!r} field 'gpu' = {site.gpu!r}: unknown GPU type; "
                f"allowed: {sorted(gpus)}"
            )
    total = sum(s.data_share for s in sites)
    if abs(total - 1.0) > 1e-6:
        raise ScenarioError(
            f"{site_file}: field 'data_share' sums to {total:.6g} over the sites; it must sum to 1"
        )
    if len(sites) > 64:
        raise ScenarioError(f"{source}: {len(sites)} sites; at most 64 are supported")


def _load_workload(t: _Table) -> Workload:
    a0 = t.number("a0", lo=0.0, hi=1.0)
    a_max = t.number("a_max", lo=0.0, hi=1.0)
    a_target = t.number("a_target", lo=0.0, hi=1.0)
    if not a0 < a_target < a_max:
        raise ScenarioError(
            f"{t.source}: [workload] fields a0 = {a0}, a_target = {a_target}, a_max = {a_max}: "
            "must satisfy a0 < a_target < a_max"
        )
    workload = Workload(
        name=t.string("name"),
        flops_per_sample=t.number("flops_per_sample", lo=0.0, lo_open=True),
        model_bytes=t.number("model_bytes", lo=0.0, lo_open=True),
        site_batch=t.integer("site_batch", lo=1),
        local_steps=t.integer("local_steps", lo=1),
        mfu=t.number("mfu", lo=0.0, hi=1.0, lo_open=True),
        eta_local=t.number("eta_local", 1.0, lo=0.0, hi=1.0, lo_open=True),
        noise_b0=t.number("noise_b0", lo=0.0),
        noise_p_b=t.number("noise_p_b", lo=0.0, lo_open=True),
        noise_gamma=t.number("noise_gamma", 0.0, lo=0.0, hi=4.0),
        a0=a0,
        a_max=a_max,
        a_target=a_target,
        p0=t.number("p0", lo=0.0, lo_open=True),
        alpha=t.number("alpha", lo=0.0, lo_open=True),
        non_iid=t.number("non_iid", 0.0, lo=0.0, hi=1.0),
        coverage_tau_rounds=t.number("coverage_tau_rounds", 5.0, lo=0.0, lo_open=True),
        coverage_ceiling=t.number("coverage_ceiling", 0.0, lo=0.0, hi=10.0),
        round_mode=t.string("round_mode", "fixed_quota", choices=("fixed_quota", "fixed_time")),
        round_s=t.number("round_s", 60.0, lo=0.0, lo_open=True),
        grace=t.number("grace", lo=0.0) if t.has("grace") else None,
        state_bytes=t.number("state_bytes", lo=0.0, lo_open=True) if t.has("state_bytes") else None,
        parameters=t.number("parameters", lo=0.0, lo_open=True) if t.has("parameters") else None,
    )
    t.finish()
    return workload


def _load_network(t: _Table, sites: list[Site], sites_table: _Table) -> tuple[Network, int]:
    if t.has("join_s"):
        raise ScenarioError(
            f"{t.source}: [network] field 'join_s' was renamed 'join_fixed_s': a joining site "
            "now pays join_fixed_s plus the time to fetch the model (model_bytes / wan_gbps)"
        )
    names = [s.name for s in sites]
    if not sites_table.has("hub"):
        raise ScenarioError(
            f"{sites_table._where('hub')} is missing; it is required{sites_table.dropped('hub')}"
            f"; set [sites] hub in {sites_table.source} to one of its sites {names} or to a "
            "table {name, latitude, longitude}"
        )
    hub_value = sites_table.raw("hub")
    if isinstance(hub_value, str):
        if hub_value not in names:
            raise ScenarioError(
                f"{sites_table._where('hub')} = {hub_value!r}: not a site of this "
                f"scenario; allowed: {names} or a table {{name, latitude, longitude}}"
            )
        hub_index = names.index(hub_value)
        hub_site = sites[hub_index]
        hub_name, hub_lat, hub_lon = str(hub_value), hub_site.latitude, hub_site.longitude
    else:
        hub = _Table(hub_value, sites_table.source, "sites.hub")
        hub_name = hub.string("name")
        hub_lat = hub.number("latitude", lo=-90.0, hi=90.0)
        hub_lon = hub.number("longitude", lo=-180.0, hi=180.0)
        hub.finish()
        hub_index = -1

    rtt_to_hub = t.raw("rtt_to_hub_ms", None)
    if rtt_to_hub is not None:
        if (
            not isinstance(rtt_to_hub, list)
            or len(rtt_to_hub) != len(sites)
            or not all(
                isinstance(v, int | float) and not isinstance(v, bool) and 0 < v < 10_000
                for v in rtt_to_hub
            )
        ):
            raise ScenarioError(
                f"{t._where('rtt_to_hub_ms')} = {rtt_to_hub!r}: must be a list "
                f"of {len(sites)} round-trip times in ms (one per site, in site order), each in "
                "(0, 10000)"
            )
        rtt_to_hub = tuple(float(v) for v in rtt_to_hub)
    network = Network(
        hub=hub_name,
        hub_latitude=hub_lat,
        hub_longitude=hub_lon,
        hub_gbps=t.number("hub_gbps", lo=0.0, lo_open=True),
        base_ms=t.number("base_ms", 2.0, lo=0.0),
        route_factor=t.number("route_factor", 1.5, lo=1.0, hi=5.0),
        fiber_km_per_ms=t.number("fiber_km_per_ms", 204.0, lo=0.0, lo_open=True),
        rtt_factor=t.number("rtt_factor", 1.0, lo=0.0),
        aggregation_s=t.number("aggregation_s", 0.0, lo=0.0),
        join_fixed_s=t.number("join_fixed_s", 0.0, lo=0.0),
        rtt_to_hub_ms=rtt_to_hub,
        allreduce=t.string("allreduce", "hub", choices=("hub", "ring")),
        join_mode=t.string("join_mode", "blocking", choices=("blocking", "non_blocking")),
    )
    t.finish()
    return network, hub_index


def _load_episode(t: _Table, trace: _Table) -> Episode:
    train_days = trace.day_range("train_days", (1, 21))
    test_days = trace.day_range("test_days", (22, 31))
    episode = Episode(
        time_budget_h=t.number("time_budget_h", lo=0.0, lo_open=True, hi=24.0 * 7),
        max_rounds=t.integer("max_rounds", 1000, lo=1),
        h_ref_h=t.number("h_ref_h", lo=0.0, lo_open=True),
        idle_s=t.number("idle_s", 0.0, lo=0.0),
        jitter_sigma=t.number("jitter_sigma", 0.05, lo=0.0, hi=1.0),
        server_overhead=t.number("server_overhead", 1.8, lo=1.0, hi=5.0),
        idle_fraction=t.number("idle_fraction", 0.3, lo=0.0, hi=1.0),
        train_days=train_days,
        test_days=test_days,
    )
    t.finish()
    return episode
