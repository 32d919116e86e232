"""Each site's available power on the episode's calendar, from a scenario's traces.

A scenario may draw on three files recorded at different places and times: a grid trace (the
utilisation ``u`` of power domains by other load), a PV trace (output ``s`` as a fraction of
peak) and PV forecasts. This module lays them on one calendar and turns them into watts:

    A_i(t) = capacity_kw_i · (1 − u_i(t + shift_i)) + pv_kw_i · s_i(t)

where ``shift_i`` replays the grid trace on the PV's calendar and, if asked, in the site's local
time (``TraceFiles.site_shift_s``). The calendar is the stretch every file covers for every
site; days of the train and test splits are counted from its start.

The forecast of ``A_i`` issued at row k for row k + h keeps the grid part at its current value
(no grid forecast is published, and real spare capacity moves slowly; docs/model.md) and takes
the PV part from the PV forecast issued at row k. Horizon 0 is the actual current power, which
a policy knows when the round starts. Without a forecast file the forecast is the current
power (persistence), one horizon deep.

With a carbon intensity file (``[trace] carbon_file``) each row also carries the grams of
CO₂-equivalent a joule drawn from the grid emits at the site, from its zone's hourly intensity
in the hour the row starts in, and the PV watts the site makes then: on-site solar is used
first and counts zero (docs/model.md, "Carbon").

Everything here runs once per scenario at load time; the simulator sees only the arrays.
"""

from __future__ import annotations

import math
import operator
from dataclasses import dataclass

import numpy as np

from powertrip_env.errors import ScenarioError, TraceError
from powertrip_env.scenario.carbon_data import check_covers, load_carbon
from powertrip_env.scenario.power_data import (
    PowerForecast,
    PowerTrace,
    iso_utc,
    load_forecast,
    load_trace,
)
from powertrip_env.scenario.types import Scenario
from powertrip_env.units import S_PER_DAY, kw_to_w, per_kwh_to_per_j, s_to_h


@dataclass(frozen=True, eq=False)
class SitePower:
    """Available power per site on the episode calendar (all arrays read-only)."""

    t0_s: int  # Unix time of row 0
    interval_s: int
    available_w: np.ndarray  # (T, N) A_i at each row
    forecast_w: np.ndarray  # (T, H, N) forecast of A_i issued at row k for row k + h
    peak_w: np.ndarray  # (N,) the largest A_i can be: capacity plus PV peak
    sources: str  # the files, for messages
    # (T, N) the PV part of A_i, and the grid's gCO2eq per joule at each row (zeros without a
    # carbon file: then ``has_carbon`` is False and emissions are not known)
    pv_w: np.ndarray | None = None
    carbon_g_per_j: np.ndarray | None = None
    has_carbon: bool = False  # a carbon intensity file gave carbon_g_per_j (which may be 0)

    def __post_init__(self) -> None:
        for name in ("pv_w", "carbon_g_per_j"):
            if getattr(self, name) is None:
                zeros = np.zeros_like(self.available_w)
                zeros.setflags(write=False)
                object.__setattr__(self, name, zeros)

    @property
    def rows(self) -> int:
        return int(self.available_w.shape[0])

    @property
    def horizons(self) -> int:
        return int(self.forecast_w.shape[1])

    def day_rows(self, first_day: int, last_day: int, where: str) -> tuple[int, int]:
        """Rows ``[start, stop)`` of days ``first_day..last_day`` (1-based, inclusive).

        Days are 24-hour blocks from row 0. ``where`` names the scenario field asking, so that
        a bad range is reported where it was written.
        """
        try:
            first, last = operator.index(first_day), operator.index(last_day)
        except TypeError:
            raise ScenarioError(
                f"{where} = [{first_day!r}, {last_day!r}]: days must be whole numbers"
            ) from None
        per_day = S_PER_DAY // self.interval_s
        days = math.ceil(self.rows / per_day)
        if not 1 <= first <= last <= days:
            raise ScenarioError(
                f"{where} = [{first}, {last}]: the power data cover {days} day(s) ({self.sources}"
                f", from {iso_utc(self.t0_s)}), numbered 1-{days}; need 1 <= first <= last <= "
                f"{days}"
            )
        return (first - 1) * per_day, min(last * per_day, self.rows)


