"""Views of an environment (a text table, ``ansi``, and a picture, ``rgb_array``), and the
off-screen matplotlib figures every plot of the project is drawn on."""

from __future__ import annotations

import importlib.util
import os
from typing import TYPE_CHECKING, Any

import numpy as np

from powertrip_env import core
from powertrip_env.atomic import atomic_path

if TYPE_CHECKING:
    from powertrip_env.env import PowerTripEnv


def _site_rows(env: PowerTripEnv) -> dict[str, np.ndarray]:
    p, state = env.params, env.state
    k = int(core.current_row(p, state.time_s)[0])
    return {
        "power": p.site_obs[k, :, 0],
        "powered": p.powered[k],
        "available": p.available[k],
        "selected": state.prev_selected[0],
        "rtt_ms": p.rtt_s * 1e3,
    }


def ansi(env: PowerTripEnv) -> str:
    """A table of sites: power, powered GPUs, RTT, and whether each took part last round."""
    if env.state is None:
        return "PowerTripEnv: call reset() first\n"
    rows = _site_rows(env)
    state = env.state
    elapsed_h = float(state.time_s[0] - state.start_s[0]) / 3600.0
    lines = [
        f"{env.scenario.name}: round {int(state.rounds[0])}, elapsed {elapsed_h:.2f} h, "
        f"accuracy {float(state.accuracy[0]):.4f} / {env.params.a_target:.4f}, "
        f"energy {float(state.energy_j[0]) / 3.6e6:.1f} kWh",
        f"{'site':<28} {'gpu':>7} {'power':>6} {'gpus':>9} {'rtt ms':>7} {'sel':>4}",
    ]
    for i, site in enumerate(env.scenario.sites):
        gpus = f"{int(rows['powered'][i])}/{site.gpu_count}"
        mark = "x" if rows["selected"][i] else ("-" if rows["available"][i] else "off")
        lines.append(
            f"{site.name:<28} {site.gpu:>7} {rows['power'][i]:>6.2f} {gpus:>9} "
            f"{rows['rtt_ms'][i]:>7.1f} {mark:>4}"
        )
    return "\n".join(lines) + "\n"


def agg_figure(width: float, height: float, dpi: int = 120, layout: str | None = None) -> Any:
    """A matplotlib figure on the Agg canvas: off screen, without pyplot's global state.

    matplotlib comes with the ``train`` extra; ``has_matplotlib()`` says whether it is there.
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


def rgb_array(env: PowerTripEnv) -> np.ndarray:
    """Sites on a longitude/latitude plane with power bars and the chosen set, and the
    accuracy curve so far. Drawn with matplotlib's Agg backend, off screen."""
    fig = agg_figure(8, 3.6, dpi=80)
    canvas = fig.canvas
    ax_map, ax_acc = fig.subplots(1, 2, gridspec_kw={"width_ratios": [1.6, 1]})
    if env.state is not None:
        rows = _site_rows(env)
        lon = np.array([s.longitude for s in env.scenario.sites])
        lat = np.array([s.latitude for s in env.scenario.sites])
        colours = np.where(rows["selected"], "tab:green", "tab:gray")
        colours = np.where(rows["available"], colours, "tab:red")
        ax_map.bar(lon, rows["power"] * 30.0, width=4.0, bottom=lat, color=colours, alpha=0.8)
        ax_map.scatter(lon, lat, c="black", s=8)
        net = env.scenario.network
        ax_map.scatter([net.hub_longitude], [net.hub_latitude], marker="*", s=120, c="tab:blue")
        hist = np.array(env._history)
        ax_acc.plot(hist[:, 0] / 3600.0, hist[:, 1], color="tab:blue")
        ax_acc.axhline(env.params.a_target, color="tab:orange", linestyle="--")
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
