"""The data travels with the package: a non-editable install works outside the repository."""

from __future__ import annotations

import os
import re
import shutil
import site
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from layout import installed_folders

ROOT = Path(__file__).resolve().parents[1]
# Never copied into the build: setuptools packs whatever an earlier build left in build/lib, so a
# wheel built in the checkout can carry files the current layout no longer installs.
_NOT_SOURCE = shutil.ignore_patterns(
    ".git", ".venv", "build", "dist", "*.egg-info", "__pycache__", "runs", "results", ".*_cache"
)


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    source = tmp_path_factory.mktemp("source") / "powertrip-env"
    shutil.copytree(ROOT, source, ignore=_NOT_SOURCE)
    out = tmp_path_factory.mktemp("wheel")
    done = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(out), str(source)],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr
    (path,) = out.glob("powertrip_env-*.whl")
    return path


def test_wheel_carries_scenarios_catalogues_and_trace(wheel: Path) -> None:
    names = set(zipfile.ZipFile(wheel).namelist())
    for scenario in ("default", "lora", "kws", "emnist", "llm-full", "large", "digits",
                     "nonblocking", "solar", "wide"):  # fmt: skip
        assert f"powertrip_env/scenario/shipped/{scenario}.toml" in names
    for data in ("gpus.csv", "sites_default.csv", "sites_large.csv", "sites_solar.csv",
                 "sites_solar_lowgrid.csv", "sites_wide.csv", "power_synthetic_2019.csv",
                 "digits.csv.gz"):  # fmt: skip
        assert f"powertrip_env/_data/{data}" in names
    for shipped in ("model.zip", "config.yaml", "RESULTS.md"):  # the pretrained agent
        assert f"powertrip_env/agents/pretrained/{shipped}" in names


def test_wheel_data_holds_the_real_traces_and_no_tools(wheel: Path) -> None:
    """traces/tools/ converts raw downloads; it is for maintainers and is not installed."""
    data = {n for n in zipfile.ZipFile(wheel).namelist() if n.startswith("powertrip_env/_data/")}
    assert "powertrip_env/_data/google_cella_2019.csv" in data
    assert "powertrip_env/_data/solcast_pv_2022.csv" in data
    assert "powertrip_env/_data/solcast_pv_forecast_2022.csv.gz" in data
    assert [n for n in data if n.endswith(".py")] == []
    assert [n for n in data if n.startswith("powertrip_env/_data/tools/")] == []


def _wheel_only(target: Path) -> dict[str, str]:
    """An environment in which ``python -S`` sees the unpacked wheel and the dependencies only.

    ``-S`` skips the site module, so no ``.pth`` file runs: the editable install's finder, which
    maps ``powertrip_env`` onto the checkout, never loads, and neither does the checkout's
    folder. The dependencies' site-packages come back through ``PYTHONPATH``, after the wheel.
    """
    deps = [p for p in site.getsitepackages() if Path(p).is_dir()]
    return {**os.environ, "PYTHONPATH": os.pathsep.join([str(target), *deps])}


def _run_wheel_only(code: str, target: Path, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-S", "-c", code],
        cwd=cwd,
        env=_wheel_only(target),
        capture_output=True,
        text=True,
    )


def test_wheel_holds_every_package_of_the_source_tree(wheel: Path) -> None:
    """A subpackage left out of the wheel breaks only non-editable installs, so check them all."""
    names = zipfile.ZipFile(wheel).namelist()
    for folder, package in installed_folders().items():
        for module in (ROOT / folder).rglob("*.py"):
            if "__pycache__" in module.parts:
                continue
            rel = f"{package.replace('.', '/')}/{module.relative_to(ROOT / folder).as_posix()}"
            assert rel in names, f"{module.relative_to(ROOT)} is not in the wheel as {rel}"


