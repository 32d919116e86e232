"""Views of an environment (a text table, ``ansi``, and a picture, ``rgb_array``), and the
off-screen matplotlib figures every plot of the project is drawn on."""

from __future__ import annotations

import importlib.util
import os
from typing import TYPE_CHECKING, Any

import numpy as np

from powertrip_env.atomic import atomic_path
from powertrip_env.units import s_to_h, s_to_ms

if TYPE_CHECKING:
    from powertrip_env.scenario import Scenario
    from powertrip_env.view import DecisionView


def ansi(view: DecisionView | None) -> str:
    """A table of sites: power, powered GPUs, RTT, and whether each took part last round."""
    if view is None:
        return "PowerTripEnv: call reset() first\n"
    lines = [
        f"{view.scenario.name}: round {view.rounds}, elapsed {s_to_h(view.elapsed_s):.2f} h, "
        f"accuracy {view.accuracy:.4f} / {view.a_target:.4f}, energy {view.energy_kwh:.1f} kWh",
        f"{'site':<28} {'gpu':>7} {'power':>6} {'gpus':>9} {'rtt ms':>7} {'sel':>4}",
    ]
    for i, site in enumerate(view.scenario.sites):
        gpus = f"{int(view.powered_gpus[i])}/{site.gpu_count}"
        mark = "x" if view.joined[i] else ("-" if view.available[i] else "off")
        lines.append(
            f"{site.name:<28} {site.gpu:>7} {view.power_fraction[i]:>6.2f} {gpus:>9} "
            f"{s_to_ms(view.rtt_s[i]):>7.1f} {mark:>4}"
        )
    return "\n".join(lines) + "\n"


def agg_figure(width: float, height: float, dpi: int = 120, layout: str | None = None) -> Any:
    """A matplotlib figure on the Agg canvas: off screen, without pyplot's global state.

    matplotlib is a dependency of the package, imported only here, when a picture is drawn.
    """
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width, height), dpi=dpi, layout=layout)
    FigureCanvasAgg(fig)
    return fig


def has_matplotlib() -> bool:
    return importlib.util.find_spec("matplotlib") is not None


def save_png(fig: Any, path: str | os.PathLike[str]) -> None:
    """Write ``fig`` as a PNG, atomically."""
    with atomic_path(path) as tmp:
        fig.savefig(tmp, format="png")


def rgb_array(
    view: DecisionView | None, history: list[tuple[float, float]], scenario: Scenario
) -> np.ndarray:
    """Sites on a longitude/latitude plane with power bars and the chosen set, and the
    accuracy curve so far (``history``: (elapsed s, accuracy) per round). Drawn with
    matplotlib's Agg backend, off screen."""
    fig = agg_figure(8, 3.6, dpi=80)
    canvas = fig.canvas
    ax_map, ax_acc = fig.subplots(1, 2, gridspec_kw={"width_ratios": [1.6, 1]})
    if view is not None:
        lon = np.array([s.longitude for s in scenario.sites])
        lat = np.array([s.latitude for s in scenario.sites])
        colours = np.where(view.joined, "tab:green", "tab:gray")
        colours = np.where(view.available, colours, "tab:red")
        bars = view.power_fraction * 30.0
        ax_map.bar(lon, bars, width=4.0, bottom=lat, color=colours, alpha=0.8)
        ax_map.scatter(lon, lat, c="black", s=8)
        net = scenario.network
        ax_map.scatter([net.hub_longitude], [net.hub_latitude], marker="*", s=120, c="tab:blue")
        hist = np.array(history)
        ax_acc.plot(s_to_h(hist[:, 0]), hist[:, 1], color="tab:blue")
        ax_acc.axhline(view.a_target, color="tab:orange", linestyle="--")
    ax_map.set_xlim(-180, 180)
    ax_map.set_ylim(-60, 90)
    ax_map.set_xlabel("longitude")
    ax_map.set_ylabel("latitude")
    ax_map.set_title("power headroom (bars); green = selected, red = unavailable", fontsize=8)
    ax_acc.set_xlabel("elapsed h")
    ax_acc.set_ylabel("accuracy")
    fig.tight_layout()
    canvas.draw()
    return np.asarray(canvas.buffer_rgba())[..., :3].copy()
