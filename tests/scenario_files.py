"""Write small, hand-checkable scenarios (TOML + GPU catalogue + power trace) for the tests.

The numbers are chosen so that the model of docs/model.md can be worked by hand:

* GPU ``G100``: 100 TFLOPS, 100 W board power. With ``server_overhead = 2`` and ``pue = 1.25`` a
  powered GPU costs ``p_g = 100 · 2 · 1.25 = 250 W`` at the wall.
* GPU ``G200``: 200 TFLOPS, 200 W, so ``p_g = 500 W`` at the same PUE.
* Workload: ``flops_per_sample = 5e12`` and ``mfu = 0.5`` give ``θ = 100e12 · 0.5 / 5e12 = 10``
  samples/s per G100 (20 per G200). The quota is ``local_steps · site_batch = 100 · 600 =
  60,000`` samples, so a G100 site with 10 powered GPUs computes a round in 600 s.
* A site with ``capacity_kw = 5.25`` at utilisation ``u = 0.5`` has ``2,625 W`` of headroom:
  10.5 G100s' worth, so 10 are powered.
* On-site solar: a site with ``pv_kw`` and a ``pv_column`` adds ``pv_kw · s(t)`` from the PV
  trace (``write_scenario(..., pv=...)``), and PV forecasts (``forecast=...``) are written as
  ``issued,timestamp,<columns>``: one forecast per row, ``horizons`` intervals deep.

Every scenario is written into its own fresh folder, so the loaders' per-file caches never mix
two variants up.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

INTERVAL_S = 300
ROWS_PER_DAY = 86_400 // INTERVAL_S
T0_ISO = "2019-05-01T00:00:00Z"
T0_UNIX = 1_556_668_800  # 2019-05-01T00:00:00Z

GPU_CSV = "name,tflops_bf16,power_w,memory_gb\nG100,100,100,16\nG200,200,200,32\n"

_counter = itertools.count()


def site(name: str, column: str, **overrides: Any) -> dict[str, Any]:
    """An inline ``[[sites.site]]`` table: a G100 site with 10.5 GPUs of headroom at u = 0.5."""
    table = {
        "name": name,
        "region": "north-america",
        "latitude": 40.0,
        "longitude": -90.0,
        "gpu": "G100",
        "gpu_count": 16,
        "capacity_kw": 5.25,
        "pue": 1.25,
        "wan_gbps": 10.0,
        "data_share": 0.0,
        "trace_column": column,
    }
    table.update(overrides)
    return table


WORKLOAD = {
    "name": "toy",
    "flops_per_sample": 5e12,
    "model_bytes": 1e8,  # 8e8 bits: 0.08 s at 10 Gbps
    "site_batch": 600,
    "local_steps": 100,
    "mfu": 0.5,
    "eta_local": 0.8,
    "noise_b0": 1200.0,
    "noise_p_b": 50.0,
    "noise_gamma": 1.0,
    "a0": 0.1,
    "a_max": 0.9,
    "a_target": 0.8,
    "p0": 100.0,
    "alpha": 1.0,
}

NETWORK = {
    "hub_gbps": 10.0,
    "rtt_factor": 2.0,
    "aggregation_s": 3.0,
    "join_fixed_s": 0.0,
}

EPISODE = {
    "time_budget_h": 1.0,
    "max_rounds": 1000,
    "h_ref_h": 0.5,
    "jitter_sigma": 0.0,
    "server_overhead": 2.0,
    "idle_fraction": 0.3,
}


def toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float | np.floating):
        return repr(float(value))  # plain digits, also for numpy scalars
    if isinstance(value, int | np.integer):
        return str(int(value))
    if isinstance(value, str):
        return json.dumps(value)  # a TOML basic string for plain text
    if isinstance(value, list | tuple):
        return "[" + ", ".join(toml_value(v) for v in value) + "]"
    raise TypeError(f"cannot write {value!r} as TOML")


def dump_toml(doc: Mapping[str, Any]) -> str:
    """A minimal TOML writer: scalars, arrays, tables and arrays of tables."""
    lines: list[str] = []

    def table(prefix: str, data: Mapping[str, Any]) -> None:
        if prefix:
            lines.append(f"[{prefix}]")
        subtables = []
        for key, value in data.items():
            if isinstance(value, Mapping):
                subtables.append((key, value, False))
            elif isinstance(value, list) and value and all(isinstance(v, Mapping) for v in value):
                subtables.append((key, value, True))
            else:
                lines.append(f"{key} = {toml_value(value)}")
        lines.append("")
        for key, value, is_array in subtables:
            name = f"{prefix}.{key}" if prefix else key
            if is_array:
                for entry in value:
                    lines.append(f"[[{name}]]")
                    for k, v in entry.items():
                        lines.append(f"{k} = {toml_value(v)}")
                    lines.append("")
            else:
                table(name, value)

    table("", doc)
    return "\n".join(lines) + "\n"


Column = float | Sequence[float] | np.ndarray | Callable[[np.ndarray], Any]


def _stamp(unix: int) -> str:
    return np.datetime64(int(unix), "s").astype(str) + "Z"


def _column_values(spec: Column, rows: np.ndarray) -> np.ndarray:
    """A constant, an array of row values (padded with its last value), or a function of rows."""
    n = rows.size
    if callable(spec):
        return np.broadcast_to(np.asarray(spec(rows), dtype=float), (n,))
    given = np.atleast_1d(np.asarray(spec, dtype=float))
    return np.concatenate([given, np.full(max(0, n - given.size), given[-1])])[:n]


def write_trace(
    path: Path,
    columns: Mapping[str, Column],
    *,
    days: int = 2,
    start: int = T0_UNIX,
    interval_s: int = INTERVAL_S,
) -> Path:
    """A trace CSV with ``days`` days of rows every ``interval_s`` from ``start`` (Unix s).

    Each column is a constant, an array of row values (padded with its last value), or a
    function of the row index array. PV traces (fractions of peak) are written the same way.
    """
    n = days * 86_400 // interval_s
    rows = np.arange(n)
    data = {name: _column_values(spec, rows) for name, spec in columns.items()}
    lines = ["timestamp," + ",".join(data)]
    for r in range(n):
        lines.append(
            _stamp(start + r * interval_s) + "," + ",".join(f"{data[c][r]:.6f}" for c in data)
        )
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def write_forecast(
    path: Path,
    columns: Mapping[str, float | Callable[[np.ndarray, np.ndarray], Any]],
    *,
    horizons: int = 4,
    days: int = 2,
    start: int = T0_UNIX,
) -> Path:
    """A PV forecast CSV: at every 5-minute row from ``start``, a forecast ``horizons`` deep.

    Each column is a constant or a function ``f(issue_rows, h)`` of the issue's row index and
    the horizon (both arrays, broadcast), giving the forecast fraction of PV peak.
    """
    n = days * ROWS_PER_DAY
    issue, h = np.meshgrid(np.arange(n), np.arange(horizons), indexing="ij")
    data = {}
    for name, spec in columns.items():
        values = spec(issue, h) if callable(spec) else spec
        data[name] = np.broadcast_to(np.asarray(values, dtype=float), issue.shape)
    lines = ["issued,timestamp," + ",".join(data)]
    for r in range(n):
        issued = _stamp(start + r * INTERVAL_S)
        for k in range(horizons):
            cells = ",".join(f"{data[c][r, k]:.6f}" for c in data)
            lines.append(f"{issued},{_stamp(start + (r + k) * INTERVAL_S)},{cells}")
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def write_scenario(
    root: Path,
    sites: Sequence[Mapping[str, Any]],
    util: Mapping[str, Any],
    *,
    hub: str | Mapping[str, Any] | None = None,
    workload: Mapping[str, Any] | None = None,
    network: Mapping[str, Any] | None = None,
    episode: Mapping[str, Any] | None = None,
    trace: Mapping[str, Any] | None = None,
    days: int = 2,
    pv: Mapping[str, Column] | None = None,
    forecast: Mapping[str, Any] | None = None,
    horizons: int = 4,
    pv_start: int = T0_UNIX,
    pv_days: int | None = None,
) -> Path:
    """Write a complete scenario into a fresh folder under ``root`` and return the TOML path.

    ``sites`` with all-zero data shares get equal shares. ``util`` maps trace columns to
    values (see ``write_trace``). ``pv`` writes a PV trace (``pv.csv``, ``pv_days`` days from
    ``pv_start``) and ``forecast`` PV forecasts (``pv_forecast.csv``, see ``write_forecast``)
    on the same rows; ``[trace]`` names them.
    """
    folder = root / f"scenario{next(_counter)}"
    folder.mkdir(parents=True)
    (folder / "gpus.csv").write_text(GPU_CSV, encoding="utf-8")
    write_trace(folder / "trace.csv", util, days=days)
    trace = dict(trace or {})
    if pv is not None:
        write_trace(folder / "pv.csv", pv, days=pv_days or days, start=pv_start)
        trace.setdefault("pv_file", "pv.csv")
    if forecast is not None:
        write_forecast(
            folder / "pv_forecast.csv",
            forecast,
            horizons=horizons,
            days=pv_days or days,
            start=pv_start,
        )
        trace.setdefault("pv_forecast_file", "pv_forecast.csv")
    doc = scenario_doc(
        sites, hub=hub, workload=workload, network=network, episode=episode, trace=trace
    )
    path = folder / "toy.toml"
    path.write_text(dump_toml(doc), encoding="utf-8")
    return path


def scenario_doc(
    sites: Sequence[Mapping[str, Any]],
    *,
    hub: str | Mapping[str, Any] | None = None,
    workload: Mapping[str, Any] | None = None,
    network: Mapping[str, Any] | None = None,
    episode: Mapping[str, Any] | None = None,
    trace: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The scenario document (a dict ready for ``dump_toml``) that ``write_scenario`` writes."""
    site_tables = [dict(s) for s in sites]
    if all(s["data_share"] == 0.0 for s in site_tables):
        for s in site_tables:
            s["data_share"] = 1.0 / len(site_tables)
    return {
        "name": "toy",
        "gpus": {"catalogue": "gpus.csv"},
        "trace": {"file": "trace.csv", "train_days": [1, 1], "test_days": [2, 2], **(trace or {})},
        "workload": {**WORKLOAD, **(workload or {})},
        "network": {**NETWORK, **(network or {})},
        "episode": {**EPISODE, **(episode or {})},
        "sites": {"hub": hub if hub is not None else site_tables[0]["name"], "site": site_tables},
    }


