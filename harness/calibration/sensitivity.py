"""Do the conclusions survive the calibrated knobs' published ranges? A one-at-a-time sweep.

Each knob that decides which sites win, and that docs/calibration.md sets from a published
figure or a modelling choice, is moved across its published range while the others stay as
shipped: the sites' WAN bandwidth, the fixed start-up of a join, the synchronisation rule, the
replica penalty and the grid's share of the sites' power. For each setting the references and
the main policies run on the same paired test episodes
(``powertrip_env.harness.reports.headroom``), and
the table gives their mean time to accuracy, the sequential headroom, and Kendall's τ between the
setting's ranking of the policies and the shipped scenario's.

Command line::

    powertrip sensitivity --env PowerTrip-v0 --episodes 10

It prints the table and, as its last line, one JSON object: ``{"env", "episodes",
"settings": [{"knob", "value", "mean_tta_h": {policy: hours}, "headroom",
"all_sites_success", "kendall_tau"}]}``.

On a task of the moving track (``powertrip sensitivity --env PowerTrip-Moving-v0``) it sweeps
the moving world's processes instead (``MOVING_SETTINGS``, ``room_sweep``): where the room is,
``{"env", "episodes", "policies", "room": [{"knob", "value", "mean_tta_h", "best_adaptive",
"stated_room", "recovered", "learnable_room", "monitor_room"}]}``.
"""

from __future__ import annotations

import csv
import json
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import gymnasium as gym

import powertrip_env
from powertrip_env.errors import EvaluationError
from powertrip_env.harness.arguments import report_cli, report_parser
from powertrip_env.harness.calibration.validate import kendall_tau
from powertrip_env.harness.evaluation.evaluate import evaluate
from powertrip_env.harness.reports.headroom import POLICIES, headroom


@dataclass(frozen=True)
class Setting:
    """One point of the sweep: TOML overrides of the scenario, and catalogue column changes."""

    knob: str
    value: str
    toml: dict[str, dict[str, Any]] = field(default_factory=dict)
    catalogue: dict[str, Any] = field(default_factory=dict)  # column -> value or callable(row)


SHIPPED = Setting("shipped", "as calibrated")
SETTINGS = (
    SHIPPED,
    # INTELLECT-1: the links fluctuated between 0.5 and 4 Gb/s
    Setting("WAN bandwidth", "every site 0.5 Gb/s", catalogue={"wan_gbps": 0.5}),
    Setting("WAN bandwidth", "every site 4 Gb/s", catalogue={"wan_gbps": 4.0}),
    # no published start-up time: a minute to a quarter of an hour
    Setting("join start-up", "60 s", toml={"network": {"join_fixed_s": 60.0}}),
    Setting("join start-up", "900 s", toml={"network": {"join_fixed_s": 900.0}}),
    # INTELLECT-1's second mode: the joiner fetches while the others train
    Setting("joins", "non-blocking", toml={"network": {"join_mode": "non_blocking"}}),
    # Dynamic Local Updates (Liu et al. 2024): steps in proportion to speed
    # (the sweep runs without jitter, so a grace cap, which stops windows slowed by jitter, would
    # not bind: it is left out)
    Setting(
        "synchronisation",
        "time-balanced, 240 s rounds",
        toml={"workload": {"round_mode": "fixed_time", "round_s": 240.0}},
    ),
    # the replica penalty: B0 for tokens ratios of about 1.7 and 1.4 at 8 sites (the anchors
    # of Table 4 at 1.3B and 2.4B span 1.37-1.55)
    Setting("replica penalty", "higher (B0 = 2,500)", toml={"workload": {"noise_b0": 2500.0}}),
    Setting("replica penalty", "lower (B0 = 6,000)", toml={"workload": {"noise_b0": 6000.0}}),
    # the grid's share of each site's power (docs/data.md: a modelling choice)
    Setting("grid share of power", "grid capacity × 0.5", catalogue={"capacity_kw": 0.5}),
    Setting("grid share of power", "grid capacity × 1.5", catalogue={"capacity_kw": 1.5}),
)
_SCALED = {"capacity_kw"}  # catalogue columns a setting multiplies; the others it replaces


