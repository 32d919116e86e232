"""README.md's "Your own sites and traces" example, written out literally, must load and run.

The test reads the example from README.md itself: the ``toml`` block (saved under the name its
first comment gives), the site-catalogue columns its ``[sites] catalogue`` comment lists, the
trace format its ``[trace] file`` comment gives, and the ``python`` block that makes the
environment. It writes made-up but valid data files with exactly those columns, so a change to
the README that a user could not follow breaks this test.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
from scenario_files import write_trace

import powertrip_env  # noqa: F401  (registers the environments)

README = Path(__file__).resolve().parent.parent / "README.md"
SECTION = "### Your own sites and traces"
# docs/scenarios.md: [trace] train_days and test_days when a scenario does not set them.
DEFAULT_DAYS = {"train_days": [1, 21], "test_days": [22, 31]}


def readme_section() -> str:
    """The text of the README's section, up to the next heading (outside code blocks)."""
    lines = README.read_text(encoding="utf-8").splitlines(keepends=True)
    start = next(i for i, line in enumerate(lines) if line.strip() == SECTION) + 1
    fenced = False
    for end in range(start, len(lines)):
        fenced ^= lines[end].startswith("```")
        if not fenced and re.match(r"#{1,3} ", lines[end]):
            break
    else:
        end = len(lines)
    return "".join(lines[start:end])


def code_block(section: str, language: str) -> str:
    match = re.search(rf"^```{language}\n(.*?)^```", section, flags=re.MULTILINE | re.DOTALL)
    assert match, f"README.md, {SECTION!r}: no ```{language} block"
    return match.group(1)


def comment_of(block: str, key: str) -> str:
    """The comment after ``key = ...`` in a TOML block."""
    match = re.search(rf"^{key}\s*=.*?#\s*(.+)$", block, flags=re.MULTILINE)
    assert match, f"README.md, {SECTION!r}: no comment after {key!r} in the toml block"
    return match.group(1).strip()


def catalogue_columns(comment: str) -> tuple[list[str], list[str]]:
    """``a,b,c[,d,e]`` -> (required ``[a, b, c]``, optional ``[d, e]``)."""
    match = re.fullmatch(r"([\w,]+)(?:\[,([\w,]+)\])?", comment)
    assert match, f"README.md: cannot read the site columns from {comment!r}"
    optional = match.group(2).split(",") if match.group(2) else []
    return match.group(1).split(","), optional


def site_rows(hub: str, trace_columns: list[str]) -> list[dict[str, Any]]:
    """Three made-up sites (the first is the README's hub), each on its own power domain."""
    values = [
        (hub, "europe", 52.52, 13.40, "H100", 32, 100.0, 1.2, 10, 0.5, 0.0, "", 2.0),
        ("site-two", "north-america", 40.71, -74.01, "A100", 48, 80.0, 1.3, 10, 0.3, 0.0, "", -4.0),
        ("site-three", "asia", 35.68, 139.69, "H100", 16, 60.0, 1.1, 5, 0.2, 0.0, "", 9.0),
    ]
    keys = ("name", "region", "latitude", "longitude", "gpu", "gpu_count", "capacity_kw", "pue",
            "wan_gbps", "data_share", "pv_kw", "pv_column", "utc_offset_h")  # fmt: skip
    rows = [dict(zip(keys, row, strict=True)) for row in values]
    for row, column in zip(rows, trace_columns, strict=True):
        row["trace_column"] = column
    return rows


@pytest.mark.parametrize("with_optional", [False, True], ids=["required-columns", "all-columns"])
def test_readme_own_sites_and_traces_example_runs(tmp_path, monkeypatch, with_optional):
    section = readme_section()
    block = code_block(section, "toml")
    doc = tomllib.loads(block)
    scenario_name = re.match(r"#\s*(\S+\.toml)", block.strip())
    assert scenario_name, "the toml block's first line should name the file, e.g. # my.toml"
    (tmp_path / scenario_name.group(1)).write_text(block, encoding="utf-8")

    required, optional = catalogue_columns(comment_of(block, "catalogue"))
    columns = required + (optional if with_optional else [])
    trace_columns = ["domain_a", "domain_b", "domain_c"]
    sites = site_rows(doc["sites"]["hub"], trace_columns)
    lines = [",".join(columns)] + [",".join(str(row[c]) for c in columns) for row in sites]
    (tmp_path / doc["sites"]["catalogue"]).write_text("\n".join(lines) + "\n", encoding="utf-8")

    trace_format = comment_of(block, "file")
    assert trace_format.startswith("timestamp,"), trace_format
    days = max(doc["trace"].get(key, default)[1] for key, default in DEFAULT_DAYS.items())
    write_trace(
        tmp_path / doc["trace"]["file"],
        {
            column: (lambda rows, k=k: 0.5 + 0.3 * np.sin(2 * np.pi * rows / 288 + k))
            for k, column in enumerate(trace_columns)
        },
        days=days,
    )

    monkeypatch.chdir(tmp_path)
    namespace: dict[str, Any] = {"gym": gym}
    exec(code_block(section, "python"), namespace)  # the README's own gym.make line
    env = namespace["env"]
    scenario = env.unwrapped.scenario
    assert [s.name for s in scenario.sites] == [s["name"] for s in sites]
    assert scenario.network.hub == doc["sites"]["hub"]
    assert scenario.trace.file == (tmp_path / doc["trace"]["file"]).resolve()
    # Nothing that described the default's Google trace is left over.
    assert (scenario.trace.utc_offset_h, scenario.trace.shift_days) == (None, 0)
    assert (scenario.trace.pv_file, scenario.trace.pv_forecast_file) == (None, None)
    assert scenario.episode.time_budget_h == doc["episode"]["time_budget_h"]

    obs, _ = env.reset(seed=0)
    assert env.observation_space.contains(obs)
    obs, reward, _, _, info = env.step(np.ones(len(sites), dtype=np.int8))
    assert env.observation_space.contains(obs)
    assert np.isfinite(reward)
    assert info["elapsed_s"] > 0
    env.close()
