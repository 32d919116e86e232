"""How much of a measured task's room measuring wins back, which unknown holds it, and a sweep.

On a measured task (``powertrip_env.MEASURED_SUITE_IDS``, or any scenario with ``[unknowns]``)
each episode's sites and job depart from the stated values (docs/measured.md). This report plays,
on the same paired episodes:

* the lookahead rules on the stated values (``registry.LOOKAHEAD``);
* the same rules fed their online estimates (``registry.ADAPTIVE``);
* the same rules told the episode's draw (``registry.INFORMED``);
* ``HorizonRule`` told one kind of factor at a time (``Informed(..., told=...)``): the
  throughputs, the links (RTT and bandwidth), the joins, the job's pace and noise scale;

and gives the *stated-model room* (best stated-values rule / best informed), the *learnable
room* (best adaptive / best informed: what an agent may take), the share of the stated-model
room measuring recovers, and each kind's share of HorizonRule's room. ``--sweep FIELD=V1,V2``
runs it again with one ``[unknowns]`` field (or ``[episode] jitter_sigma``: the noise of the
telemetry) at each value, the rest as the task ships them. No clairvoyant plan runs, so it is
minutes where the benchmark takes a quarter of an hour.

Command line::

    powertrip room --env PowerTrip-Measured-v0 --episodes 30
    powertrip room --env PowerTrip-Measured-v0 --sweep slow_probability=0,0.2,0.3

It prints a table and, as its last line, one JSON object: ``{"env", "episodes", "jitter",
"settings": [{"field", "value", "mean_tta_h": {policy: hours}, "stated_room",
"learnable_room", "recovered", "told_share": {kind: share}}]}``.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np

import powertrip_env
from powertrip_env.baselines.adaptive import Informed
from powertrip_env.baselines.registry import ADAPTIVE, INFORMED, LOOKAHEAD, make_policy
from powertrip_env.dynamics.layout import SPREAD_FIELDS
from powertrip_env.errors import EvaluationError
from powertrip_env.harness.arguments import add_env, add_episodes, add_seed, report_cli
from powertrip_env.harness.evaluation.evaluate import evaluate
from powertrip_env.scenario import load_scenario

TOLD = {
    "throughput": ("throughput",),
    "links": ("rtt", "bandwidth"),
    "joins": ("join",),
    "job": ("pace", "noise"),
}
"""The kinds of factor ``HorizonRule`` is told one at a time (``UnknownFactors``' fields)."""
SWEEPABLE = (*SPREAD_FIELDS, "jitter_sigma")
"""What ``--sweep`` may move: an ``[unknowns]`` field, or the telemetry's noise."""


def told_name(kind: str) -> str:
    return f"HorizonRule told {kind}"


def _policies(n_sites: int, seed: int) -> list[Any]:
    names = [*LOOKAHEAD, *ADAPTIVE, *INFORMED]
    out = [make_policy(name, n_sites, seed) for name in names]
    for kind, fields in TOLD.items():
        out.append(Informed(make_policy("HorizonRule", n_sites, seed), told_name(kind), fields))
    return out


def setting(
    env_id: str,
    *,
    episodes: int,
    seed: int = 0,
    jitter: bool = True,
    scenario: str | None = None,
    progress: bool = False,
) -> dict[str, Any]:
    """One setting's means and rooms, on ``env_id``'s test episodes (``scenario``: another
    scenario run under the ID's registration)."""
    kwargs: dict[str, Any] = {"jitter": jitter}
    if scenario is not None:
        kwargs["scenario"] = scenario
    probe = gym.make(env_id, split="test", **kwargs)
    try:
        inner = probe.unwrapped
        if not inner.params.measured:
            raise EvaluationError(
                f"{env_id} draws no unknowns: the room report needs a measured task (one of "
                f"{', '.join(powertrip_env.MEASURED_SUITE_IDS)}, or a scenario with [unknowns])"
            )
        result = evaluate(
            env_id,
            _policies(inner.n_sites, seed),
            episodes=episodes,
            split="test",
            seed=seed,
            env_kwargs=kwargs,
            progress=progress,
            probe=probe,
        )
    finally:
        probe.close()
    mean = result.episodes.groupby("policy")["tta_h"].mean()
    return rooms({str(k): float(v) for k, v in mean.items()})


def rooms(mean: dict[str, float]) -> dict[str, Any]:
    """The rooms and shares from each policy's mean TTA (hours)."""
    stated = min(mean[name] for name in LOOKAHEAD)
    adaptive = min(mean[name] for name in ADAPTIVE)
    informed = min(mean[name] for name in INFORMED)
    horizon_room = mean["HorizonRule"] - mean["Informed"]
    shares = {
        kind: (mean["HorizonRule"] - mean[told_name(kind)]) / horizon_room
        if horizon_room > 0
        else 0.0
        for kind in TOLD
    }
    return {
        "mean_tta_h": mean,
        "stated_room": stated / informed,
        "learnable_room": adaptive / informed,
        "recovered": (stated - adaptive) / (stated - informed) if stated > informed else 0.0,
        "told_share": shares,
    }


def room(
    env_id: str,
    *,
    episodes: int = 30,
    seed: int = 0,
    jitter: bool = True,
    sweep: tuple[str, list[float]] | None = None,
    progress: bool = False,
) -> dict[str, Any]:
    """The report: the task as shipped, then each value of ``sweep`` (field, values)."""
    settings = [
        {
            "field": "shipped",
            "value": None,
            **setting(env_id, episodes=episodes, seed=seed, jitter=jitter, progress=progress),
        }
    ]
    if sweep is not None:
        field, values = sweep
        base = load_scenario(gym.spec(env_id).kwargs["scenario"]).source
        with tempfile.TemporaryDirectory() as folder:
            for value in values:
                path = Path(folder) / f"{field}-{value}.toml"
                table = "episode" if field == "jitter_sigma" else "unknowns"
                path.write_text(
                    f'extends = "{Path(base).as_posix()}"\nname = "room-sweep"\n'
                    f"[{table}]\n{field} = {value!r}\n",
                    encoding="utf-8",
                )
                out = setting(
                    env_id,
                    episodes=episodes,
                    seed=seed,
                    jitter=jitter,
                    scenario=str(path),
                    progress=progress,
                )
                settings.append({"field": field, "value": value, **out})
    return {"env": env_id, "episodes": episodes, "jitter": jitter, "settings": settings}


def to_markdown(report: dict[str, Any]) -> str:
    """One row per setting: the best of each kind of rule, the rooms and the shares."""
    kinds = list(TOLD)
    lines = [
        f"# The room of {report['env']}",
        "",
        f"{report['episodes']} paired test episodes per setting, time jitter "
        f"{'on' if report['jitter'] else 'off'}. Mean TTA (h) of the best rule on the stated "
        "values, the best adaptive rule and the best rule told the draw; the rooms; the share "
        "of the stated-model room measuring recovers; and the share of HorizonRule's room "
        "each kind of factor closes when it alone is told.",
        "",
        "| setting | stated (h) | adaptive (h) | told the draw (h) | stated-model room | "
        "learnable room | recovered | " + " | ".join(f"told {k}" for k in kinds) + " |",
        "|---|---:|---:|---:|---:|---:|---:|" + "---:|" * len(kinds),
    ]
    for s in report["settings"]:
        mean = s["mean_tta_h"]
        name = "as shipped" if s["field"] == "shipped" else f"{s['field']} = {s['value']:g}"
        best = [min(mean[n] for n in group) for group in (LOOKAHEAD, ADAPTIVE, INFORMED)]
        cells = [f"{b:.2f}" for b in best]
        cells += [f"{s['stated_room']:.3f}", f"{s['learnable_room']:.3f}", f"{s['recovered']:.0%}"]
        cells += [f"{s['told_share'][k]:.0%}" for k in kinds]
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def _sweep(text: str) -> tuple[str, list[float]]:
    field, sep, values = text.partition("=")
    if not sep or field not in SWEEPABLE:
        raise argparse.ArgumentTypeError(
            f"{text!r}: expected FIELD=V1,V2,... with FIELD one of {', '.join(SWEEPABLE)}"
        )
    try:
        numbers = [float(v) for v in values.split(",") if v.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: the values must be numbers") from None
    if not numbers or not all(np.isfinite(numbers)) or min(numbers) < 0.0:
        raise argparse.ArgumentTypeError(f"{text!r}: give finite numbers >= 0")
    return field, numbers


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="powertrip room", description=__doc__)
    add_env(parser, "PowerTrip-Measured-v0", what="a measured task (a scenario with [unknowns])")
    add_episodes(parser, 30)
    add_seed(parser)
    parser.add_argument(
        "--sweep",
        type=_sweep,
        default=None,
        metavar="FIELD=V1,V2",
        help=f"also run with one of {', '.join(SWEEPABLE)} at each value",
    )
    parser.add_argument(
        "--no-jitter",
        action="store_true",
        help="without time jitter, as the benchmark runs: every measurement exact",
    )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    return report_cli(
        lambda: room(
            args.env,
            episodes=args.episodes,
            seed=args.seed,
            jitter=not args.no_jitter,
            sweep=args.sweep,
        ),
        to_markdown,
    )


if __name__ == "__main__":
    sys.exit(main())