def _moving(knob: str, value: str, **fields: float) -> Setting:
    return Setting(knob, value, toml={"moving": dict(fields)})


# The moving track's processes (docs/moving.md), each rate, duration and depth at the ends of its
# published range (docs/references.md, "A world that moves"; no figure exists for the links'
# rate, which spans a failure a quarter to a congestion a day), and each process alone off: which
# holds the room.
MOVING_SETTINGS = (
    SHIPPED,
    _moving("fail-slow", "off", slow_per_day=0.0),
    _moving("fail-slow rate", "0.1 a day", slow_per_day=0.1),
    _moving("fail-slow rate", "4 a day", slow_per_day=4.0),
    _moving("fail-slow duration", "10 min", slow_hours=1.0 / 6.0),
    _moving("fail-slow duration", "72 min", slow_hours=1.2),
    _moving("fail-slow factor", "1.1", slow_factor=1.1),
    _moving("fail-slow factor", "2", slow_factor=2.0),
    _moving("fail-slow factor", "3", slow_factor=3.0),
    _moving("fail-slow factor", "5", slow_factor=5.0),
    _moving("link excursion", "off", link_per_day=0.0),
    _moving("link rate", "0.013 a day", link_per_day=0.013),
    _moving("link rate", "1 a day", link_per_day=1.0),
    _moving("link duration", "10 min", link_hours=1.0 / 6.0),
    _moving("link duration", "12 h", link_hours=12.0),
    _moving("link depth", "0.25", link_depth=0.25),
    _moving("link depth", "0.9", link_depth=0.9),
    _moving("power callback", "off", callback_per_day=0.0),
    _moving("callback rate", "0.01 a day", callback_per_day=0.01),
    _moving("callback rate", "0.4 a day", callback_per_day=0.4),
    _moving("callback duration", "1 h", callback_hours=1.0),
    _moving("callback duration", "6 h", callback_hours=6.0),
    _moving("callback depth", "0.1", callback_depth=0.1),
    _moving("callback depth", "0.5", callback_depth=0.5),
    _moving(
        "all three",
        "at their range's top",
        slow_per_day=4.0,
        slow_hours=1.2,
        slow_factor=5.0,
        link_per_day=1.0,
        link_hours=12.0,
        link_depth=0.9,
        callback_per_day=0.4,
        callback_hours=6.0,
        callback_depth=0.5,
    ),
)
ROOM_POLICIES = ("HorizonRule", "AdaptiveHorizon", "TrackingHorizon", "InformedDraw", "Informed")
"""What the moving sweep plays: the rule on the stated model, the adaptive and tracking rules
(the deployable baselines), and the rule told the draw alone and with a perfect monitor."""


def write_setting(setting: Setting, env_id: str, folder: Path) -> str | None:
    """A scenario file for ``setting`` that ``extends`` the ID's own; None for the shipped one."""
    if setting is SHIPPED:
        return None
    base = _scenario_of(env_id)
    scenario = powertrip_env.load_scenario(base)
    sections: dict[str, dict[str, Any]] = {k: dict(v) for k, v in setting.toml.items()}
    if setting.catalogue:
        if not scenario.sites_source.endswith(".csv"):
            raise EvaluationError(
                f"{env_id}: the setting {setting.knob!r} rewrites the site catalogue, and this "
                f"scenario writes its sites inline in {scenario.sites_source}; sweep a scenario "
                "with a [sites] catalogue file"
            )
        with open(scenario.sites_source, newline="") as fh:  # the catalogue CSV, resolved
            rows = list(csv.DictReader(fh))
        if [row["name"] for row in rows] != [s.name for s in scenario.sites]:
            raise EvaluationError(f"{scenario.sites_source}: its sites are not the scenario's")
        # a new catalogue drops what the base tied to its own (extends: TIED_FIELDS), so
        # the shares as loaded and any measured RTTs are written out again
        for row, loaded in zip(rows, scenario.sites, strict=True):
            row["data_share"] = repr(loaded.data_share)
        if scenario.network.rtt_to_hub_ms is not None:
            sections.setdefault("network", {})["rtt_to_hub_ms"] = list(
                scenario.network.rtt_to_hub_ms
            )
        for row in rows:
            for column, value in setting.catalogue.items():
                old = float(row[column])
                row[column] = f"{old * value:g}" if column in _SCALED else f"{value:g}"
        path = folder / f"sites-{len(list(folder.iterdir()))}.csv"
        with open(path, "w", newline="") as fh:
            writer = csv.DictWriter(fh, fieldnames=list(rows[0]), lineterminator="\n")
            writer.writeheader()
            writer.writerows(rows)
        sections.setdefault("sites", {}).update(
            {"catalogue": path.name, "hub": scenario.network.hub}
        )
    lines = [f'extends = "{base}"', f'name = "{scenario.name}-sensitivity"']
    for section, values in sections.items():
        lines.append(f"[{section}]")
        for key, value in values.items():
            lines.append(f"{key} = {json.dumps(value)}")
    path = folder / f"setting-{len(list(folder.iterdir()))}.toml"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return str(path)


