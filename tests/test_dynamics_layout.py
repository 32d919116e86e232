"""The kernel's packed arrays and how its package is compiled (powertrip_env/dynamics/).

SimParams stores each value once, in the packed arrays the kernel takes, and reads them by name
(layout.py declares the slots); these tests hold the names, the slots and the scenario's values
together. The kernel spans several files, so numba's per-file cache stamp is replaced by one for
the whole package (jit.py): an edit to a callee must not leave a caller's cached code stale.
"""

from __future__ import annotations

import dataclasses
import importlib
import pkgutil

import numpy as np
import pytest

from powertrip_env import dynamics
from powertrip_env.dynamics import jit, layout
from powertrip_env.simulation import load_simulation


@pytest.fixture(scope="module")
def params() -> dynamics.SimParams:
    return load_simulation("default").params


def test_every_packed_value_has_its_name_on_simparams(params):
    for slot, name in enumerate(layout.SITE_FIELDS):
        value = getattr(params, name)
        assert value.shape == (params.n_sites,)
        np.testing.assert_array_equal(value, params.site[slot])
        assert not value.flags.writeable
    declared = {f.name: f.type for f in dataclasses.fields(params)}
    for slot, name in enumerate(layout.CONSTS):
        value = getattr(params, name)
        assert float(value) == params.consts[slot]
        assert type(value).__name__ == declared[name], name  # the annotation's int, bool, float
    assert params.rows == params.powered.shape[0] == params.table.shape[0] - 1
    np.testing.assert_array_equal(params.rate, params.table[:-1, layout.RATE])


def test_the_scalars_follow_the_scenario(params):
    sim = load_simulation("default")
    wl, ep, net = sim.scenario.workload, sim.scenario.episode, sim.scenario.network
    assert params.a_target == wl.a_target and params.span == wl.a_target - wl.a0
    assert params.time_budget_s == ep.time_budget_h * 3600.0
    assert params.max_rounds == ep.max_rounds and params.ring == (net.allreduce == "ring")
    assert params.hub_tx_s == wl.model_bytes * 8.0 / (net.hub_gbps * 1e9)
    wan_bps = np.array([s.wan_gbps for s in sim.scenario.sites]) * 1e9
    np.testing.assert_array_equal(params.site_tx_s, wl.model_bytes * 8.0 / wan_bps)
    state_bits = 8.0 * (wl.state_bytes if wl.state_bytes is not None else wl.model_bytes)
    np.testing.assert_array_equal(params.join_s, net.join_fixed_s + state_bits / wan_bps)
    np.testing.assert_array_equal(params.idle_w_per_gpu, ep.idle_fraction * params.gpu_wall_w)


def test_with_constants_copies_the_scalars_and_shares_the_tables(params):
    quiet = params.with_constants(jitter_sigma=0.0)
    assert quiet.jitter_sigma == 0.0 and params.jitter_sigma > 0.0
    assert quiet.rtt_s is not params.rtt_s and not quiet.rtt_s.flags.writeable
    assert quiet.table is params.table and quiet.site is params.site
    assert not quiet.consts.flags.writeable
    changed = np.flatnonzero(quiet.consts != params.consts)
    assert changed.tolist() == [layout.CONSTS.index("jitter_sigma")]
    with pytest.raises(TypeError, match="no scalar"):
        params.with_constants(jitter=0.0)


def _kernels():
    for info in pkgutil.iter_modules(dynamics.__path__):
        module = importlib.import_module(f"powertrip_env.dynamics.{info.name}")
        for name, value in vars(module).items():
            if hasattr(value, "py_func") and value.__module__ == module.__name__:
                yield f"{info.name}.{name}", value


def test_every_kernel_function_is_stamped_with_the_whole_package():
    kernels = dict(_kernels())
    if not kernels:
        pytest.skip("NUMBA_DISABLE_JIT: nothing is compiled")
    assert {"round._round", "predict._predict_batch", "observation._step_observe_parallel"} <= set(
        kernels
    )
    files = {name for name, _, _ in jit._STAMP}
    assert {"round.py", "learning.py", "tables.py", "layout.py"} <= files
    for name, dispatcher in kernels.items():
        cache_file = getattr(getattr(dispatcher, "_cache", None), "_cache_file", None)
        if cache_file is None or not hasattr(cache_file, "_source_stamp"):
            pytest.skip("this numba keeps its cache another way")
        assert cache_file._source_stamp == jit._STAMP, name