def site_power(scenario: Scenario) -> SitePower:
    """Load a scenario's traces and lay them on one calendar as watts per site."""
    files = scenario.trace
    grid = load_trace(files.file)
    pv = load_trace(files.pv_file) if files.pv_file is not None else None
    forecast = load_forecast(files.pv_forecast_file) if files.pv_forecast_file else None
    step = _common_step(grid, pv, forecast)
    sites = scenario.sites

    def columns(series: PowerTrace | PowerForecast, field: str, indices: list[int]) -> np.ndarray:
        """The series' column of each site in ``indices``; a miss names the site and its file."""
        found = [
            series.column_indices(
                [getattr(sites[i], field)],
                source=f"{scenario.sites_source}: site {sites[i].name!r} field {field!r}",
            )[0]
            for i in indices
        ]
        return np.array(found, dtype=np.int64)

    grid_cols = columns(grid, "trace_column", list(range(len(sites))))
    shifts = np.array([files.site_shift_s(s) for s in sites], dtype=np.int64)
    for site, shift in zip(sites, shifts, strict=True):
        if shift % step:
            raise ScenarioError(
                f"{scenario.source}: site {site.name!r} reads the grid trace shifted by "
                f"{s_to_h(shift):g} h, not a whole number of its {step}-s steps; check the UTC "
                "offsets ([trace] utc_offset_h and the sites' utc_offset_h)"
            )

    t0, rows, sources = _calendar(scenario, (grid, pv, forecast), shifts, step)

    capacity_w = kw_to_w(np.array([s.capacity_kw for s in sites]))
    pv_w = kw_to_w(np.array([s.pv_kw for s in sites]))
    t = t0 + np.arange(rows, dtype=np.int64) * step
    grid_rows = (t[:, None] + shifts[None, :] - int(grid.timestamps_s[0])) // step
    headroom_w = capacity_w * (1.0 - grid.util[grid_rows, grid_cols])
    solar = [i for i, s in enumerate(sites) if s.has_pv]
    pv_now = np.zeros((rows, len(sites)))
    if solar and pv is not None:
        cols = columns(pv, "pv_column", solar)
        pv_rows = (t - int(pv.timestamps_s[0])) // step
        pv_now[:, solar] = pv.util[pv_rows][:, cols]
    solar_w = pv_w * pv_now
    available_w = headroom_w + solar_w

    if forecast is None:
        forecast_w = available_w[:, None, :].copy()
    else:
        cols = columns(forecast, "pv_column", solar)
        pv_ahead = np.zeros((rows, forecast.horizons, len(sites)))
        issue_rows = (t - int(forecast.issued_s[0])) // step
        pv_ahead[:, :, solar] = forecast.values[issue_rows][:, :, cols]
        forecast_w = headroom_w[:, None, :] + pv_w * pv_ahead
        forecast_w[:, 0, :] = available_w  # the current interval is known when a round starts
    g_per_j = _carbon_g_per_j(scenario, t, step, rows)
    for array in (available_w, forecast_w, solar_w, g_per_j):
        array.setflags(write=False)
    return SitePower(
        t0_s=t0,
        interval_s=step,
        available_w=available_w,
        forecast_w=forecast_w,
        peak_w=capacity_w + pv_w,
        sources=sources,
        pv_w=solar_w,
        carbon_g_per_j=g_per_j,
        has_carbon=scenario.trace.carbon_file is not None,
    )


def _carbon_g_per_j(scenario: Scenario, t: np.ndarray, step: int, rows: int) -> np.ndarray:
    """(T, N) grams of CO₂-equivalent per joule drawn from each site's grid at each row: its
    zone's intensity (gCO₂eq/kWh) in the hour the row starts in; zeros without a carbon file."""
    files, sites = scenario.trace, scenario.sites
    if files.carbon_file is None:
        return np.zeros((rows, len(sites)))
    carbon = load_carbon(files.carbon_file)
    source = f"{scenario.source}: [trace] field 'carbon_file'"
    check_covers(carbon, float(t[0]), float(t[-1] + step), source)
    zones = np.array(
        [
            carbon.zone_indices(
                [s.carbon_zone],
                source=f"{scenario.sites_source}: site {s.name!r} field 'carbon_zone'",
            )[0]
            for s in sites
        ],
        dtype=np.int64,
    )
    hours = ((t - carbon.timestamps_s[0]) // carbon.step_s).astype(np.int64)
    values = carbon.lca if files.carbon_kind == "lca" else carbon.direct
    return per_kwh_to_per_j(values[hours][:, zones])


def _calendar(
    scenario: Scenario,
    series: tuple[PowerTrace, PowerTrace | None, PowerForecast | None],
    shifts: np.ndarray,
    step: int,
) -> tuple[int, int, str]:
    """(first row's time, rows, the files' names) of the calendar every series covers for
    every site after the scenario's shifts; refuses series on different grids or no overlap."""
    grid, pv, forecast = series
    files = scenario.trace
    # The calendar: what every series covers for every site, as [start, end] of row starts.
    spans = [
        (int(grid.timestamps_s[0]) - int(shift), int(grid.timestamps_s[-1]) - int(shift))
        for shift in np.unique(shifts)
    ]
    if pv is not None:
        spans.append((int(pv.timestamps_s[0]), int(pv.timestamps_s[-1])))
    if forecast is not None:
        spans.append((int(forecast.issued_s[0]), int(forecast.issued_s[-1])))
    t0, t1 = max(a for a, _ in spans), min(b for _, b in spans)
    sources = ", ".join(str(f.path) for f in (grid, pv, forecast) if f is not None)
    for start, _ in spans:
        if (start - t0) % step:
            raise TraceError(
                f"the power data ({sources}) are on different {step}-s grids: their row times "
                "must differ by whole steps (after the scenario's shifts)"
            )
    rows = (t1 - t0) // step + 1 if t1 >= t0 else 0
    if rows < 2:
        raise ScenarioError(
            f"{scenario.source}: the power data ({sources}) share no common stretch of time "
            f"after the scenario's shifts ([trace] shift_days = {files.shift_days}, grid shifts "
            f"{sorted({s_to_h(int(s)) for s in shifts})} h); check shift_days and utc_offset_h"
        )
    return t0, rows, sources


def _common_step(*series: PowerTrace | PowerForecast | None) -> int:
    steps = {s.path: s.interval_s for s in series if s is not None}
    if len(set(steps.values())) > 1:
        raise TraceError(
            "the power data have different time steps: "
            + ", ".join(f"{path} every {step} s" for path, step in steps.items())
            + "; resample them to one step"
        )
    return next(iter(steps.values()))
