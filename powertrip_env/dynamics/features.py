"""The observation's features, declared once.

``SITE_ROWS`` and ``GLOBAL_ROWS`` are the only description of what each observation column
holds: the column names and bounds the spaces use, the slots the kernel writes
(``observation.py``), the table in ``PowerTripEnv``'s docstring and the one in docs/model.md all
come from them. A row may cover several consecutive features that are documented together (the
four forecast quarters, a sine and its cosine). ``powertrip docs`` writes the page's table
from them (``maintainers/feature_tables.py``; ``--check`` fails when it is stale), and
tests/test_features.py fails when the page or the docstring disagree with the rows.
"""

from __future__ import annotations

import re
import textwrap
from typing import NamedTuple

import numpy as np

TREND_S = 3600.0  # the power trend looks back one hour
FORECAST_QUARTERS = 4  # the forecast: four quarter hours ahead
QUARTER_S = 900.0


class FeatureRow(NamedTuple):
    """One row of the observation's documentation: consecutive features shown together."""

    names: tuple[str, ...]  # the features' names, in column order
    label: str  # what it is, in a few words
    formula: str  # how it is computed (Markdown)
    low: float
    high: float


_QUARTERS = tuple(f"forecast_power_q{q + 1}" for q in range(FORECAST_QUARTERS))

SITE_ROWS = (
    FeatureRow(("available_power_fraction",), "available power",
               "`A_i / (capacity_kw_i + pv_kw_i)`", 0, 1),
    FeatureRow(("powered_gpu_fraction",), "powered GPUs", "`n_i / gpu_count_i`", 0, 1),
    FeatureRow(("throughput",), "throughput", "`X_i / max_j(gpu_count_j · θ_j)`", 0, 1),
    FeatureRow(("compute_time",), "compute time",
               "`q / X_i / time_scale`, clipped to 1; 1 if unavailable", 0, 1),
    FeatureRow(("rtt_to_hub",), "RTT to hub", "`RTT_i / max_j RTT_j` (0 if every RTT is 0)", 0, 1),
    FeatureRow(("power_trend",), "power trend", "feature 0 now minus one hour ago", -1, 1),
    FeatureRow(("selected_last_round",), "joined",
               "1 if the site completed the last round; with non-blocking joins, the share of the"
               " training state fetched", 0, 1),
    FeatureRow(("available",), "available", "`n_i > 0` (at least one GPU can be powered)", 0, 1),
    FeatureRow(("join_time",), "join time", "`J_i / time_scale`, clipped to 1", 0, 1),
    FeatureRow(_QUARTERS, "forecast power",
               "feature 0 from the forecast issued now (no future actuals), mean over 0–15,"
               " 15–30, 30–45, 45–60 min ahead", 0, 1),
    FeatureRow(("local_time_sin", "local_time_cos"), "local time",
               "sin and cos of the site's local solar time (UTC + longitude / 15 h)", -1, 1),
)  # fmt: skip
GLOBAL_ROWS = (
    FeatureRow(("progress_to_target",), "progress", "`(a − a0) / (a* − a0)`", 0, 1),
    FeatureRow(("elapsed_fraction",), "elapsed", "elapsed time / the episode's time budget", 0, 1),
    FeatureRow(("time_of_day_sin", "time_of_day_cos"), "time of day",
               "sin and cos of the UTC time of day", -1, 1),
    FeatureRow(("last_round_time",), "last round", "last round time / `time_scale`, clipped to 1",
               0, 1),
    FeatureRow(("data_coverage",), "data coverage", "coverage of the last round (1 for IID data)",
               0, 1),
)  # fmt: skip
# The measured track's per-site telemetry (layout.SEEN_FIELDS), after each site's features above:
# what a site's last measurement said and how old it is. Only scenarios that draw unknowns have
# these columns; the known track's observation is unchanged.
AGE_SCALE_ROUNDS = 20.0  # a measurement this many rounds old reads as 1, as one never taken
TELEMETRY_ROWS = (
    FeatureRow(("measured_compute",), "measured compute",
               "`ln(measured / stated)` of the site's last compute for its quota, clipped to"
               " ±1; 0 if never measured", -1, 1),
    FeatureRow(("measured_transfer",), "measured exchange",
               "`ln(measured / stated)` of its last exchange with the hub, clipped to ±1; 0 if"
               " never measured", -1, 1),
    FeatureRow(("measured_join",), "measured join",
               "`ln(measured / stated)` of its last join, clipped to ±1; 0 if it never joined",
               -1, 1),
    FeatureRow(("measurement_age",), "measurement age",
               f"rounds since its last measurement / {AGE_SCALE_ROUNDS:g}, clipped to 1; 1 if"
               " never measured", 0, 1),
)  # fmt: skip
# A carbon task's observation (``carbon_obs=True``, the carbon tasks' IDs from -v1): what it is
# scored on. Per site, after its features above (and before the measured track's telemetry):
# the grid's carbon intensity now, two deployable forecasts of it over four windows ahead, built
# from the past alone (``params.carbon_sources``: "week", the mean of the same hour over the last
# seven days, and "yesterday"), and the share of its draw its PV covers now. Then, after the
# global features, the job's: time left, the time the work left takes at the current pace, and
# the carbon emitted so far. Intensities are in units of INTENSITY_SCALE g CO2eq/kWh.
INTENSITY_SCALE = 1000.0  # g/kWh: above every zone's hourly life-cycle intensity in the data
CARBON_WINDOWS_H = ((0.0, 3.0), (3.0, 6.0), (6.0, 12.0), (12.0, 24.0))  # forecast windows ahead
WEEK_DAYS = 7  # the "week" forecast's days (params.carbon_sources)
PACE_SCALE = 2.0  # finish_at_pace: twice the time left reads as 1
_WINDOWS = tuple(f"{a:g}-{b:g}h" for a, b in CARBON_WINDOWS_H)
CARBON_SITE_ROWS = (
    FeatureRow(("grid_intensity",), "grid intensity",
               f"the zone's carbon intensity now, g/kWh / {INTENSITY_SCALE:g}, clipped to 1",
               0, 1),
    FeatureRow(tuple(f"intensity_week_{w}" for w in _WINDOWS), "intensity, week forecast",
               "mean over 0–3, 3–6, 6–12, 12–24 h ahead of the mean of the same hour over the "
               "last 7 days already past (early in the trace, the days it has, in turn), g/kWh / "
               f"{INTENSITY_SCALE:g}, clipped to 1", 0, 1),
    FeatureRow(tuple(f"intensity_yesterday_{w}" for w in _WINDOWS),
               "intensity, yesterday's", "the same windows of the same hour yesterday", 0, 1),
    FeatureRow(("pv_share",), "PV share",
               "on-site PV output / the draw of the site's powered GPUs, clipped to 1 (0 when "
               "none is powered)", 0, 1),
)  # fmt: skip
CARBON_JOB_ROWS = (
    FeatureRow(("time_left",), "time left", "(deadline − now) / the episode's time budget", 0, 1),
    FeatureRow(("finish_at_pace",), "work left at pace",
               "seconds to the target at the progress per second of the last round that taught"
               f" anything, / time left / {PACE_SCALE:g}, clipped to 1; 1 before one has", 0, 1),
    FeatureRow(("carbon_so_far",), "carbon so far",
               "grid carbon emitted / `carbon_ref_kg`, clipped to 1", 0, 1),
)  # fmt: skip
TIME_SCALE_NOTE = (
    "`time_scale` is 20 times the fastest site's full-power compute time for one round"
    " (4 · `round_s` in `fixed_time` mode)."
)


