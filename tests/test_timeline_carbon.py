"""``timeline.png`` on a scenario with grid carbon intensity: the recorder keeps each site's
grid intensity as each round starts (``PolicyRounds.grid_g_per_kwh``), and the figure colours
the completed rounds by it on one scale, with a colorbar. Without carbon nothing is recorded
and the figure is the old one (blue bars, no colorbar, the old margins).

The environments run on the train days without jitter, so every episode is deterministic.
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
from matplotlib import colormaps
from matplotlib.colors import Normalize, to_rgba

import powertrip_env  # noqa: F401  (registers the IDs)
from powertrip_env.baselines.registry import make_policy
from powertrip_env.harness.evaluation import timeline_figure as tf
from powertrip_env.harness.evaluation.evaluate import evaluate
from powertrip_env.harness.evaluation.timeline import PolicyRounds, Timeline

CARBON_ID = "PowerTrip-Carbon-v2"
FAST = {"jitter": False}
POLICIES = ["PowerTrip", "CarbonGreedy"]
SEED = 0
BLUE = to_rgba("tab:blue")


def _timeline(env_id: str, policies: list[str]) -> Timeline:
    result = evaluate(
        env_id, policies, episodes=1, split="train", seed=SEED, env_kwargs=FAST, progress=False
    )
    assert result.timeline is not None
    return result.timeline


@pytest.fixture(scope="module")
def carbon_timeline() -> Timeline:
    return _timeline(CARBON_ID, POLICIES)


@pytest.fixture(scope="module")
def plain_timeline() -> Timeline:
    return _timeline("PowerTrip-v0", ["PowerTrip", "AllSites"])


def _replay(env_id: str, name: str, seed: int) -> tuple[list[float], list[np.ndarray]]:
    """The episode played by hand: the elapsed hours and the decision view's grid intensity at
    each round's start."""
    env = gym.make(env_id, split="train", **FAST)
    try:
        obs, info = env.reset(seed=seed)
        policy = make_policy(name, env.unwrapped.n_sites, SEED)
        policy.reset(env)
        starts, grids = [], []
        while True:
            view = env.unwrapped.decision_view()
            assert view.carbon_known
            starts.append(view.elapsed_s / 3600.0)
            grids.append(np.array(view.grid_g_per_kwh, dtype=float))
            obs, _, terminated, truncated, info = env.step(policy.act(obs, info))
            if terminated or truncated:
                return starts, grids
    finally:
        env.close()


def _completed_bars(ax) -> object:
    [bars] = [c for c in ax.collections if c.get_gid() == "completed"]
    return bars


def _colorbars(fig, n_panels: int) -> list:
    return [ax for ax in fig.axes[n_panels:] if ax.get_ylabel() == tf.INTENSITY_LABEL]


# --------------------------------------------------------------------------- recording


def test_the_recorded_intensity_is_the_decision_views_at_each_round_start(carbon_timeline):
    assert carbon_timeline.has_intensity
    assert [run.label for run in carbon_timeline.runs] == POLICIES
    n = len(carbon_timeline.site_names)
    for run in carbon_timeline.runs:
        grid = run.grid_g_per_kwh
        assert grid is not None and grid.shape == (len(run.start_h), n) and grid.dtype == float
        assert np.all(np.isfinite(grid)) and np.all(grid >= 0)
        starts, expected = _replay(CARBON_ID, run.label, SEED)
        np.testing.assert_allclose(run.start_h, starts, rtol=0, atol=1e-9)  # the same rounds
        for k in range(5):  # the first rounds, one by one
            np.testing.assert_array_equal(grid[k], expected[k], err_msg=f"{run.label} round {k}")
        np.testing.assert_array_equal(grid, np.array(expected))  # and every round after
        # it follows the trace: intensities differ between sites and over the episode
        assert len(np.unique(grid[0])) > 1 and np.ptp(grid, axis=0).max() > 0


def test_no_intensity_is_recorded_without_carbon(plain_timeline):
    assert not plain_timeline.has_intensity
    assert all(run.grid_g_per_kwh is None for run in plain_timeline.runs)


def test_rounds_made_by_hand_without_intensity_still_work():
    """An old caller builds PolicyRounds positionally, without the new field."""
    rounds = _hand_rounds(grid=None)
    assert rounds.grid_g_per_kwh is None
    np.testing.assert_array_equal(rounds.completed, rounds.selected & ~rounds.dropped)


# --------------------------------------------------------------------------- the figure


def test_completed_bars_are_coloured_by_their_sites_intensity(carbon_timeline):
    runs = carbon_timeline.runs
    fig = tf.timeline_figure(carbon_timeline, "carbon")
    top = max(float(run.grid_g_per_kwh.max()) for run in runs)
    cmap, norm = colormaps[tf.INTENSITY_CMAP], Normalize(0.0, top)  # one scale for all panels
    for ax, run in zip(fig.axes, runs, strict=False):
        bars = _completed_bars(ax)
        colours = bars.get_facecolors()
        assert len(colours) == len(bars.get_paths()) > 1
        assert len(np.unique(colours.round(6), axis=0)) > 1, run.label  # they vary
        assert not np.any(np.all(np.isclose(colours, BLUE), axis=1))  # none is the old blue
        for path, colour in zip(bars.get_paths(), colours, strict=True):
            x, y = path.vertices[0]  # the bar's start and its row's bottom (site - 0.2)
            site = round(y + 0.2)
            [r] = np.flatnonzero(np.isclose(run.start_h, x) & run.completed[:, site])
            expected = cmap(norm(run.grid_g_per_kwh[r, site]))
            np.testing.assert_allclose(colour, expected, atol=1e-12)
    [cbar] = _colorbars(fig, len(runs))
    assert cbar.get_ylim() == pytest.approx((0.0, top))  # the scale the bars were drawn on
    [solids] = [c for c in cbar.collections if c.get_array() is not None]
    assert solids.get_cmap().name == tf.INTENSITY_CMAP
    assert (solids.norm.vmin, solids.norm.vmax) == pytest.approx((0.0, top))


