"""A corpus of bad input: each case writes a small scenario with exactly one defect.

Each case asserts the exact error class (``ScenarioError``; ``TraceError`` for what only the
trace reveals) and that the message names the file, the field or column and the bad value, and
what is allowed where the loader says so: a user must be able to fix the file from the message
alone. For a defect of a whole file or table (empty, missing, unparsable) the "field" is the
table or catalogue and the "value" is the defect the message states. The last group holds input
that used to be refused and must now load.

Every case starts from the same two-site toy (``scenario_files.scenario_doc``) in a fresh folder,
with its GPU catalogue and trace, so a case shows only its defect. New fields get new cases here.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from scenario_files import GPU_CSV, dump_toml, scenario_doc, site, write_trace

from powertrip_env import ScenarioError, TraceError, load_scenario, scenario_names
from powertrip_env.scenario.types import MovingProcesses
from powertrip_env.simulation import load_simulation

Doc = dict[str, Any]
Edit = Callable[[Doc, Path], None]

SCENARIO = "bad.toml"
SITES_CSV = "my_sites.csv"
GPUS_CSV = "my_gpus.csv"
TRACE_CSV = "trace.csv"
BASE = "lora"  # the shipped scenario the extends cases build on
BASE_HUB = "us-central-iowa"  # its hub

SITE_COLUMNS = (
    "name", "region", "latitude", "longitude", "gpu", "gpu_count", "capacity_kw", "pue",
    "wan_gbps", "data_share", "trace_column",
)  # fmt: skip
SITE_HEADER = ",".join(SITE_COLUMNS)
ROW_A = "site-a,europe,50,8,G100,16,5.25,1.25,10,0.6,ca"  # line 2 of the catalogue
ROW_B = "site-b,asia,35,139,G200,4,6.0,1.5,5,0.4,cb"  # line 3: the row the cell cases edit


def toy_doc() -> Doc:
    """The defect-free scenario every case edits: two sites, hub site-a, trace columns ca, cb."""
    return scenario_doc(
        [
            site("site-a", "ca", data_share=0.6),
            site("site-b", "cb", gpu="G200", gpu_count=4, data_share=0.4, latitude=50.0),
        ]
    )


@dataclass(frozen=True)
class Bad:
    """One defective scenario and what its error must say."""

    edit: Edit  # makes the one defect: edits the document, may write files next to it
    file: str  # the file the message must name (relative to the scenario's folder)
    field: str  # the field or column, as the message quotes it
    value: str  # the bad value, as the message shows it
    allowed: str | None = None  # what the message says is allowed, where it says so
    error: type[ValueError] = ScenarioError
    text: Callable[[str], str] | None = None  # a defect only TOML text can carry
    built: bool = False  # only the simulation reveals it (the power data's row length)


def write_case(folder: Path, edit: Edit, text: Callable[[str], str] | None = None) -> Path:
    (folder / "gpus.csv").write_text(GPU_CSV, encoding="utf-8")
    write_trace(folder / TRACE_CSV, {"ca": 0.5, "cb": 0.25})
    doc = toy_doc()
    edit(doc, folder)
    toml = dump_toml(doc)
    path = folder / SCENARIO
    path.write_text(text(toml) if text else toml, encoding="utf-8")
    return path


# --------------------------------------------------------------------------- edits


def set_field(dotted: str, value: Any) -> Edit:
    """Set one field; a number in the path indexes a list (``sites.site.1.gpu``)."""
    *parents, key = dotted.split(".")

    def edit(doc: Doc, folder: Path) -> None:
        node: Any = doc
        for part in parents:
            node = node[int(part)] if part.isdigit() else node[part]
        node[key] = value

    return edit


def drop_field(dotted: str) -> Edit:
    *parents, key = dotted.split(".")

    def edit(doc: Doc, folder: Path) -> None:
        node: Any = doc
        for part in parents:
            node = node[int(part)] if part.isdigit() else node[part]
        del node[key]

    return edit


def replace_text(old: str, new: str) -> Callable[[str], str]:
    def text(toml: str) -> str:
        assert old in toml, f"{old!r} is not in the toy scenario"
        return toml.replace(old, new, 1)

    return text


def no_edit(doc: Doc, folder: Path) -> None:
    pass


def sites_csv(*lines: str) -> Edit:
    """Sites from a catalogue CSV of exactly ``lines`` (header included) instead of inline."""

    def edit(doc: Doc, folder: Path) -> None:
        text = "".join(f"{line}\n" for line in lines)
        (folder / SITES_CSV).write_text(text, encoding="utf-8")
        doc["sites"] = {"catalogue": SITES_CSV, "hub": "site-a"}

    return edit


def site_cell(column: str, text: str) -> Edit:
    """The site catalogue with ``column`` of site-b (line 3) written as ``text``."""
    cells = ROW_B.split(",")
    cells[SITE_COLUMNS.index(column)] = text
    return sites_csv(SITE_HEADER, ROW_A, ",".join(cells))


def gpus_csv(text: str) -> Edit:
    def edit(doc: Doc, folder: Path) -> None:
        (folder / GPUS_CSV).write_text(text, encoding="utf-8")
        doc["gpus"]["catalogue"] = GPUS_CSV

    return edit


def gpu_cell(column: str, text: str) -> Edit:
    """The GPU catalogue with ``column`` of G200 (line 3) written as ``text``."""
    header, g100, g200 = GPU_CSV.splitlines()
    cells = g200.split(",")
    cells[header.split(",").index(column)] = text
    return gpus_csv(f"{header}\n{g100}\n{','.join(cells)}\n")


def trace_line(line: int, text: str) -> Edit:
    """The trace with ``line`` (1 is the header) replaced by ``text``."""

    def edit(doc: Doc, folder: Path) -> None:
        lines = (folder / TRACE_CSV).read_text(encoding="utf-8").splitlines()
        lines[line - 1] = text
        (folder / TRACE_CSV).write_text("\n".join(lines) + "\n", encoding="utf-8")

    return edit


def extends(base: Any, **tables: Doc) -> Edit:
    """A scenario of only ``extends = base`` and ``tables``."""

    def edit(doc: Doc, folder: Path) -> None:
        doc.clear()
        doc.update({"extends": base, **tables})

    return edit


def with_file(name: str, text: str, then: Edit) -> Edit:
    def edit(doc: Doc, folder: Path) -> None:
        (folder / name).write_text(text, encoding="utf-8")
        then(doc, folder)

    return edit


def own_sites_extending_base(doc: Doc, folder: Path) -> None:
    """Inline sites, GPUs and trace over the base, without restating [sites] hub."""
    toy = toy_doc()
    doc.clear()
    doc.update(extends=BASE, gpus=toy["gpus"], trace=toy["trace"])
    doc["sites"] = {"site": toy["sites"]["site"]}


def moving(**fields: Any) -> Edit:
    """A ``[moving]`` table of exactly ``fields``."""

    def edit(doc: Doc, folder: Path) -> None:
        doc["moving"] = dict(fields)

    return edit


def case(name: str, value: Any) -> Any:
    return pytest.param(value, id=name)


def out_of_range(table: str, key: str, value: Any, shown: str, allowed: str) -> Any:
    """``[table] key = value`` outside its range."""
    where = f"[{table}] field {key!r}"
    bad = Bad(set_field(f"{table}.{key}", value), SCENARIO, where, shown, allowed)
    return case(f"{table}.{key}={value}", bad)


def site_column_out_of_range(column: str, text: str, allowed: str) -> Any:
    bad = Bad(site_cell(column, text), SITES_CSV, f"row 3, field {column!r}", f"= {text}", allowed)
    return case(f"sites.csv:{column}={text}", bad)


def gpu_column_out_of_range(column: str, text: str) -> Any:
    bad = Bad(gpu_cell(column, text), GPUS_CSV, f"row 3, column {column!r}", f"= {text}", "> 0")
    return case(f"gpus.csv:{column}={text}", bad)


# --------------------------------------------------------------------------- the corpus

WRONG_TYPES = [
    case("workload.mfu-string", Bad(set_field("workload.mfu", "high"), SCENARIO,
         "[workload] field 'mfu'", "'high'", "must be a number")),
    case("workload.site_batch-float", Bad(set_field("workload.site_batch", 2.5), SCENARIO,
         "[workload] field 'site_batch'", "2.5", "must be an integer")),
    case("workload.name-number", Bad(set_field("workload.name", 7), SCENARIO,
         "[workload] field 'name'", "7", "non-empty string")),
    case("workload.round_mode-unknown", Bad(set_field("workload.round_mode", "per_epoch"),
         SCENARIO, "[workload] field 'round_mode'", "'per_epoch'", "'fixed_quota', 'fixed_time'")),
    case("network.hub_gbps-bool", Bad(set_field("network.hub_gbps", True), SCENARIO,
         "[network] field 'hub_gbps'", "True", "must be a number")),
    case("network.aggregation_s-list", Bad(set_field("network.aggregation_s", [1, 2]), SCENARIO,
         "[network] field 'aggregation_s'", "[1, 2]", "must be a number")),
    case("episode.max_rounds-string", Bad(set_field("episode.max_rounds", "many"), SCENARIO,
         "[episode] field 'max_rounds'", "'many'", "must be an integer")),
    case("site.gpu_count-float", Bad(set_field("sites.site.0.gpu_count", 1.5), SCENARIO,
         "[sites.site #1] field 'gpu_count'", "1.5", "must be an integer")),
    case("site.latitude-string", Bad(set_field("sites.site.1.latitude", "north"), SCENARIO,
         "[sites.site #2] field 'latitude'", "'north'", "must be a number")),
    case("site.trace_column-empty", Bad(set_field("sites.site.0.trace_column", ""), SCENARIO,
         "[sites.site #1] field 'trace_column'", "''", "non-empty string")),
    case("trace.train_days-one-number", Bad(set_field("trace.train_days", [1]), SCENARIO,
         "[trace] field 'train_days'", "[1]", "[first_day, last_day]")),
    case("trace.test_days-reversed", Bad(set_field("trace.test_days", [2, 1]), SCENARIO,
         "[trace] field 'test_days'", "[2, 1]", "first <= last")),
    case("workload-not-a-table", Bad(set_field("workload", 5), SCENARIO,
         "[workload]", "got 5", "must be a table")),
    case("sites.data_shares-number", Bad(set_field("sites.data_shares", 0.5), SCENARIO,
         "[sites] field 'data_shares'", "0.5", "list of 2 numbers")),
    case("sites.hub-number", Bad(set_field("sites.hub", 5), SCENARIO,
         "[sites.hub]", "got 5", "must be a table")),
    case("workload.mfu-nan", Bad(no_edit, SCENARIO, "[workload] field 'mfu'", "nan",
         "must be finite", text=replace_text("mfu = 0.5", "mfu = nan"))),
    case("network.hub_gbps-inf", Bad(no_edit, SCENARIO, "[network] field 'hub_gbps'", "inf",
         "must be finite", text=replace_text("hub_gbps = 10.0", "hub_gbps = inf"))),
]  # fmt: skip

WORKLOAD_RANGES = [
    out_of_range("workload", "flops_per_sample", 0.0, "= 0.0", "> 0"),
    out_of_range("workload", "model_bytes", -1.0, "= -1.0", "> 0"),
    out_of_range("workload", "site_batch", 0, "= 0", ">= 1"),
    out_of_range("workload", "local_steps", 0, "= 0", ">= 1"),
    out_of_range("workload", "mfu", 1.5, "= 1.5", "<= 1"),
    out_of_range("workload", "mfu", 0.0, "= 0.0", "> 0"),
    out_of_range("workload", "eta_local", 0.0, "= 0.0", "> 0"),
    out_of_range("workload", "eta_local", 1.2, "= 1.2", "<= 1"),
    out_of_range("workload", "noise_b0", -1.0, "= -1.0", ">= 0"),
    out_of_range("workload", "noise_p_b", 0.0, "= 0.0", "> 0"),
    out_of_range("workload", "noise_gamma", 4.5, "= 4.5", "<= 4"),
    out_of_range("workload", "a0", -0.1, "= -0.1", ">= 0"),
    out_of_range("workload", "a_max", 1.5, "= 1.5", "<= 1"),
    out_of_range("workload", "a_target", 1.2, "= 1.2", "<= 1"),
    out_of_range("workload", "p0", 0.0, "= 0.0", "> 0"),
    out_of_range("workload", "alpha", -1.0, "= -1.0", "> 0"),
    out_of_range("workload", "non_iid", 1.5, "= 1.5", "<= 1"),
    out_of_range("workload", "coverage_tau_rounds", 0.0, "= 0.0", "> 0"),
    out_of_range("workload", "round_s", 0.0, "= 0.0", "> 0"),
    case("workload.a_target-above-a_max", Bad(set_field("workload.a_target", 0.95), SCENARIO,
         "[workload] fields a0 = 0.1, a_target", "= 0.95", "a0 < a_target < a_max")),
]  # fmt: skip

NETWORK_RANGES = [
    out_of_range("network", "hub_gbps", 0.0, "= 0.0", "> 0"),
    out_of_range("network", "base_ms", -1.0, "= -1.0", ">= 0"),
    out_of_range("network", "route_factor", 0.5, "= 0.5", ">= 1"),
    out_of_range("network", "route_factor", 6.0, "= 6.0", "<= 5"),
    out_of_range("network", "fiber_km_per_ms", 0.0, "= 0.0", "> 0"),
    out_of_range("network", "rtt_factor", -1.0, "= -1.0", ">= 0"),
    out_of_range("network", "aggregation_s", -1.0, "= -1.0", ">= 0"),
    out_of_range("network", "join_fixed_s", -1.0, "= -1.0", ">= 0"),
    out_of_range("network", "rtt_to_hub_ms", [0.0, 5.0], "= [0.0, 5.0]", "each in (0, 10000)"),
    out_of_range("network", "rtt_to_hub_ms", [5.0], "= [5.0]", "list of 2 round-trip times"),
]

EPISODE_RANGES = [
    out_of_range("episode", "time_budget_h", 0.0, "= 0.0", "> 0"),
    out_of_range("episode", "time_budget_h", 200.0, "= 200.0", "<= 168"),
    out_of_range("episode", "max_rounds", 0, "= 0", ">= 1"),
    out_of_range("episode", "h_ref_h", 0.0, "= 0.0", "> 0"),
    out_of_range("episode", "idle_s", -1.0, "= -1.0", ">= 0"),
    out_of_range("episode", "jitter_sigma", 1.5, "= 1.5", "<= 1"),
    out_of_range("episode", "server_overhead", 0.5, "= 0.5", ">= 1"),
    out_of_range("episode", "server_overhead", 6.0, "= 6.0", "<= 5"),
    out_of_range("episode", "idle_fraction", 1.5, "= 1.5", "<= 1"),
]

CATALOGUE_VALUES = [
    site_column_out_of_range("latitude", "95", "<= 90"),
    site_column_out_of_range("longitude", "200", "<= 180"),
    site_column_out_of_range("gpu_count", "0", ">= 1"),
    site_column_out_of_range("capacity_kw", "0", "> 0"),
    site_column_out_of_range("pue", "0.5", ">= 1"),
    site_column_out_of_range("pue", "3.5", "<= 3"),
    site_column_out_of_range("wan_gbps", "0", "> 0"),
    site_column_out_of_range("data_share", "1.5", "<= 1"),
    site_column_out_of_range("data_share", "-0.1", ">= 0"),
    case("sites.csv:capacity_kw-text", Bad(site_cell("capacity_kw", "lots"), SITES_CSV,
         "row 3, column 'capacity_kw'", "'lots'", "float")),
    case("sites.csv:gpu_count-fraction", Bad(site_cell("gpu_count", "2.5"), SITES_CSV,
         "row 3, column 'gpu_count'", "'2.5'", "int")),
    case("sites.csv:latitude-empty", Bad(site_cell("latitude", ""), SITES_CSV,
         "row 3, column 'latitude'", "is empty", "float is required")),
    case("sites.csv:gpu-empty", Bad(site_cell("gpu", ""), SITES_CSV,
         "row 3, field 'gpu'", "is empty")),
    case("sites.csv:missing-column", Bad(sites_csv(SITE_HEADER.replace(",pue", ""),
         ROW_A.replace(",1.25", ""), ROW_B.replace(",1.5", "")), SITES_CSV,
         "missing column(s)", "['pue']", f"required: {list(SITE_COLUMNS)}")),
    case("sites.csv:semicolons", Bad(sites_csv(SITE_HEADER.replace(",", ";"),
         ROW_A.replace(",", ";")), SITES_CSV, "missing column(s)", "'name;region;",
         "required:")),
    gpu_column_out_of_range("tflops_bf16", "0"),
    gpu_column_out_of_range("power_w", "-5"),
    gpu_column_out_of_range("memory_gb", "0"),
    case("gpus.csv:power_w-text", Bad(gpu_cell("power_w", "hot"), GPUS_CSV,
         "row 3, column 'power_w'", "'hot'", "float")),
    case("gpus.csv:name-empty", Bad(gpu_cell("name", ""), GPUS_CSV,
         "row 3, column 'name'", "is empty")),
    case("gpus.csv:name-twice", Bad(gpu_cell("name", "G100"), GPUS_CSV,
         "row 3, column 'name'", "'G100'", "appears twice")),
]  # fmt: skip

UNKNOWN_FIELDS = [
    case("top-level:workloads", Bad(set_field("workloads", {"mfu": 0.4}), SCENARIO,
         "[top level]", "['workloads']", "'workload'")),
    case("workload:eta_locl", Bad(set_field("workload.eta_locl", 0.9), SCENARIO,
         "[workload]", "['eta_locl']", "'eta_local'")),
    case("network:join_sec", Bad(set_field("network.join_sec", 1.0), SCENARIO,
         "[network]", "['join_sec']", "'join_fixed_s'")),
    case("episode:time_budget", Bad(set_field("episode.time_budget", 1.0), SCENARIO,
         "[episode]", "['time_budget']", "'time_budget_h'")),
    case("sites:hubb", Bad(set_field("sites.hubb", "site-a"), SCENARIO,
         "[sites]", "['hubb']", "'hub'")),
    case("gpus:catalog", Bad(set_field("gpus.catalog", "gpus.csv"), SCENARIO,
         "[gpus]", "['catalog']", "'catalogue'")),
    case("trace:train_day", Bad(set_field("trace.train_day", [1, 1]), SCENARIO,
         "[trace]", "['train_day']", "'train_days'")),
    case("site:colour", Bad(set_field("sites.site.0.colour", "red"), SCENARIO,
         "[sites.site #1]", "['colour']", "'capacity_kw'")),
    case("hub-table:altitude", Bad(set_field("sites.hub", {"name": "ix", "latitude": 1.0,
         "longitude": 2.0, "altitude": 3.0}), SCENARIO, "[sites.hub]", "['altitude']",
         "'latitude'")),
]  # fmt: skip

SITES = [
    case("site-name-twice", Bad(set_field("sites.site.1.name", "site-a"), SCENARIO,
         "site name(s)", "['site-a']", "more than once")),
    case("sites.csv:site-name-twice", Bad(sites_csv(SITE_HEADER, ROW_A,
         ROW_B.replace("site-b", "site-a")), SITES_CSV, "site name(s)", "['site-a']",
         "more than once")),
    case("site-gpu-unknown", Bad(set_field("sites.site.1.gpu", "Z100"), SCENARIO,
         "site 'site-b' field 'gpu'", "'Z100'", "['G100', 'G200']")),
    case("sites.csv:gpu-unknown", Bad(site_cell("gpu", "H100"), SITES_CSV,
         "site 'site-b' field 'gpu'", "'H100'", "['G100', 'G200']")),
    case("data_share-sum", Bad(set_field("sites.site.1.data_share", 0.3), SCENARIO,
         "field 'data_share'", "sums to 0.9", "must sum to 1")),
    case("sites.csv:data_share-sum", Bad(site_cell("data_share", "0.6"), SITES_CSV,
         "field 'data_share'", "sums to 1.2", "must sum to 1")),
    case("data_shares-list-sum", Bad(set_field("sites.data_shares", [0.7, 0.7]), SCENARIO,
         "field 'data_share'", "sums to 1.4", "must sum to 1")),
    case("data_shares-list-length", Bad(set_field("sites.data_shares", [1.0]), SCENARIO,
         "[sites] field 'data_shares'", "[1.0]", "list of 2 numbers")),
    case("sites-catalogue-and-inline", Bad(set_field("sites.catalogue", SITES_CSV), SCENARIO,
         "[sites]", "must have exactly one of", "'catalogue' (a CSV file) or [[sites.site]]")),
    case("sites-neither", Bad(drop_field("sites.site"), SCENARIO,
         "[sites]", "must have exactly one of", "'catalogue' (a CSV file) or [[sites.site]]")),
    case("hub-not-a-site", Bad(set_field("sites.hub", "atlantis"), SCENARIO,
         "[sites] field 'hub'", "'atlantis'", "['site-a', 'site-b']")),
    case("hub-inherited", Bad(own_sites_extending_base, SCENARIO,
         "[sites] field 'hub'", repr(BASE_HUB), "set [sites] hub")),
    case("hub-table-latitude", Bad(set_field("sites.hub", {"name": "ix", "latitude": 91.0,
         "longitude": 0.0}), SCENARIO, "[sites.hub] field 'latitude'", "= 91.0", "<= 90")),
    case("hub-table-no-longitude", Bad(set_field("sites.hub", {"name": "ix", "latitude": 1.0}),
         SCENARIO, "[sites.hub] field 'longitude'", "is missing", "required")),
]  # fmt: skip

MISSING = [
    case("no-workload-table", Bad(drop_field("workload"), SCENARIO,
         "[top level] field 'workload'", "is missing", "required")),
    case("no-network-table", Bad(drop_field("network"), SCENARIO,
         "[top level] field 'network'", "is missing", "required")),
    case("no-sites-table", Bad(drop_field("sites"), SCENARIO,
         "[top level] field 'sites'", "is missing", "required")),
    case("no-trace-table", Bad(drop_field("trace"), SCENARIO,
         "[top level] field 'trace'", "is missing", "required")),
    case("no-workload.mfu", Bad(drop_field("workload.mfu"), SCENARIO,
         "[workload] field 'mfu'", "is missing", "required")),
    case("no-site.capacity_kw", Bad(drop_field("sites.site.1.capacity_kw"), SCENARIO,
         "[sites.site #2] field 'capacity_kw'", "is missing", "required")),
    case("no-hub", Bad(drop_field("sites.hub"), SCENARIO,
         "[sites] field 'hub'", "is missing", "required")),
    case("no-trace.file", Bad(drop_field("trace.file"), SCENARIO,
         "[trace] field 'file'", "is missing", "required")),
    case("sites-catalogue-not-found", Bad(set_field("sites", {"catalogue": "nope.csv",
         "hub": "site-a"}), SCENARIO, "[sites] field 'catalogue'", "'nope.csv'",
         "file not found")),
    case("gpus-catalogue-not-found", Bad(set_field("gpus.catalogue", "nope.csv"), SCENARIO,
         "[gpus] field 'catalogue'", "'nope.csv'", "file not found")),
    case("trace-file-not-found", Bad(set_field("trace.file", "nope.csv"), SCENARIO,
         "[trace] field 'file'", "'nope.csv'", "file not found")),
    case("sites.csv-empty", Bad(sites_csv(), SITES_CSV,
         "site catalogue", "is empty", "a header and at least one row")),
    case("sites.csv-header-only", Bad(sites_csv(SITE_HEADER), SITES_CSV,
         "site catalogue", "is empty", "a header and at least one row")),
    case("gpus.csv-empty", Bad(gpus_csv(""), GPUS_CSV,
         "GPU catalogue", "is empty", "a header and at least one row")),
]  # fmt: skip

SYNTAX = [
    case("toml-empty", Bad(no_edit, SCENARIO, "the scenario file", "is empty",
         text=lambda toml: "")),
    case("toml-number-with-two-points", Bad(no_edit, SCENARIO, "not valid TOML",
         "(at line 1, column 10)", text=lambda toml: "mfu = 0.5.5\n" + toml)),
    case("toml-unclosed-table-header", Bad(no_edit, SCENARIO, "not valid TOML",
         "(at line 1, column 10)", text=lambda toml: "[workload\n" + toml)),
    case("toml-key-twice", Bad(no_edit, SCENARIO, "not valid TOML", "(at line 2",
         text=lambda toml: 'name = "again"\n' + toml)),
]  # fmt: skip

EXTENDS = [
    case("extends-typo", Bad(extends("defualt"), SCENARIO, "field 'extends'", "'defualt'",
         "did you mean 'default'?")),
    case("extends-typo-lora", Bad(extends("lroa"), SCENARIO, "field 'extends'", "'lroa'",
         f"did you mean {BASE!r}?")),
    case("extends-unknown-name", Bad(extends("zzz"), SCENARIO, "field 'extends'", "'zzz'",
         f"one of {scenario_names()}")),
    case("extends-missing-file", Bad(extends("base.toml"), SCENARIO, "field 'extends'",
         "'base.toml'", "not found")),
    case("extends-number", Bad(extends(3), SCENARIO, "field 'extends'", "= 3",
         "must be a scenario name")),
    case("extends-cycle", Bad(with_file("other.toml", f'extends = "{SCENARIO}"\n',
         extends("other.toml")), "other.toml", "'extends'", SCENARIO, "forms a cycle")),
    case("extends-itself", Bad(extends(SCENARIO), SCENARIO, "'extends'", SCENARIO,
         "forms a cycle")),
]  # fmt: skip

TRACE = [
    case("trace_column-not-in-trace", Bad(set_field("sites.site.1.trace_column", "cc"),
         SCENARIO, "trace_column", "'cc'", "ca, cb", error=TraceError)),
    case("trace-value-text", Bad(trace_line(4, "2019-05-01T00:10:00Z,high,0.25"), TRACE_CSV,
         "line 4, column 'ca'", "'high'", "utilisation in [0, 1]", error=TraceError)),
    case("trace-value-above-1", Bad(trace_line(4, "2019-05-01T00:10:00Z,1.5,0.25"), TRACE_CSV,
         "line 4, column 'ca'", "'1.5'", "outside [0, 1]", error=TraceError)),
]  # fmt: skip

# The power-data fields of the flagship's format: on-site solar, local time, replay, forecasts.
POWER = [
    case("sites.pv_kw=-1", Bad(set_field("sites.site.1.pv_kw", -1.0), SCENARIO,
         "field 'pv_kw'", "-1.0", ">= 0")),
    case("pv_kw-without-pv_column", Bad(set_field("sites.site.1.pv_kw", 5.0), SCENARIO,
         "field 'pv_kw'", "5.0", "needs 'pv_column'")),
    case("pv-site-without-pv_file", Bad(
         lambda doc, folder: doc["sites"]["site"][1].update(pv_kw=5.0, pv_column="pv_b"),
         SCENARIO, "site-b", "pv_kw > 0", "'pv_file'")),
    case("sites.utc_offset_h=15", Bad(set_field("sites.site.1.utc_offset_h", 15.0), SCENARIO,
         "field 'utc_offset_h'", "15.0", "<= 14")),
    case("trace.utc_offset_h=-13", Bad(set_field("trace.utc_offset_h", -13.0), SCENARIO,
         "field 'utc_offset_h'", "-13.0", ">= -12")),
    case("local-time-without-site-offsets", Bad(set_field("trace.utc_offset_h", -4.0),
         SCENARIO, "'utc_offset_h'", "-4.0", "missing for ['site-a', 'site-b']")),
    case("trace.shift_days-text", Bad(set_field("trace.shift_days", "ten"), SCENARIO,
         "field 'shift_days'", "'ten'", "must be an integer")),
    case("forecast-without-pv_file", Bad(with_file("fc.csv", "issued,timestamp,pv\n",
         set_field("trace.pv_forecast_file", "fc.csv")), SCENARIO, "'pv_forecast_file'",
         "needs 'pv_file'")),
    case("pv_file-missing", Bad(set_field("trace.pv_file", "no_pv.csv"), SCENARIO,
         "field 'pv_file'", "'no_pv.csv'", "file not found")),
    case("network:join_s-renamed", Bad(set_field("network.join_s", 30.0), SCENARIO,
         "field 'join_s'", "renamed", "'join_fixed_s'")),
]  # fmt: skip

# [moving] (the moving track): a fail-slow needs a factor above 1 to slow anything, a depth of 1
# would be an outage, and a phase shorter than the trace's row (5 minutes here) would fall
# between the rows the path steps by.
SLOW = {"slow_per_day": 1.0, "slow_factor": 1.5}
DEPTHS = ("link", "callback")  # the processes whose depth is a share lost, in (0, 1)


def moving_out_of_range(key: str, value: Any, allowed: str, **also: Any) -> Any:
    """``[moving] key = value`` outside its range, with the fields ``also`` beside it."""
    bad = Bad(
        moving(**also, **{key: value}), SCENARIO, f"[moving] field {key!r}", f"= {value}", allowed
    )
    return case(f"moving.{key}={value}", bad)


def moving_below_a_row(process: str, **also: Any) -> Any:
    """A process whose mean phase is 3 minutes: load_scenario takes it, the trace refuses it."""
    edit = moving(**also, **{f"{process}_per_day": 1.0, f"{process}_hours": 0.05})
    bad = Bad(
        edit,
        SCENARIO,
        f"[moving] field '{process}_hours'",
        "= 0.05",
        "at least one trace row (0.0833333 h, 300 s)",
        built=True,
    )
    return case(f"moving.{process}_hours=0.05-below-a-row", bad)


def moving_on_fixed_time(doc: Doc, folder: Path) -> None:
    """A fail-slow on rounds of a fixed time, which have no quota for it to stretch."""
    moving(**SLOW)(doc, folder)
    doc["workload"].update(round_mode="fixed_time", round_s=240.0)


MOVING = [
    moving_out_of_range("slow_per_day", -1.0, ">= 0"),
    moving_out_of_range("link_per_day", -0.5, ">= 0"),
    moving_out_of_range("callback_per_day", -0.1, ">= 0"),
    moving_out_of_range("slow_hours", 0.0, "> 0", **SLOW),
    moving_out_of_range("link_hours", -1.0, "> 0"),
    moving_out_of_range("callback_hours", 0.0, "> 0"),
    moving_below_a_row("slow", slow_factor=1.5),
    moving_below_a_row("link"),
    moving_below_a_row("callback"),
    *(moving_out_of_range(f"{p}_depth", v, "> 0") for p in DEPTHS for v in (0.0, -0.1)),
    *(moving_out_of_range(f"{p}_depth", v, "must be in (0, 1)") for p in DEPTHS
      for v in (1.0, 1.5)),
    moving_out_of_range("slow_factor", 0.5, ">= 1", slow_per_day=1.0),
    moving_out_of_range("slow_factor", 12.0, "<= 10", slow_per_day=1.0),
    case("moving.slow_factor=1.0-with-a-rate", Bad(moving(slow_per_day=2.0, slow_factor=1.0),
         SCENARIO, "[moving] field 'slow_factor'", "= 1.0 with slow_per_day = 2.0",
         "a factor > 1 (and <= 10)")),
    case("moving.slow_per_day-string", Bad(moving(slow_per_day="daily"), SCENARIO,
         "[moving] field 'slow_per_day'", "'daily'", "must be a number")),
    case("moving:slow_rate", Bad(moving(slow_rate=1.0), SCENARIO, "[moving]",
         "['slow_rate']", "'slow_per_day'")),
    case("moving-with-fixed_time-rounds", Bad(moving_on_fixed_time, SCENARIO, "[moving]",
         "(got 'fixed_time')", "round_mode = 'fixed_quota'")),
]  # fmt: skip

BAD_INPUT = [
    *WRONG_TYPES,
    *WORKLOAD_RANGES,
    *NETWORK_RANGES,
    *EPISODE_RANGES,
    *CATALOGUE_VALUES,
    *UNKNOWN_FIELDS,
    *SITES,
    *MISSING,
    *SYNTAX,
    *EXTENDS,
    *TRACE,
    *POWER,
    *MOVING,
]


@pytest.mark.parametrize("bad", BAD_INPUT)
def test_bad_input_is_refused_naming_file_field_and_value(bad: Bad, tmp_path: Path) -> None:
    path = write_case(tmp_path, bad.edit, bad.text)
    with pytest.raises(ValueError) as info:
        # Trace content is read when the simulation is built (and with it the row length a moving
        # phase is checked against); everything else at load.
        load_simulation(path) if bad.error is TraceError or bad.built else load_scenario(path)
    assert type(info.value) is bad.error, f"{type(info.value).__name__}: {info.value}"
    message = str(info.value)
    for part in (str((tmp_path / bad.file).resolve()), bad.field, bad.value, bad.allowed):
        if part is not None:
            assert part in message, f"{part!r} not in error message: {message}"


def test_the_corpus_has_distinct_cases_and_a_range_case_for_every_numeric_field() -> None:
    """A guard on the corpus itself, so that a new numeric field comes with its range case."""
    ids = [p.id for p in BAD_INPUT]
    assert len(ids) == len(set(ids)) >= 35
    optional = {
        "workload": {"non_iid", "coverage_tau_rounds", "round_s"},
        "network": {"base_ms", "route_factor", "fiber_km_per_ms", "rtt_to_hub_ms"},
        "episode": {"idle_s"},
    }
    for table, extra in optional.items():
        fields = {k for k, v in toy_doc()[table].items() if not isinstance(v, str)} | extra
        covered = {i.split("=")[0].removeprefix(f"{table}.") for i in ids if "=" in i}
        assert fields <= covered, f"[{table}] fields without a range case: {fields - covered}"
    covered = {i.split("=")[0].removeprefix("moving.") for i in ids if i.startswith("moving.")}
    fields = {f.name for f in dataclasses.fields(MovingProcesses)}
    assert fields <= covered, f"[moving] fields without a range case: {fields - covered}"
    columns = {i.split("=")[0].removeprefix("sites.csv:") for i in ids if "=" in i}
    numeric = set(SITE_COLUMNS) - {"name", "region", "gpu", "trace_column"}
    assert numeric <= columns, f"site columns without a range case: {numeric - columns}"


# --------------------------------------------------------------------------- now accepted

BOM = "\ufeff"


def spaced(line: str) -> str:
    return line.replace(",", ", ")


PLAIN_SITES = sites_csv(SITE_HEADER, ROW_A, ROW_B)
PLAIN_GPUS = gpus_csv(GPU_CSV)

NOW_LOADS = [
    case("sites.csv-utf8-bom", (sites_csv(BOM + SITE_HEADER, ROW_A, ROW_B), PLAIN_SITES)),
    case("sites.csv-spaces-after-commas", (sites_csv(spaced(SITE_HEADER), spaced(ROW_A),
         spaced(ROW_B)), PLAIN_SITES)),
    case("sites.csv-bom-spaces-and-crlf", (sites_csv(BOM + spaced(SITE_HEADER) + "\r",
         spaced(ROW_A) + " \r", spaced(ROW_B) + " \r"), PLAIN_SITES)),
    case("gpus.csv-utf8-bom", (gpus_csv(BOM + GPU_CSV), PLAIN_GPUS)),
    case("gpus.csv-spaces-around-commas", (gpus_csv(GPU_CSV.replace(",", " , ")), PLAIN_GPUS)),
]  # fmt: skip


@pytest.mark.parametrize("edits", NOW_LOADS)
def test_spreadsheet_exported_catalogues_load_like_plain_ones(
    edits: tuple[Edit, Edit], tmp_path: Path
) -> None:
    """Excel's "CSV UTF-8" (a byte-order mark, CRLF) and hand-spaced headers used to be refused
    with "missing column(s) ['name']"."""
    exported, plain = edits
    (tmp_path / "exported").mkdir()
    (tmp_path / "plain").mkdir()
    scenario = load_scenario(write_case(tmp_path / "exported", exported))
    reference = load_scenario(write_case(tmp_path / "plain", plain))
    assert scenario.sites == reference.sites
    assert scenario.gpus == reference.gpus
    assert len(scenario.sites) == 2 and scenario.sites[1].capacity_kw > 5