def sensitivity(
    env_id: str = "PowerTrip-v0",
    *,
    episodes: int = 10,
    seed: int = 0,
    settings: Sequence[Setting] = SETTINGS,
    progress: bool = False,
) -> dict[str, Any]:
    """Run every setting on the same paired test episodes; see the module docstring."""
    rows = []
    with tempfile.TemporaryDirectory(prefix="powertrip-sensitivity-") as tmp:
        for setting in settings:
            scenario = write_setting(setting, env_id, Path(tmp))
            summary, frame = headroom(
                env_id, episodes=episodes, seed=seed, scenario=scenario, progress=progress
            )
            success = frame.groupby("policy")["success"].mean()
            rows.append(
                {
                    "knob": setting.knob,
                    "value": setting.value,
                    "mean_tta_h": summary["mean_tta_h"],
                    "headroom": summary["beam_headroom"],
                    "all_sites_success": round(float(success["AllSites"]), 3),
                }
            )
    names = [p for p in POLICIES if p in rows[0]["mean_tta_h"]]
    reference = [rows[0]["mean_tta_h"][p] for p in names]
    for row in rows:
        row["kendall_tau"] = round(kendall_tau(reference, [row["mean_tta_h"][p] for p in names]), 3)
    return {"env": env_id, "episodes": episodes, "policies": names, "settings": rows}


def room_sweep(
    env_id: str = "PowerTrip-Moving-v0",
    *,
    episodes: int = 10,
    seed: int = 0,
    settings: Sequence[Setting] = MOVING_SETTINGS,
    progress: bool = False,
) -> dict[str, Any]:
    """Where a moving task's room is, at each setting of its processes: on the same paired test
    episodes (no jitter, as the benchmark plays them), the stated-model room (HorizonRule over
    Informed), the share of it the best adaptive rule recovers, the learnable room (best
    adaptive over Informed: what a perfect monitor buys) and the monitor's own (InformedDraw
    over Informed)."""
    rows = []
    with tempfile.TemporaryDirectory(prefix="powertrip-sensitivity-") as tmp:
        for setting in settings:
            scenario = write_setting(setting, env_id, Path(tmp))
            kwargs: dict[str, Any] = {"jitter": False}
            if scenario is not None:
                kwargs["scenario"] = scenario
            result = evaluate(
                env_id,
                ROOM_POLICIES,
                episodes=episodes,
                seed=seed,
                env_kwargs=kwargs,
                progress=progress,
            )
            mean = result.episodes.groupby("policy")["tta_h"].mean()
            best = min(("AdaptiveHorizon", "TrackingHorizon"), key=lambda name: mean[name])
            stated, informed = float(mean["HorizonRule"]), float(mean["Informed"])
            cost = stated - informed
            rows.append(
                {
                    "knob": setting.knob,
                    "value": setting.value,
                    "mean_tta_h": {p: round(float(mean[p]), 4) for p in ROOM_POLICIES},
                    "best_adaptive": best,
                    "stated_room": round(stated / informed, 4),
                    "recovered": round((stated - float(mean[best])) / cost, 3) if cost else 1.0,
                    "learnable_room": round(float(mean[best]) / informed, 4),
                    "monitor_room": round(float(mean["InformedDraw"]) / informed, 4),
                }
            )
    return {"env": env_id, "episodes": episodes, "policies": list(ROOM_POLICIES), "room": rows}


