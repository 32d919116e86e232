"""Carbon in the model: ``info["carbon_kg"]`` against a hand computation.

Each test builds a one- or two-site scenario on files written here, so that every quantity the
emissions depend on is known by hand: a grid trace whose spare capacity never changes, a PV
trace of one constant fraction, and a carbon file of one intensity per zone (or a step). Then a
round's grid energy is its busy draw above the PV output over its busy time (idle GPUs draw less
than the PV makes, or no PV at all), and its emissions that energy times the intensity.
"""

from __future__ import annotations

from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest

import powertrip_env  # noqa: F401  (registers the IDs)
from powertrip_env.errors import ScenarioError, TraceError

T0 = "2022-06-01T00:00:00Z"
DAYS = 6
STEP_S = 300
HUB = "berlin"
SITE = (  # name, zone, latitude, longitude
    ("berlin", "DE", 52.52, 13.405),
    ("sao-paulo", "BR-CS", -23.5505, -46.6333),
)


def _times(step_s: int, rows: int) -> list[str]:
    start = np.datetime64(T0.rstrip("Z"), "s")
    return [f"{start + np.timedelta64(k * step_s, 's')}Z" for k in range(rows)]


def write_world(
    folder: Path,
    *,
    sites: int = 1,
    pv_fraction: float = 0.0,
    pv_kw: float = 0.0,
    intensity: tuple[float, ...] = (400.0, 100.0),
    step_at_hour: int | None = None,
    after_step: float = 0.0,
    kind: str | None = None,
    zones: tuple[str, ...] | None = None,
    carbon_file: str | None = "carbon.csv",
) -> Path:
    """A scenario on a constant grid, a constant PV fraction and a carbon file; its path."""
    rows = DAYS * 86_400 // STEP_S
    times = _times(STEP_S, rows)
    grid = ["timestamp,pdu"] + [f"{t},0.5" for t in times]
    (folder / "grid.csv").write_text("\n".join(grid) + "\n")
    pv = ["timestamp,pv"] + [f"{t},{pv_fraction}" for t in times]
    (folder / "pv.csv").write_text("\n".join(pv) + "\n")
    hours = DAYS * 24
    header = ["timestamp"]
    names = zones or tuple(zone for _, zone, _, _ in SITE[:sites])
    for zone in names:
        header += [f"{zone}_direct", f"{zone}_lca"]
    lines = [",".join(header)]
    for h, t in enumerate(_times(3600, hours)):
        cells = [t]
        for z, _zone in enumerate(names):
            value = intensity[z]
            if step_at_hour is not None and h >= step_at_hour:
                value = after_step
            cells += [f"{value / 2}", f"{value}"]  # direct is half the life-cycle value here
        lines.append(",".join(cells))
    (folder / "carbon.csv").write_text("\n".join(lines) + "\n")
    site_lines = []
    for name, zone, lat, lon in SITE[:sites]:
        site_lines.append(
            f"""[[sites.site]]
name = "{name}"
region = "r"
latitude = {lat}
longitude = {lon}
gpu = "H100"
gpu_count = 16
capacity_kw = 40.0
pue = 1.2
wan_gbps = 1.0
data_share = {1 / sites}
trace_column = "pdu"
pv_kw = {pv_kw}
{'pv_column = "pv"' if pv_kw > 0 else ""}
carbon_zone = "{zone}"
"""
        )
    trace = 'file = "grid.csv"\npv_file = "pv.csv"\ntrain_days = [1, 4]\ntest_days = [5, 6]\n'
    if carbon_file is not None:
        trace += f'carbon_file = "{carbon_file}"\n'
    if kind is not None:
        trace += f'carbon_kind = "{kind}"\n'
    text = f"""extends = "default"
name = "carbon-hand"
description = "constant power, constant PV, known intensity"
[sites]
hub = "{HUB}"
{"".join(site_lines)}
[trace]
{trace}
[episode]
jitter_sigma = 0.0
time_budget_h = 24.0
"""
    path = folder / "hand.toml"
    path.write_text(text)
    return path