# --------------------------------------------------------------------------- powered-GPU scenarios
# ``write_powered_scenario`` writes a scenario whose trace is computed from the number of GPUs
# each site should have powered in each row, so a policy's expected choice can be worked by hand:
# ``G100`` 100 TFLOPS and 100 W, ``G200`` twice both, ``GSLOW`` drawing like a G200 (500 W at the
# wall) for half a G100's speed; ``server_overhead = 2`` and PUE 1.25 give ``p_g = 250 W`` for a
# G100; ``θ = 100e12 · 0.5 / 5e12 = 10`` samples/s per powered G100; the quota is
# ``site_batch · local_steps = 100 · 10 = 1,000`` samples, so 10 powered G100s compute a round in
# 10 s.

POWERED_GPUS = {"G100": (100.0, 100.0), "G200": (200.0, 200.0), "GSLOW": (50.0, 200.0)}
POWERED_OVERHEAD = 2.0
POWERED_PUE = 1.25
POWERED_WORKLOAD: dict[str, Any] = {
    **WORKLOAD,
    "model_bytes": 1e6,
    "site_batch": 100,
    "local_steps": 10,
    "noise_b0": 300.0,
    "noise_p_b": 100.0,
    "p0": 20.0,
}


def write_powered_scenario(
    folder: Path,
    powered: np.ndarray | Sequence[Sequence[int]],
    *,
    gpus: Sequence[str] | None = None,
    gpu_count: int | Sequence[int] | None = None,
    rtt_ms: Sequence[float] | None = None,
    days: int = 3,
    workload: Mapping[str, Any] | None = None,
    network: Mapping[str, Any] | None = None,
    episode: Mapping[str, Any] | None = None,
    data_shares: Sequence[float] | None = None,
) -> Path:
    """A self-contained scenario whose sites have exactly ``powered`` GPUs on at each row.

    ``powered`` is (N,) for a constant trace or (rows, N), repeated to fill ``days`` days.
    Utilisation is set so that the headroom is ``powered + 0.5`` GPUs' worth of wall power.
    Every site has ``gpu_count`` GPUs (default: 16, or the most ever powered).
    """
    folder.mkdir(parents=True, exist_ok=True)
    table = np.atleast_2d(np.asarray(powered, dtype=np.int64))
    n = table.shape[1]
    rows = days * ROWS_PER_DAY
    table = np.resize(table, (rows, n)) if table.shape[0] < rows else table[:rows]
    gpus = list(gpus or ["G100"] * n)
    counts = np.broadcast_to(np.asarray(gpu_count or max(16, int(table.max()))), (n,))
    wall_w = np.array([POWERED_GPUS[g][1] * POWERED_OVERHEAD * POWERED_PUE for g in gpus])
    capacity_w = (counts + 1.0) * wall_w
    util = 1.0 - (table + 0.5) * wall_w / capacity_w

    (folder / "gpus.csv").write_text(
        "name,tflops_bf16,power_w,memory_gb\n"
        + "".join(f"{g},{tf:g},{w:g},16\n" for g, (tf, w) in POWERED_GPUS.items())
    )
    lines = ["timestamp," + ",".join(f"c{i}" for i in range(n))]
    for r in range(rows):
        lines.append(_stamp(T0_UNIX + r * INTERVAL_S) + "," + ",".join(f"{u:.6f}" for u in util[r]))
    (folder / "trace.csv").write_text("\n".join(lines) + "\n")

    shares = list(data_shares) if data_shares is not None else [1.0 / n] * n
    shares[-1] = 1.0 - sum(shares[:-1])
    sites = [
        site(
            f"s{i}",
            f"c{i}",
            region="test",
            longitude=-90.0 + i,
            gpu=gpus[i],
            gpu_count=int(counts[i]),
            capacity_kw=float(capacity_w[i] / 1e3),
            pue=POWERED_PUE,
            data_share=shares[i],
        )
        for i in range(n)
    ]
    net = {
        "hub_gbps": 10.0,
        "rtt_factor": 1.0,
        "aggregation_s": 1.0,
        "join_fixed_s": 0.0,
        "rtt_to_hub_ms": list(rtt_ms) if rtt_ms is not None else [1.0 + 5.0 * i for i in range(n)],
    }
    doc = scenario_doc(
        sites,
        workload={**POWERED_WORKLOAD, **(workload or {})},
        network={**net, **(network or {})},
        episode={
            "time_budget_h": 2.0,
            "h_ref_h": 1.0,
            "server_overhead": POWERED_OVERHEAD,
            **(episode or {}),
        },
    )
    doc["name"] = "hand-made"
    path = folder / "scenario.toml"
    path.write_text(dump_toml(doc), encoding="utf-8")
    return path
