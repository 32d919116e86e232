"""How the kernel is compiled: numba's ``njit``, cached on disk, with one cache stamp.

numba keeps each function's compiled code in ``__pycache__`` beside its file (else in the user's
cache folder) and throws it away when *that file* changes. The kernel spans several files whose
functions call one another, and a caller's cached code has its callees compiled into it: edit
``learning.py`` and ``round.py``'s cached round would still run the old accuracy. So every
function here is stamped with the sizes and times of all the package's files, and an edit
anywhere recompiles all of it (about 15 s), as it did when the kernel was one file.
"""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

import numba

_PACKAGE = Path(__file__).resolve().parent


def _package_stamp() -> tuple[tuple[str, float, int], ...]:
    """What numba compares to decide whether a cached function is stale: every kernel file, and
    the units module whose constants it compiles in."""
    stamp = []
    # the unit constants the kernel compiles in are powertrip_env/units.py's
    for path in [*sorted(_PACKAGE.glob("*.py")), _PACKAGE.parent / "units.py"]:
        st = path.stat()
        stamp.append((path.name, st.st_mtime, st.st_size))
    return tuple(stamp)


_STAMP = _package_stamp()


def _stamp_cache(dispatcher: Any) -> Any:
    """Give ``dispatcher``'s on-disk cache the package's stamp instead of its own file's.

    numba's cache index keeps a "source stamp" (any picklable value; by default the file's time
    and size) and drops the entries when it no longer matches. Where numba lays its cache out
    otherwise (another version, or ``NUMBA_DISABLE_JIT``) this changes nothing.
    """
    cache_file = getattr(getattr(dispatcher, "_cache", None), "_cache_file", None)
    if cache_file is not None and hasattr(cache_file, "_source_stamp"):
        cache_file._source_stamp = _STAMP
    return dispatcher


def compiled(*, package_stamp: bool = True, **options: Any) -> Any:
    """``numba.njit(cache=True, **options)``, or without the cache where none can be written.

    ``package_stamp`` ties the cached code to every kernel file (``_stamp_cache``); code outside
    the kernel that calls none of it passes False, and numba then watches its own file only.

    In a container or on a cluster node with read-only site-packages and a read-only HOME numba
    finds nowhere to keep its cache and refuses to decorate the function ("no locator
    available"), which would make the package unimportable. There, each import compiles again
    (about 15 s) instead, after one warning that says how to keep the cache.
    """

    def decorate(fn: Any) -> Any:
        try:
            dispatcher = numba.njit(cache=True, **options)(fn)
            return _stamp_cache(dispatcher) if package_stamp else dispatcher
        except RuntimeError as exc:
            if "no locator available" not in str(exc):
                raise
        _warn_no_cache()
        return numba.njit(cache=False, **options)(fn)

    return decorate


_cache_warned = False


def _warn_no_cache() -> None:
    global _cache_warned
    if _cache_warned:
        return
    _cache_warned = True
    warnings.warn(
        f"powertrip_env: numba cannot cache the compiled kernel (neither {_PACKAGE} nor the user"
        " cache folder is writable), so every import compiles it again (about 15 s); set"
        " NUMBA_CACHE_DIR to a writable folder to keep it",
        RuntimeWarning,
        stacklevel=3,
    )


jit = compiled(nogil=True, error_model="numpy")