def test_the_wheel_installs_one_import_name_and_the_command_line(wheel: Path) -> None:
    """PyPI's ``agents`` and ``baselines`` distributions own those import names: a wheel that
    installed ours under them would overwrite theirs, or be overwritten. ``powertrip`` is the
    only script."""
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        info = next(n for n in names if n.endswith(".dist-info/WHEEL")).rsplit("/", 1)[0]
        top_level = archive.read(f"{info}/top_level.txt").decode().split()
        scripts = archive.read(f"{info}/entry_points.txt").decode()
    assert top_level == ["powertrip_env"]
    assert sorted({n.split("/")[0] for n in names}) == ["powertrip_env", info]
    assert "[console_scripts]\npowertrip = powertrip_env.cli:main" in scripts


def test_the_maintainers_writers_stay_out_of_the_wheel_and_refuse_there(
    wheel: Path, tmp_path: Path
) -> None:
    """``maintainers/`` writes a checkout's files: not shipped, and from a wheel its commands
    refuse in one line instead of writing into site-packages."""
    names = zipfile.ZipFile(wheel).namelist()
    assert [n for n in names if "maintainers" in n.split("/")] == []
    assert [
        n for n in names if n.endswith(("docs_site.py", "readme_tables.py", "pretrain.py"))
    ] == []
    target = tmp_path / "site"
    zipfile.ZipFile(wheel).extractall(target)
    code = (
        "import sys, powertrip_env.cli as cli\n"
        "print(cli.checkout())\n"
        "sys.exit(cli.main(['pretrain', '--table']))"
    )
    done = _run_wheel_only(code, target, tmp_path)
    assert done.returncode == 2, done.stderr
    assert done.stdout.strip() == "None"
    assert done.stderr.count("\n") == 1
    assert "powertrip pretrain: a maintainers' command" in done.stderr


def test_the_unpacked_wheel_is_what_the_subprocess_imports(wheel: Path, tmp_path: Path) -> None:
    """The check below is only worth something if the checkout cannot fill a gap in the wheel."""
    target = tmp_path / "site"
    zipfile.ZipFile(wheel).extractall(target)
    shutil.rmtree(target / "powertrip_env" / "learners", ignore_errors=True)
    done = _run_wheel_only("import powertrip_env.learners", target, tmp_path)
    assert done.returncode != 0
    assert "No module named 'powertrip_env.learners'" in done.stderr


def test_installed_wheel_loads_default_outside_the_repository(wheel: Path, tmp_path: Path) -> None:
    target = tmp_path / "site"
    zipfile.ZipFile(wheel).extractall(target)  # what a non-editable install puts on the path
    code = (
        "import powertrip_env, gymnasium as gym, powertrip_env.harness.evaluation.evaluate; "
        "import powertrip_env.agents, powertrip_env.cli; "
        "print(powertrip_env.__file__); print(powertrip_env.load_scenario('default')); "
        "env = gym.make('PowerTrip-v0'); print(env.reset(seed=0)[0].shape); "
        "env = gym.make('PowerTrip-LoRA-v0'); print(env.reset(seed=0)[0].shape); "
        "env = gym.make('PowerTrip-Wide-v0'); print(env.reset(seed=0)[0].shape); "
        "env = gym.make('PowerTrip-Random-v0'); print(env.reset(seed=0)[0].shape); "
        "import sys; print([m.__file__ for m in list(sys.modules.values()) "
        "if m.__name__.split('.')[0] in ('powertrip_env', 'baselines', 'agents') "
        f"and not (getattr(m, '__file__', None) or '').startswith({str(target)!r})])"
    )
    done = _run_wheel_only(code, target, tmp_path)
    assert done.returncode == 0, done.stderr
    first = done.stdout.splitlines()[0]
    assert first.startswith(str(target)), first  # not the checkout
    assert "Scenario 'default': 10 sites" in done.stdout
    # 10, 8 and 24 sites of 15 + 6 features; drawn sites padded to 32, with 32 valid flags
    assert done.stdout.splitlines()[-5:-1] == ["(156,)", "(126,)", "(366,)", "(518,)"]
    # every module of ours came from the unpacked wheel, none from the checkout
    assert done.stdout.splitlines()[-1] == "[]"


