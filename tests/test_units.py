"""One unit per quantity: ``powertrip_env.units`` is the only place a conversion factor is written.

The kernel counts in SI (joules, grams, seconds, watts, bit/s) and people read kWh, kg, hours,
kW and Gbit/s; every conversion between them goes through ``powertrip_env/units.py``. A factor
written again as a literal elsewhere (``x / 1000.0``, ``t * 3600.0``) is how the same quantity
ended up in two units on its way from the CSV to the board, so the code folders are scanned for
them. The conversions themselves must be the exact operations they replaced: the published
numbers depend on the last bit.
"""

from __future__ import annotations

import ast
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
from layout import ROOT, code_folders

from powertrip_env import units
from powertrip_env.baselines.carbon_references import carbon_cost_from_kg, carbon_cost_kg
from powertrip_env.dynamics import formulas
from powertrip_env.dynamics.layout import C_B0, C_GAMMA, C_PB, CONSTS

SEAM = ROOT / "powertrip_env" / "units.py"

FACTORS = {1e3, 3600.0, 3.6e6, 86_400.0, 1e9, 1e12}
"""Values that, as an operand of ``*``, ``/``, ``//`` or ``%``, are a unit conversion: g/kg,
ms/s, W/kW; s/h; J/kWh; s/day; bit/s per Gbit/s and bytes per GB; FLOP/s per TFLOP/s."""

PENDING: dict[str, int] = {}
"""Files allowed to keep literal factors for now -> how many they hold (none: keep it so)."""

_OPERATORS = (ast.Mult, ast.Div, ast.FloorDiv, ast.Mod)


def _is_factor(node: ast.AST) -> bool:
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub | ast.UAdd):
        node = node.operand
    return (
        isinstance(node, ast.Constant)
        and isinstance(node.value, int | float)
        and not isinstance(node.value, bool)
        and float(node.value) in FACTORS
    )


def literal_factors(source: str) -> list[int]:
    """Lines of ``source`` where a conversion factor is written as a literal operand of ``*``,
    ``/``, ``//`` or ``%`` (also augmented, ``x /= 1000``)."""
    lines = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.BinOp) and isinstance(node.op, _OPERATORS):
            operands = (node.left, node.right)
        elif isinstance(node, ast.AugAssign) and isinstance(node.op, _OPERATORS):
            operands = (node.value,)
        else:
            continue
        lines += [node.lineno for operand in operands if _is_factor(operand)]
    return sorted(lines)


def _scanned() -> list[Path]:
    files = [ROOT / "train_agent.py"]
    for folder in code_folders():
        files += [p for p in sorted((ROOT / folder).rglob("*.py")) if "__pycache__" not in p.parts]
    return [p for p in files if p != SEAM]


def test_the_scan_finds_what_it_is_for() -> None:
    """Each way a factor is written is found; a tolerance or a count of a thousand is not."""
    source = (
        "a = g / 1000.0\nb = h * 3600\nc = x / 3.6e6\nd = -1e3 * y\nt %= 86_400\n"
        "e = n * 1e9\nok = max(x, 1e3)\nn = 1000\nwait = timeout(3600)\nf = x / 1e-3\n"
    )
    assert literal_factors(source) == [1, 2, 3, 4, 5, 6]


def test_no_conversion_factor_is_written_outside_the_seam() -> None:
    """Every conversion is ``powertrip_env.units``'s; the pending files hold what they held."""
    found = {}
    for path in _scanned():
        lines = literal_factors(path.read_text(encoding="utf-8"))
        if lines:
            found[path.relative_to(ROOT).as_posix()] = lines
    stray = {path: lines for path, lines in found.items() if path not in PENDING}
    assert not stray, (
        f"conversion factors written as literals (use powertrip_env.units instead): {stray}"
    )
    counts = {path: len(found.get(path, [])) for path in PENDING}
    assert counts == PENDING, (
        f"PENDING is stale: {counts} (remove the entries of files that no longer need them)"
    )


def test_the_kernel_and_the_people_share_the_factors() -> None:
    """The kernel's public names are the seam's constants, not copies."""
    from powertrip_env import dynamics

    assert dynamics.J_PER_KWH is units.J_PER_KWH
    assert dynamics.G_PER_KG is units.G_PER_KG
    assert dynamics.S_PER_H is units.S_PER_H
    assert isinstance(units.S_PER_DAY, int)  # whole days of seconds stay whole