def _play(path: Path, rounds: int) -> tuple[gym.Env, list[dict]]:
    env = gym.make("PowerTrip-v0", scenario=str(path))
    _, info = env.reset(seed=0, options={"start_time": 0.0})
    infos = [info]
    action = np.ones(env.action_space.shape, dtype=np.int8)
    for _ in range(rounds):
        _, _, terminated, truncated, info = env.step(action)
        infos.append(info)
        if terminated or truncated:
            break
    return env, infos


def test_no_pv_constant_intensity_is_energy_times_intensity(tmp_path: Path) -> None:
    # two sites, two zones: 400 and 100 g/kWh (life-cycle); no PV, so every joule is the grid's
    env, infos = _play(write_world(tmp_path, sites=2, intensity=(400.0, 100.0)), 6)
    params = env.unwrapped.params
    assert infos[0]["carbon_kg"] == 0.0 and infos[0]["round_carbon_kg"] == 0.0
    for info in infos[1:]:
        # the two sites are alike and both play every round: half the energy is each zone's
        expected_kg = info["round_energy_kwh"] * (400.0 + 100.0) / 2 / 1e3
        assert params.gpu_wall_w[0] == params.gpu_wall_w[1]
        assert info["round_carbon_kg"] == pytest.approx(expected_kg, rel=1e-9)
    total = sum(info["round_carbon_kg"] for info in infos)
    assert infos[-1]["carbon_kg"] == pytest.approx(total, rel=1e-12)
    assert infos[-1]["carbon_kg"] == pytest.approx(infos[-1]["energy_kwh"] * 0.25, rel=1e-9)


def test_direct_kind_reads_the_direct_columns(tmp_path: Path) -> None:
    _, lca = _play(write_world(tmp_path, intensity=(400.0,)), 3)
    _, direct = _play(write_world(tmp_path, intensity=(400.0,), kind="direct"), 3)
    assert direct[-1]["energy_kwh"] == lca[-1]["energy_kwh"]
    assert direct[-1]["carbon_kg"] == pytest.approx(lca[-1]["carbon_kg"] / 2, rel=1e-12)


def test_pv_covers_the_idle_draw_and_part_of_the_busy_one(tmp_path: Path) -> None:
    # one site, 16 H100s at 700 W x 1.8 x 1.2 = 1,512 W each at the wall: 24.19 kW busy, 7.26 kW
    # idle (30%). PV makes 20 kW x 0.6 = 12 kW: all of the idle draw, half the busy one.
    pv_w = 20_000.0 * 0.6
    env, infos = _play(write_world(tmp_path, pv_kw=20.0, pv_fraction=0.6), 5)
    p = env.unwrapped.params
    busy_w = float(p.powered[0, 0] * p.gpu_wall_w[0])
    idle_w = float(p.powered[0, 0] * p.idle_w_per_gpu[0])
    assert busy_w > pv_w > idle_w  # the case this test is about
    assert np.all(p.powered[:, 0] == p.powered[0, 0])  # constant power: one draw all along
    for info in infos[1:]:
        energy_j = info["round_energy_kwh"] * 3.6e6
        round_s = info["round_time_s"]
        # E = busy_w · busy_s + idle_w · (round_s − busy_s): the busy time, by hand
        busy_s = (energy_j - idle_w * round_s) / (busy_w - idle_w)
        assert 0.0 < busy_s <= round_s
        expected_kg = (busy_w - pv_w) * busy_s / 3.6e6 * 400.0 / 1e3
        assert info["round_carbon_kg"] == pytest.approx(expected_kg, rel=1e-7)


def test_pv_above_every_draw_emits_nothing(tmp_path: Path) -> None:
    _, infos = _play(write_world(tmp_path, pv_kw=40.0, pv_fraction=1.0), 4)
    assert infos[-1]["energy_kwh"] > 0.0
    assert infos[-1]["carbon_kg"] == 0.0


