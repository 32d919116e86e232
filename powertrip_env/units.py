"""One unit per quantity: the kernel counts in SI, people read other units, and this is the seam.

The kernel keeps joules, grams of CO2-equivalent, seconds, watts and bits per second; what a
person reads (info, views, reports, scenario files) gives kWh, kg, hours, kW, milliseconds and
Gbit/s. Every conversion between the two is written here once, as a constant whose name says
both units and, for the Python side, a function whose name says which way it goes. No other
module writes a conversion factor as a literal (``tests/test_units.py`` scans for them).

Each function is the one arithmetic operation its constant implies (``g_to_kg`` divides by
``G_PER_KG``, ``kg_to_g`` multiplies), never the reciprocal: ``x / 1000.0`` and ``x * 0.001``
differ in the last bit, and the published numbers are pinned to the operation that made them.
The functions take floats and numpy arrays (and pandas columns) alike.

This module imports nothing of the package: the compiled kernel reads its constants (numba takes
a module-level float as a compile-time constant), so ``dynamics.jit`` stamps the kernel's cache
with this file too.
"""

from __future__ import annotations

from typing import Any

# --------------------------------------------------------------------------- the factors

J_PER_KWH = 3.6e6  # the kernel counts energy in joules; info, views and reports give kWh
G_PER_KG = 1e3  # and emissions in grams of CO2-equivalent; info and reports give kg
S_PER_H = 3600.0  # and time in seconds; budgets and TTAs are given in hours
S_PER_DAY = 86_400  # an int, so that whole days of seconds stay whole numbers
MS_PER_S = 1e3  # round-trip times are written in milliseconds
W_PER_KW = 1e3  # and site capacities and PV in kW
BPS_PER_GBPS = 1e9  # and link rates in Gbit/s
BITS_PER_BYTE = 8.0  # and model and state sizes in bytes
BYTES_PER_GB = 1e9  # which the docs give in GB
FLOPS_PER_TFLOP = 1e12  # and GPU throughput in TFLOP/s
DEG_PER_H = 15.0  # the sun crosses 15 degrees of longitude an hour (local solar time)

# --------------------------------------------------------------------------- the conversions


def g_to_kg(grams: Any) -> Any:
    """Grams (the kernel's emissions) as kilograms (info and reports)."""
    return grams / G_PER_KG


def kg_to_g(kilograms: Any) -> Any:
    """Kilograms (a view's emissions) back to the kernel's grams."""
    return kilograms * G_PER_KG


def j_to_kwh(joules: Any) -> Any:
    """Joules (the kernel's energy) as kWh."""
    return joules / J_PER_KWH


def per_kwh_to_per_j(per_kwh: Any) -> Any:
    """A quantity per kWh (grid intensity, g/kWh) per joule (g/J), as the kernel counts it."""
    return per_kwh / J_PER_KWH


def per_j_to_per_kwh(per_j: Any) -> Any:
    """A quantity per joule (the kernel's g/J) per kWh, as carbon data and views give it."""
    return per_j * J_PER_KWH


def s_to_h(seconds: Any) -> Any:
    """Seconds (the kernel's clock) as hours."""
    return seconds / S_PER_H


def h_to_s(hours: Any) -> Any:
    """Hours (budgets and lead times as written) as the kernel's seconds."""
    return hours * S_PER_H


def ms_to_s(milliseconds: Any) -> Any:
    """Milliseconds (round-trip times as written) as seconds."""
    return milliseconds / MS_PER_S


def s_to_ms(seconds: Any) -> Any:
    """Seconds as milliseconds, for display."""
    return seconds * MS_PER_S


def kw_to_w(kilowatts: Any) -> Any:
    """Kilowatts (capacities and PV as written) as the kernel's watts."""
    return kilowatts * W_PER_KW


def w_to_kw(watts: Any) -> Any:
    """Watts as kilowatts."""
    return watts / W_PER_KW


def gbps_to_bps(gbps: Any) -> Any:
    """Gbit/s (link rates as written) as the kernel's bit/s."""
    return gbps * BPS_PER_GBPS


def bytes_to_bits(size_bytes: Any) -> Any:
    """Bytes (model and state sizes as written) as the bits a link carries."""
    return size_bytes * BITS_PER_BYTE


def bytes_to_gb(size_bytes: Any) -> Any:
    """Bytes as (decimal) gigabytes, for display."""
    return size_bytes / BYTES_PER_GB


def tflops_to_flops(tflops: Any) -> Any:
    """TFLOP/s (GPU catalogues) as FLOP/s."""
    return tflops * FLOPS_PER_TFLOP


def deg_to_h(degrees: Any) -> Any:
    """Degrees of longitude as hours of local solar time (east is later)."""
    return degrees / DEG_PER_H