@pytest.mark.parametrize(
    ("convert", "value", "expected"),
    [
        (units.g_to_kg, 1500.0, 1.5),
        (units.kg_to_g, 1.5, 1500.0),
        (units.j_to_kwh, 7.2e6, 2.0),
        (units.per_kwh_to_per_j, 360.0, 1e-4),
        (units.per_j_to_per_kwh, 1e-4, 360.0),
        (units.s_to_h, 5400.0, 1.5),
        (units.h_to_s, 1.5, 5400.0),
        (units.ms_to_s, 250.0, 0.25),
        (units.s_to_ms, 0.25, 250.0),
        (units.kw_to_w, 2.5, 2500.0),
        (units.w_to_kw, 2500.0, 2.5),
        (units.gbps_to_bps, 2.5, 2.5e9),
        (units.bytes_to_bits, 4.0, 32.0),
        (units.bytes_to_gb, 3e9, 3.0),
        (units.tflops_to_flops, 2.0, 2e12),
        (units.deg_to_h, -45.0, -3.0),
    ],
)
def test_each_conversion_goes_the_way_its_name_says(convert, value, expected) -> None:
    assert convert(value) == pytest.approx(expected, rel=1e-15)
    array = convert(np.array([value, 2.0 * value]))
    np.testing.assert_allclose(array, [expected, 2.0 * expected], rtol=1e-15)


def test_a_conversion_is_the_one_operation_it_replaced() -> None:
    """``g_to_kg`` divides by 1000 (as the code it replaced), which multiplying by 0.001 would
    not match bit for bit; ``kg_to_g`` multiplies."""
    grams = np.random.default_rng(0).uniform(0.0, 5e5, 100_000)
    assert np.array_equal(units.g_to_kg(grams), grams / 1000.0)
    assert not np.array_equal(grams / 1000.0, grams * 0.001)  # why the operation matters
    assert np.array_equal(units.kg_to_g(grams), grams * 1000.0)
    assert np.array_equal(units.s_to_h(grams), grams / 3600.0)
    assert np.array_equal(units.h_to_s(grams), grams * 3600.0)
    assert np.array_equal(units.per_kwh_to_per_j(grams), grams / 3.6e6)


def test_kilograms_from_grams_survive_a_round_trip() -> None:
    """A carbon mass the env reported in kg (``grams / 1000``) comes back unchanged through
    grams: so the carbon cost of an episode's kg (``carbon_cost_from_kg``) is bit for bit the cost
    of its grams (``carbon_cost_kg``), which the removed kg -> g -> kg round trip relied on. An
    arbitrary float would not survive it; a quotient by 1000 does."""
    rng = np.random.default_rng(1)
    grams = rng.uniform(1.0, 2.0, 1_000_000) * 2.0 ** rng.integers(-20, 30, 1_000_000)
    kg = units.g_to_kg(grams)
    assert np.array_equal(units.g_to_kg(units.kg_to_g(kg)), kg)
    success = rng.random(grams.shape) < 0.5
    params = SimpleNamespace(carbon_ref_kg=1000.0)
    cost = carbon_cost_kg(params, grams, success)
    assert np.array_equal(carbon_cost_from_kg(params, kg, success), cost)
    assert carbon_cost_kg(params, 5000.0, False) == 1005.0
    assert carbon_cost_from_kg(params, 5.0, True) == 5.0


def test_the_noise_scale_over_arrays_is_the_formula_the_tools_derived() -> None:
    """``formulas.noise_scale_array`` is, bit for bit, what the carbon bound (over an array) and
    the adaptive rules' fit (at one progress, over a grid of factors) each wrote, and the compiled
    kernel's ``noise_scale`` up to the last bits of numpy's vectorised power."""
    w = SimpleNamespace(noise_b0=1200.0, noise_p_b=37.5, noise_gamma=0.85)
    progress = np.linspace(0.0, 400.0, 1001)
    bound = w.noise_b0 * (1.0 + np.asarray(progress) / w.noise_p_b) ** w.noise_gamma
    assert np.array_equal(formulas.noise_scale_array(w, progress), bound)
    grid = np.exp(np.linspace(-0.5, 0.5, 21))
    for before in (0.0, 3.7, 123.456):
        fit = w.noise_b0 * grid * np.power(1.0 + before / w.noise_p_b, w.noise_gamma)
        assert np.array_equal(formulas.noise_scale_array(w, before, grid), fit)
    params = SimpleNamespace(consts=np.zeros(len(CONSTS)))
    params.consts[[C_B0, C_PB, C_GAMMA]] = w.noise_b0, w.noise_p_b, w.noise_gamma
    np.testing.assert_allclose(
        formulas.noise_scale(params, progress), formulas.noise_scale_array(w, progress), rtol=1e-14
    )