def test_the_intensity_of_each_hour_charges_that_hour(tmp_path: Path) -> None:
    # 400 g/kWh for the first two hours, then 0: the first rounds' emissions stop at 2 h
    _, infos = _play(write_world(tmp_path, intensity=(400.0,), step_at_hour=2), 40)
    clock = 0.0
    for info in infos[1:]:
        start, clock = clock, info["elapsed_s"]
        if clock <= 7200.0:  # wholly in the first two hours
            assert info["round_carbon_kg"] == pytest.approx(
                info["round_energy_kwh"] * 0.4, rel=1e-9
            )
        elif start >= 7200.0:  # wholly after
            assert info["round_carbon_kg"] == 0.0
        else:  # the round across the step: some of its energy at 400, the rest at 0
            assert 0.0 < info["round_carbon_kg"] < info["round_energy_kwh"] * 0.4
    assert clock > 7200.0, "the episode must run past the step for the test to mean anything"


def test_without_a_carbon_file_carbon_is_zero_and_flagged(tmp_path: Path) -> None:
    env, infos = _play(write_world(tmp_path, carbon_file=None), 2)
    assert infos[-1]["carbon_kg"] == 0.0 and infos[-1]["round_carbon_kg"] == 0.0
    assert infos[-1]["energy_kwh"] > 0.0
    assert env.unwrapped.params.carbon is False
    env, _ = _play(write_world(tmp_path), 1)
    assert env.unwrapped.params.carbon is True


def test_vector_env_reports_the_same_carbon(tmp_path: Path) -> None:
    path = write_world(tmp_path, sites=2, intensity=(400.0, 100.0))
    _, infos = _play(path, 3)
    vec = gym.make_vec("PowerTrip-v0", num_envs=2, scenario=str(path))
    vec.reset(seed=0, options={"start_time": 0.0})
    action = np.ones(vec.action_space.shape, dtype=np.int8)
    for _ in range(3):
        _, _, _, _, vinfo = vec.step(action)
    assert vinfo["carbon_kg"][0] == pytest.approx(infos[3]["carbon_kg"], rel=1e-12)


def test_a_site_without_a_zone_is_refused(tmp_path: Path) -> None:
    path = write_world(tmp_path)
    path.write_text(path.read_text().replace('carbon_zone = "DE"\n', ""))
    with pytest.raises(ScenarioError, match=r"site\(s\) \['berlin'\] have no 'carbon_zone'"):
        gym.make("PowerTrip-v0", scenario=str(path))


def test_a_zone_the_file_lacks_is_refused(tmp_path: Path) -> None:
    path = write_world(tmp_path, zones=("ZA",))
    with pytest.raises(TraceError, match=r"site 'berlin' field 'carbon_zone'.*'DE' not found"):
        gym.make("PowerTrip-v0", scenario=str(path))


def test_a_carbon_file_short_of_the_calendar_is_refused(tmp_path: Path) -> None:
    path = write_world(tmp_path)
    lines = (tmp_path / "carbon.csv").read_text().splitlines()
    (tmp_path / "carbon.csv").write_text("\n".join(lines[:48]) + "\n")  # 47 hours of 144
    with pytest.raises(TraceError, match=r"carbon.csv covers .* not the calendar"):
        gym.make("PowerTrip-v0", scenario=str(path))


def test_carbon_kind_is_checked(tmp_path: Path) -> None:
    path = write_world(tmp_path, kind="marginal")
    with pytest.raises(ScenarioError, match="carbon_kind"):
        gym.make("PowerTrip-v0", scenario=str(path))
    path = write_world(tmp_path, kind="direct", carbon_file=None)
    with pytest.raises(ScenarioError, match="'carbon_kind' needs 'carbon_file'"):
        gym.make("PowerTrip-v0", scenario=str(path))


