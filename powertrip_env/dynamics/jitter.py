"""Counter-based randomness: each round's jitter, and each episode's start and keys.

A round's factor for a site is a hash of (the episode's key, the round, the site), turned into
a standard normal. The key is drawn at reset and travels in the state, so a batch equals its
members, a copied state replays the same jitter, and nothing in the kernel holds a generator
(docs/model.md, "Randomness is counter-based"). The hashes are whole-number arithmetic that
compiled and plain Python evaluate alike.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np

from powertrip_env.dynamics.jit import jit
from powertrip_env.dynamics.layout import C_SIGMA, KEY, ROUNDS

if TYPE_CHECKING:
    from powertrip_env.dynamics.params import SimParams
    from powertrip_env.dynamics.state import SimState

_M32 = 0xFFFFFFFF
# the hashes' third word, one per use
_JITTER_STREAM, _START_STREAM, _KEY_STREAM, _LEARNER_STREAM = 1, 2, 3, 5


@jit
def _mul32(a: int, b: int) -> int:
    """``a · b mod 2³²`` for 32-bit ``a`` and ``b``, in parts that fit a signed 64-bit int (so
    compiled and plain Python agree without overflow)."""
    return (a * (b & 0xFFFF) + (((a * (b >> 16)) & 0xFFFF) << 16)) & _M32


@jit
def _mix32(x: int) -> int:
    """A 32-bit integer hash with good avalanche (Wellons' "lowbias32"); a bijection."""
    x ^= x >> 16
    x = _mul32(x, 0x7FEB352D)
    x ^= x >> 15
    x = _mul32(x, 0x846CA68B)
    x ^= x >> 16
    return x


@jit
def _hash(a: int, b: int, c: int) -> int:
    """A 32-bit hash of three whole numbers ``a`` (below 2⁵³), ``b`` and ``c`` (below 2³²)."""
    return _mix32(_mix32(_mix32(_mix32(a & _M32) ^ (a >> 32)) ^ b) ^ c)


@jit
def _uniform(h: int) -> float:
    """A 32-bit hash as a uniform number in (0, 1)."""
    return (h + 0.5) / 4294967296.0


@jit
def _round_seed(key: float, rnd: int) -> int:
    """Round ``rnd``'s 32-bit jitter seed: a hash of the episode's key and the round."""
    return _hash(int(key), rnd & _M32, _JITTER_STREAM)


@jit
def _jitter_value(c: np.ndarray, seed: int, j: int) -> float:
    """Factor ``j`` of a round (N compute factors, then the network's): ``exp(σ · z)``.

    The standard normals come in pairs from Box–Muller on two uniforms, hashes of the round's
    seed and the pair's first index; ``z`` is the pair's cosine (even ``j``) or sine (odd).
    """
    first = j - (j & 1)
    radius = math.sqrt(-2.0 * math.log(_uniform(_mix32(seed ^ first))))
    angle = 2.0 * math.pi * _uniform(_mix32(seed ^ (first + 1)))
    z = math.cos(angle) if j == first else math.sin(angle)
    return math.exp(c[C_SIGMA] * radius * z)


@jit
def _factor(c: np.ndarray, jitter: np.ndarray, seed: int, j: int) -> float:
    """Factor ``j`` of an episode's round: from ``jitter`` (its given factors) if that is not
    empty, else 1 without jitter, or its own. Computed only for the sites that start, the
    network's only if needed."""
    if jitter.shape[0] > 0:
        return jitter[j]
    if c[C_SIGMA] <= 0.0:
        return 1.0
    return _jitter_value(c, seed, j)


@jit
def _jitter_into(c: np.ndarray, key: float, rnd: int, out: np.ndarray) -> None:
    """Every factor of round ``rnd`` of the episode with ``key`` (the clairvoyant's view)."""
    seed = _round_seed(key, rnd)
    for j in range(out.shape[0]):
        out[j] = _jitter_value(c, seed, j) if c[C_SIGMA] > 0.0 else 1.0


@jit
def _jitter_batch(c: np.ndarray, state: np.ndarray, first: np.ndarray, out: np.ndarray) -> None:
    for b in range(out.shape[0]):
        for r in range(out.shape[1]):
            _jitter_into(c, state[b, KEY], first[b] + r, out[b, r])


@jit
def _episode_batch(bases, episodes, lo, hi, out):
    """Per episode: its start row in [lo, hi), its jitter key (below 2⁵³) and a 31-bit seed for a
    real learner, hashed from (the env's base, the episode's index), into ``out`` (B, 3)."""
    for b in range(bases.shape[0]):
        base, e = bases[b], episodes[b] & _M32
        out[b, 0] = lo + (_hash(base, e, _START_STREAM) * (hi - lo) >> 32)
        high = _hash(base, e, _KEY_STREAM) & 0x1FFFFF
        out[b, 1] = (high << 32) | _hash(base, e, _KEY_STREAM + 1)
        out[b, 2] = _hash(base, e, _LEARNER_STREAM) >> 1


def episode_draws(
    bases: np.ndarray, episodes: np.ndarray, lo: int, hi: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Counter-based episode randomness: (start rows in [lo, hi), jitter keys, learner seeds)
    of episode ``episodes[b]`` of an environment whose generator gave ``bases[b]``."""
    out = np.empty((len(bases), 3), dtype=np.int64)
    _episode_batch(
        np.asarray(bases, dtype=np.int64), np.asarray(episodes, dtype=np.int64), lo, hi, out
    )
    return out[:, 0], out[:, 1], out[:, 2]


def jitter_factors(params: SimParams, state: SimState, rounds: int) -> np.ndarray:
    """CLAIRVOYANT: (B, rounds, N + 1) jitter factors of each episode's next ``rounds`` rounds,
    exactly those `step_round` will use. For the references named clairvoyant only."""
    b, n = state.batch, params.n_sites
    out = np.empty((b, max(int(rounds), 0), n + 1))
    first = state.data[:, ROUNDS].astype(np.int64)
    _jitter_batch(params.consts, state.data, first, out)
    return out
