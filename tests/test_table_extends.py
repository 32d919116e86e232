"""``[table] extends = "<scenario>"``: a table written once and taken by scenarios with other
bases. The measured tasks' eight spreads live in measured.toml alone; the wide and carbon
measured tasks take them, so a changed spread changes all three, and their fingerprints (which
hash the resolved scenario) did not move when the copies went (tests/test_versions.py)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from powertrip_env.errors import ScenarioError
from powertrip_env.scenario import load_scenario, scenario_path


def _spreads(name: str | Path) -> dict[str, float]:
    return dataclasses.asdict(load_scenario(name).unknowns)


@pytest.mark.parametrize("name", ["wide-measured", "carbon-measured"])
def test_the_measured_tasks_take_the_spreads_written_once(name: str) -> None:
    assert _spreads(name) == _spreads("measured")
    text = scenario_path(name).read_text(encoding="utf-8")
    assert 'extends = "measured"' in text and "throughput_sigma" not in text
    assert len(load_scenario(name).sites) != len(load_scenario("measured").sites)  # own base


def test_own_fields_of_the_table_replace_the_taken_ones(tmp_path: Path) -> None:
    path = tmp_path / "mine.toml"
    path.write_text(
        'extends = "default"\n\n[unknowns]\nextends = "measured"\nrtt_sigma = 0.05\n',
        encoding="utf-8",
    )
    mine, measured = _spreads(path), _spreads("measured")
    assert mine["rtt_sigma"] == 0.05
    assert {k: v for k, v in mine.items() if k != "rtt_sigma"} == {
        k: v for k, v in measured.items() if k != "rtt_sigma"
    }
    assert load_scenario(path).sites == load_scenario("default").sites  # the base's, not its


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("3", r"\[unknowns\] field 'extends' = 3: must be a scenario name"),
        (
            '"mesured"',
            r"\[unknowns\] field 'extends' = 'mesured': not a shipped scenario.*"
            r"did you mean 'measured'\?",
        ),
        (
            '"default"',
            r"\[unknowns\] field 'extends' = 'default': .*default.toml has no "
            r"\[unknowns\] table",
        ),
        ('"mine.toml"', r"\[unknowns\] field 'extends' forms a cycle through .*mine.toml"),
    ],
)
def test_a_bad_table_extends_names_the_file_the_table_and_the_value(
    tmp_path: Path, value: str, expected: str
) -> None:
    path = tmp_path / "mine.toml"
    path.write_text(f'extends = "default"\n\n[unknowns]\nextends = {value}\n', encoding="utf-8")
    with pytest.raises(ScenarioError, match=expected) as caught:
        load_scenario(path)
    assert str(path) in str(caught.value)