def test_evaluate_tables_gain_a_carbon_column_only_where_carbon_is_known(tmp_path: Path) -> None:
    from powertrip_env.harness.evaluation.evaluate import evaluate

    path = write_world(tmp_path, sites=2, intensity=(400.0, 100.0))
    result = evaluate(
        "PowerTrip-v0",
        ["PowerTrip", "AllSites"],
        episodes=2,
        env_kwargs={"scenario": str(path)},
        progress=False,
    )
    episodes = result.episodes
    assert (episodes["carbon_kg"] > 0).all()
    # the hand computation of the first test, over whole episodes: a quarter kg per kWh
    assert np.allclose(episodes["carbon_kg"], episodes["energy_kwh"] * 0.25, rtol=1e-9)
    text = result.to_markdown()
    assert "| carbon (kg) |" in text.splitlines()[2]
    row = next(line for line in text.splitlines() if line.startswith("| AllSites |"))
    mean_kg = result.summary.set_index("policy").loc["AllSites", "mean_carbon_kg"]
    assert f"| {mean_kg:.1f} |" in row
    plain = evaluate("PowerTrip-v0", ["PowerTrip"], episodes=1, progress=False)
    assert plain.episodes["carbon_kg"].isna().all()
    assert "carbon" not in plain.to_markdown()


def test_the_shipped_carbon_scenario_charges_its_six_zones() -> None:
    env = gym.make("PowerTrip-v0", scenario="carbon")
    scenario = env.unwrapped.scenario
    zones = {site.name: site.carbon_zone for site in scenario.sites}
    assert zones == {
        "berlin": "DE",
        "cape-town": "ZA",
        "mumbai": "IN-WE",
        "san-francisco": "US-CAL-CISO",
        "sydney": "AU-NSW",
        "sao-paulo": "BR-CS",
    }
    assert env.unwrapped.params.carbon
    env.reset(seed=0)
    *_, info = env.step(np.ones(env.action_space.shape, dtype=np.int8))
    # every site of this catalogue is in a zone between 60 and 780 g/kWh (docs/data.md), and
    # PV only lowers the grid's share: the round's mean intensity per kWh lies below the top
    assert 0.0 <= info["round_carbon_kg"] <= info["round_energy_kwh"] * 0.78


def test_a_zero_intensity_file_is_still_known_carbon(tmp_path: Path) -> None:
    env, infos = _play(write_world(tmp_path, intensity=(0.0,)), 2)
    assert env.unwrapped.params.carbon is True
    assert infos[-1]["carbon_kg"] == 0.0 and infos[-1]["energy_kwh"] > 0.0


def test_a_child_that_replaces_the_sites_does_not_inherit_the_carbon_file(
    tmp_path: Path,
) -> None:
    from powertrip_env.scenario.paths import data_dir

    rows = (data_dir() / "sites_solar.csv").read_text()
    (tmp_path / "two.csv").write_text("\n".join(rows.splitlines()[:3]) + "\n")
    (tmp_path / "child.toml").write_text(
        'extends = "carbon"\nname = "child"\n[sites]\ncatalogue = "two.csv"\nhub = "berlin"\n'
        "data_shares = [0.5, 0.5]\n"
    )
    env = gym.make("PowerTrip-v0", scenario=str(tmp_path / "child.toml"))
    assert env.unwrapped.scenario.trace.carbon_file is None
    assert env.unwrapped.params.carbon is False


def test_drawn_sites_are_refused_on_a_carbon_scenario() -> None:
    with pytest.raises(ValueError, match=r"carbon intensity file .* name no carbon_zone"):
        gym.make("PowerTrip-v0", scenario="carbon", sites="random")


def test_a_portable_carbon_scenario_keeps_its_carbon() -> None:
    from powertrip_env.scenario.portable import from_portable, to_portable

    _, power = from_portable(to_portable("carbon"))
    assert power.has_carbon and power.carbon_g_per_j.any()
    env = gym.make("PowerTrip-v0", scenario=to_portable("carbon"))
    direct = gym.make("PowerTrip-v0", scenario="carbon")
    for e in (env, direct):
        e.reset(seed=3)
    action = np.ones(env.action_space.shape, dtype=np.int8)
    a, b = env.step(action)[-1], direct.step(action)[-1]
    assert a["carbon_kg"] == b["carbon_kg"] > 0.0