def room_markdown(report: dict[str, Any]) -> str:
    """One row per setting of the moving sweep: mean TTA per policy and the rooms."""
    names = report["policies"]
    head = (
        "| knob | setting | " + " | ".join(names) + " | stated room | recovered | learnable room |"
    )
    lines = [f"`{report['env']}`:", ""] if report.get("titled") else []
    lines += [head, "|---|---|" + "---:|" * (len(names) + 3)]
    for row in report["room"]:
        cells = [f"{row['mean_tta_h'][p]:.2f}" for p in names]
        lines.append(
            f"| {row['knob']} | {row['value']} | "
            + " | ".join(cells)
            + f" | {row['stated_room']:.3f} | {row['recovered']:.0%} | "
            f"{row['learnable_room']:.3f} |"
        )
    lines += [
        "",
        f"Mean time to accuracy (h) over {report['episodes']} paired test episodes without time "
        "jitter; one of the moving world's knobs moved at a time, the others as shipped. Stated "
        "room = HorizonRule / Informed; recovered = the share of it the best adaptive rule "
        "(AdaptiveHorizon or TrackingHorizon) takes; learnable room = that rule / Informed, "
        "which monitors every process perfectly (docs/moving.md).",
    ]
    return "\n".join(lines) + "\n"


def to_markdown(report: dict[str, Any]) -> str:
    """One row per setting: mean TTA per policy, headroom and τ against the shipped ranking."""
    names = report["policies"]
    head = "| knob | setting | " + " | ".join(names) + " | headroom | AllSites success | τ |"
    lines = [head, "|---|---|" + "---:|" * (len(names) + 3)]
    for row in report["settings"]:
        cells = [f"{row['mean_tta_h'][p]:.2f}" for p in names]
        lines.append(
            f"| {row['knob']} | {row['value']} | "
            + " | ".join(cells)
            + f" | {row['headroom']:.3f} | {row['all_sites_success']:.0%} | "
            f"{row['kendall_tau']:.2f} |"
        )
    lines += [
        "",
        f"Mean time to accuracy (h) over {report['episodes']} paired test episodes without time "
        "jitter; one knob moved at a time, the others as shipped. τ: Kendall's τ between the "
        "setting's ranking of the policies and the shipped scenario's (1 = the same order).",
    ]
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    """Command-line entry point; returns the exit code (2 for bad arguments)."""
    parser = report_parser(
        "powertrip sensitivity",
        "Sweep the calibrated knobs across their published ranges.",
        episodes=10,
    )
    args = parser.parse_args(argv)
    if _moves(args.env):  # the moving track: where its room is, over its processes' ranges
        return report_cli(
            lambda: room_sweep(
                args.env, episodes=args.episodes, seed=args.seed, progress=sys.stderr.isatty()
            ),
            room_markdown,
        )
    return report_cli(
        lambda: sensitivity(
            args.env, episodes=args.episodes, seed=args.seed, progress=sys.stderr.isatty()
        ),
        to_markdown,
    )


def _moves(env_id: str) -> bool:
    """Whether ``env_id``'s scenario has a moving world ([moving])."""
    try:
        base = _scenario_of(env_id)
    except gym.error.Error:
        return False  # report_cli names the unknown ID
    return powertrip_env.load_scenario(base).moving.on


def _scenario_of(env_id: str) -> str:
    """The named scenario ``env_id`` is registered with."""
    return gym.spec(env_id).kwargs.get("scenario", "default")


if __name__ == "__main__":
    sys.exit(main())
