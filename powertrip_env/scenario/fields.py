"""Typed, range-checked reading of one table of a scenario, naming the file in every error."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from powertrip_env.errors import ScenarioError

if TYPE_CHECKING:
    from powertrip_env.scenario.extends import Lineage

REQUIRED = object()


class Table:
    """Reads typed, range-checked fields out of one TOML table, naming the file in errors.

    ``lineage`` (for a scenario that ``extends`` another) lets a message say which base file
    wrote an inherited value, and why a base's value the user may expect was not inherited.
    """

    def __init__(
        self, data: dict[str, Any], source: str, section: str, lineage: Lineage | None = None
    ) -> None:
        if not isinstance(data, dict):
            raise ScenarioError(f"{source}: [{section}] must be a table, got {data!r}")
        self.data = data
        self.source = source
        self.section = section
        self.lineage = lineage
        self.used: set[str] = set()

    def _where(self, key: str) -> str:
        origin = self.lineage.inherited.get((self.section, key)) if self.lineage else None
        inherited = f" (inherited from {origin} through 'extends')" if origin else ""
        return f"{self.source}: [{self.section}] field {key!r}{inherited}"

    def dropped(self, key: str) -> str:
        """Why the base's ``key`` was not inherited, as a clause to append; "" if it was not."""
        return self.lineage.dropped.get((self.section, key), "") if self.lineage else ""

    def has(self, key: str) -> bool:
        return key in self.data

    def raw(self, key: str, default: Any = REQUIRED) -> Any:
        self.used.add(key)
        if key not in self.data:
            if default is REQUIRED:
                raise ScenarioError(
                    f"{self._where(key)} is missing; it is required{self.dropped(key)}"
                )
            return default
        return self.data[key]

    def number(
        self,
        key: str,
        default: Any = REQUIRED,
        *,
        lo: float | None = None,
        hi: float | None = None,
        lo_open: bool = False,
    ) -> float:
        value = self.raw(key, default)
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise ScenarioError(f"{self._where(key)} = {value!r}: must be a number")
        value = float(value)
        if not math.isfinite(value):
            raise ScenarioError(f"{self._where(key)} = {value!r}: must be finite")
        check_range(self._where(key), value, lo, hi, lo_open)
        return value

    def integer(self, key: str, default: Any = REQUIRED, *, lo: int = 0) -> int:
        value = self.raw(key, default)
        if isinstance(value, bool) or not isinstance(value, int):
            raise ScenarioError(f"{self._where(key)} = {value!r}: must be an integer")
        if value < lo:
            raise ScenarioError(f"{self._where(key)} = {value!r}: must be >= {lo}")
        return int(value)

    def string(self, key: str, default: Any = REQUIRED, *, choices: tuple[str, ...] = ()) -> str:
        value = self.raw(key, default)
        if not isinstance(value, str) or not value:
            raise ScenarioError(f"{self._where(key)} = {value!r}: must be a non-empty string")
        if choices and value not in choices:
            raise ScenarioError(f"{self._where(key)} = {value!r}: must be one of {choices}")
        return value

    def day_range(self, key: str, default: tuple[int, int]) -> tuple[int, int]:
        value = self.raw(key, list(default))
        if (
            not isinstance(value, list)
            or len(value) != 2
            or not all(isinstance(v, int) and not isinstance(v, bool) for v in value)
            or not 1 <= value[0] <= value[1]
        ):
            raise ScenarioError(
                f"{self._where(key)} = {value!r}: must be [first_day, last_day], "
                "1-based whole days with first <= last"
            )
        return int(value[0]), int(value[1])

    def finish(self) -> None:
        """Unknown keys are almost always typos; name them instead of ignoring them."""
        unknown = sorted(set(self.data) - self.used)
        if unknown:
            raise ScenarioError(
                f"{self.source}: [{self.section}] has unknown field(s) {unknown}; "
                f"allowed: {sorted(self.used)}"
            )


def check_range(
    where: str, value: float, lo: float | None, hi: float | None, lo_open: bool = False
) -> None:
    if lo is not None and (value <= lo if lo_open else value < lo):
        bound = f"> {lo:g}" if lo_open else f">= {lo:g}"
        raise ScenarioError(f"{where} = {value!r}: must be {bound}")
    if hi is not None and value > hi:
        raise ScenarioError(f"{where} = {value!r}: must be <= {hi:g}")