def test_the_colorbar_stands_right_of_the_panels_inside_the_figure(carbon_timeline):
    n_panels = len(carbon_timeline.runs)
    fig = tf.timeline_figure(carbon_timeline, "carbon")
    n = len(carbon_timeline.site_names)
    assert tuple(fig.get_size_inches()) == tf.timeline_size(n, n_panels)  # the size as before
    panels = [ax.get_position() for ax in fig.axes[:n_panels]]
    [cbar] = _colorbars(fig, n_panels)
    box = cbar.get_position()
    assert len(fig.axes) == n_panels + 1
    assert len({round(p.x1, 9) for p in panels}) == 1  # every panel narrowed alike
    assert panels[0].x1 < box.x0 < box.x1 < 1.0
    assert box.y1 == pytest.approx(panels[0].y1) and box.y0 >= panels[-1].y0 - 1e-9
    width = fig.get_size_inches()[0]
    assert (1.0 - panels[0].x1) * width == pytest.approx(
        tf._CBAR_GAP_IN + tf._CBAR_W_IN + tf._CBAR_TEXT_IN
    )
    labels = [t.get_text() for t in fig.legends[0].get_texts()]
    assert "trained (colour: grid carbon)" in labels
    fig.canvas.draw()  # renders (the label's subscript included)


def test_the_figure_without_carbon_is_the_old_one(plain_timeline):
    runs = plain_timeline.runs
    fig = tf.timeline_figure(plain_timeline, "plain")
    assert len(fig.axes) == len(runs)  # no colorbar
    assert not _colorbars(fig, 0)
    width = fig.get_size_inches()[0]
    for ax in fig.axes:
        assert ax.get_position().x1 == pytest.approx(1.0 - 0.2 / width)  # the old margin
        assert not [c for c in ax.collections if c.get_gid() == "completed"]
        blue = [c for c in ax.collections if np.allclose(c.get_facecolors(), BLUE)]
        assert len(blue) == 1 and len(blue[0].get_paths()) > 0  # the old blue bars
    labels = [t.get_text() for t in fig.legends[0].get_texts()]
    assert "trained (round completed)" in labels


# --------------------------------------------------------------------------- by hand


def _hand_rounds(grid: np.ndarray | None, label: str = "hand") -> PolicyRounds:
    """Four rounds of an hour on two sites: site 0 trains in all, site 1 in the first two,
    then drops out of the third."""
    selected = np.array([[1, 1], [1, 1], [1, 1], [1, 0]], bool)
    dropped = np.array([[0, 0], [0, 0], [0, 1], [0, 0]], bool)
    joins = np.array([[1, 1], [0, 0], [0, 0], [0, 0]], bool)
    start = np.arange(4.0)
    args = (label, start, start + 1.0, selected, dropped, joins, 4.0, True)
    return PolicyRounds(*args) if grid is None else PolicyRounds(*args, grid)


def _hand_timeline(*runs: PolicyRounds) -> Timeline:
    power_h = np.arange(4.0)
    return Timeline(0, 0, "2022-01-01T00:00:00Z", ("a", "b"), power_h, np.ones((4, 2)), runs)


def test_back_to_back_rounds_merge_only_at_the_same_intensity():
    # site 0: 100, 100, 300, 400 -> three bars; site 1: 200, 200 completed -> one bar
    grid = np.array([[100.0, 200.0], [100.0, 200.0], [300.0, 50.0], [400.0, 50.0]])
    other = np.array([[800.0, 0.0]] * 4)  # a second panel sets the top of the shared scale
    timeline = _hand_timeline(_hand_rounds(grid), _hand_rounds(other, "other"))
    fig = tf.timeline_figure(timeline, "hand")
    bars = _completed_bars(fig.axes[0])
    starts = [(float(p.vertices[0, 0]), float(p.vertices[2, 0])) for p in bars.get_paths()]
    assert starts == [(0.0, 2.0), (2.0, 3.0), (3.0, 4.0), (0.0, 2.0)]
    cmap, norm = colormaps[tf.INTENSITY_CMAP], Normalize(0.0, 800.0)
    expected = [cmap(norm(g)) for g in (100.0, 300.0, 400.0, 200.0)]
    np.testing.assert_allclose(bars.get_facecolors(), expected, atol=1e-12)
    # the drop-out stays a red bar, as without carbon
    red_rgba = to_rgba("tab:red")
    red = [c for c in fig.axes[0].collections if np.allclose(c.get_facecolors(), red_rgba)]
    assert len(red) == 1 and len(red[0].get_paths()) == 1
    assert len(_colorbars(fig, 2)) == 1


def test_a_hand_made_timeline_without_intensity_draws_blue_bars():
    fig = tf.timeline_figure(_hand_timeline(_hand_rounds(None)), "hand")
    assert len(fig.axes) == 1
    blue = [c for c in fig.axes[0].collections if np.allclose(c.get_facecolors(), BLUE)]
    assert len(blue) == 1 and len(blue[0].get_paths()) == 2  # site 0's four rounds merge in one