def test_the_environment_runs_without_importing_any_training_library() -> None:
    # `pip install powertrip-env` brings gymnasium, numba, numpy and pandas only; a worker that
    # runs the environment must never need torch, SB3, Ray or matplotlib.
    script = """
import sys
import gymnasium as gym
import numpy as np
import powertrip_env
import powertrip_env.harness.evaluation.evaluate, powertrip_env.harness.reports.headroom
import powertrip_env.baselines.policies, powertrip_env.baselines.references
for env_id in powertrip_env.ENV_IDS:
    for obs_mode in ("flat", "dict"):
        env = gym.make(env_id, obs_mode=obs_mode)
        env.reset(seed=0)
        for _ in range(3):
            env.step(np.ones(env.unwrapped.params.n_sites, dtype=np.int8))
heavy = {"torch", "stable_baselines3", "sb3_contrib", "ray", "matplotlib", "tensorboard"}
print(sorted({name.split(".")[0] for name in sys.modules} & heavy))
"""
    out = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True
    ).stdout
    assert out.strip() == "[]", out


_READ_ONLY_RUN = """
set -e
mount --bind "$ROOT_RO" "$ROOT_RO"
mount -o remount,bind,ro "$ROOT_RO"
touch "$ROOT_RO/home/probe" 2>/dev/null && { echo "still writable"; exit 3; }
cd "$ROOT_RO"
exec "$PYTHON" -S -W always -c "$CODE"
"""


def test_read_only_install_and_home_import_make_and_step(wheel: Path, tmp_path: Path) -> None:
    """Containers and cluster nodes often mount site-packages and HOME read-only; numba then has
    nowhere to cache, and the package must still import (compiling without a cache) and say how
    to keep the cache. Needs a private mount namespace (``unshare -m``, as root) to make the
    folders really read-only: permissions alone do not stop root."""
    if shutil.which("unshare") is None or shutil.which("mount") is None:
        pytest.skip("needs unshare and mount for a read-only bind mount")
    probe = subprocess.run(["unshare", "-m", "true"], capture_output=True)
    if probe.returncode != 0:
        pytest.skip("cannot make a mount namespace here (unshare -m needs root)")
    root = tmp_path / "ro"
    zipfile.ZipFile(wheel).extractall(root / "site")
    (root / "home").mkdir()
    code = (
        "import powertrip_env, gymnasium as gym, numpy as np; "
        "env = gym.make('PowerTrip-LoRA-v0'); env.reset(seed=0); "
        "print(env.step(np.ones(8, dtype=np.int8))[4]['rounds'])"
    )
    env = {**_wheel_only(root / "site"), "HOME": str(root / "home"), "ROOT_RO": str(root)}
    env |= {"PYTHON": sys.executable, "CODE": code}
    env.pop("NUMBA_CACHE_DIR", None)
    done = subprocess.run(
        ["unshare", "-m", "sh", "-c", _READ_ONLY_RUN], env=env, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.strip().splitlines()[-1] == "1"
    warned = [line for line in done.stderr.splitlines() if "RuntimeWarning" in line]
    assert len(warned) == 1, done.stderr  # one warning, however many functions compiled
    assert "NUMBA_CACHE_DIR" in warned[0]
    assert not list((root / "site").rglob("*.nbi"))  # nothing was written into the install


def test_check_env_needs_no_extra(wheel: Path) -> None:
    """Gymnasium's check_env draws every render mode, and rgb_array draws with matplotlib: so a
    plain ``pip install powertrip-env`` must bring it (CI's wheel stage runs check_env there)."""
    with zipfile.ZipFile(wheel) as archive:
        (meta,) = [n for n in archive.namelist() if n.endswith(".dist-info/METADATA")]
        requires = [
            line.split(":", 1)[1].strip()
            for line in archive.read(meta).decode().splitlines()
            if line.startswith("Requires-Dist:")
        ]
    core = {re.split(r"[<>=!~ ;\[]", r, maxsplit=1)[0] for r in requires if "extra ==" not in r}
    assert {"gymnasium", "matplotlib", "numba", "numpy", "pandas"} <= core
    assert not {"torch", "stable-baselines3", "ray"} & core