def _names(rows: tuple[FeatureRow, ...]) -> tuple[str, ...]:
    return tuple(name for row in rows for name in row.names)


def _bound(rows: tuple[FeatureRow, ...], field: str) -> np.ndarray:
    return np.array([getattr(row, field) for row in rows for _ in row.names], dtype=np.float32)


SITE_FEATURES = _names(SITE_ROWS)
GLOBAL_FEATURES = _names(GLOBAL_ROWS)
N_SITE_FEATURES, N_GLOBAL = len(SITE_FEATURES), len(GLOBAL_FEATURES)
SITE_LOW, SITE_HIGH = _bound(SITE_ROWS, "low"), _bound(SITE_ROWS, "high")
TELEMETRY_FEATURES = _names(TELEMETRY_ROWS)
N_TELEMETRY = len(TELEMETRY_FEATURES)
TELEMETRY_LOW, TELEMETRY_HIGH = _bound(TELEMETRY_ROWS, "low"), _bound(TELEMETRY_ROWS, "high")
GLOBAL_LOW, GLOBAL_HIGH = _bound(GLOBAL_ROWS, "low"), _bound(GLOBAL_ROWS, "high")
CARBON_SITE_FEATURES, CARBON_JOB_FEATURES = _names(CARBON_SITE_ROWS), _names(CARBON_JOB_ROWS)
N_CARBON_SITE, N_CARBON_JOB = len(CARBON_SITE_FEATURES), len(CARBON_JOB_FEATURES)
CARBON_SITE_LOW, CARBON_SITE_HIGH = (
    _bound(CARBON_SITE_ROWS, "low"),
    _bound(CARBON_SITE_ROWS, "high"),
)
CARBON_JOB_LOW, CARBON_JOB_HIGH = _bound(CARBON_JOB_ROWS, "low"), _bound(CARBON_JOB_ROWS, "high")

# The slots the kernel writes (numba reads them as constants).
_site, _global = SITE_FEATURES.index, GLOBAL_FEATURES.index
F_POWER = _site("available_power_fraction")
F_POWERED = _site("powered_gpu_fraction")
F_THROUGHPUT = _site("throughput")
F_COMPUTE = _site("compute_time")
F_RTT = _site("rtt_to_hub")
F_TREND = _site("power_trend")
F_JOINED = _site("selected_last_round")  # the one site feature that depends on the episode
F_AVAILABLE = _site("available")
F_JOIN_TIME = _site("join_time")
F_FORECAST = _site(_QUARTERS[0])  # the first of FORECAST_QUARTERS
F_LOCAL_SIN = _site("local_time_sin")
F_LOCAL_COS = _site("local_time_cos")
G_PROGRESS = _global("progress_to_target")
G_ELAPSED = _global("elapsed_fraction")
G_DAY_SIN = _global("time_of_day_sin")
G_DAY_COS = _global("time_of_day_cos")
G_LAST_ROUND = _global("last_round_time")
G_COVERAGE = _global("data_coverage")
# a carbon task's: per site from N_SITE_FEATURES, the job's from N_GLOBAL
_csite, _cjob = CARBON_SITE_FEATURES.index, CARBON_JOB_FEATURES.index
FC_INTENSITY = _csite("grid_intensity")
FC_WEEK = _csite(f"intensity_week_{_WINDOWS[0]}")
FC_YESTERDAY = _csite(f"intensity_yesterday_{_WINDOWS[0]}")
FC_PV_SHARE = _csite("pv_share")
GC_TIME_LEFT = _cjob("time_left")
GC_FINISH = _cjob("finish_at_pace")
GC_CARBON = _cjob("carbon_so_far")

# --------------------------------------------------------------------------- the docstring's table


def bound_text(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else str(x)


def _span(first: int, count: int, dash: str) -> str:
    return str(first) if count == 1 else f"{first}{dash}{first + count - 1}"


def column_spans(rows: tuple[FeatureRow, ...], dash: str) -> list[str]:
    """Each row's column numbers: ``3``, or a range such as ``9–12``."""
    out, first = [], 0
    for row in rows:
        out.append(_span(first, len(row.names), dash))
        first += len(row.names)
    return out


def env_table(width: int = 60) -> str:
    """The observation table of ``PowerTripEnv``'s docstring, unindented: columns aligned, the
    text wrapped at ``width`` onto continuation rows so that ``help()`` stays readable."""
    body = []
    for prefix, rows in (
        (f"{N_SITE_FEATURES}i + ", SITE_ROWS),
        (f"{N_SITE_FEATURES}N + ", GLOBAL_ROWS),
    ):
        for span, row in zip(column_spans(rows, ".."), rows, strict=True):
            first, *more = textwrap.wrap(
                f"{row.label}: {row.formula}", width, break_on_hyphens=False
            )
            body.append((prefix + span, first, bound_text(row.low), bound_text(row.high)))
            body += [("", text, "", "") for text in more]
    head = ("Num", "Observation (per site i, then global)", "Min", "Max")
    widths = [max(len(r[j]) for r in [head, *body]) for j in range(4)]

    def line(cells: tuple[str, ...]) -> str:
        return "| " + " | ".join(c.ljust(w) for c, w in zip(cells, widths, strict=True)) + " |"

    rule = "|" + "|".join("-" * (w + 2) for w in widths) + "|"
    note = textwrap.wrap(TIME_SCALE_NOTE, 92)
    return "\n".join([line(head), rule, *(line(r) for r in body), "", *note])


ENV_TABLE_PLACEHOLDER = "<observation table: powertrip_env.dynamics.features.env_table()>"


def document_env(doc: str | None) -> str | None:
    """``doc`` with its placeholder line replaced by `env_table`, indented as that line was
    (``None`` stays ``None``: ``python -OO`` strips docstrings)."""
    if doc is None:
        return None
    match = re.search(r"^([ \t]*)" + re.escape(ENV_TABLE_PLACEHOLDER) + r"$", doc, re.MULTILINE)
    if match is None:
        raise ValueError("the docstring has no observation table placeholder")
    indent = match.group(1)
    table = "\n".join(indent + line if line else "" for line in env_table().splitlines())
    return doc[: match.start()] + table + doc[match.end() :]
