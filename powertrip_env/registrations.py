"""The registered IDs, as ``PowerTripEnv``'s documentation lists them: which registrations run
this environment on a shipped scenario, and the docstring's sentences that name them and the
power data each runs on, filled in from the registry and the data folder's record so that
neither list is kept by hand."""

from __future__ import annotations

import re
import textwrap
from typing import Any

from powertrip_env.scenario import scenario_names
from powertrip_env.scenario.provenance import power_data_sentence

ENTRY_POINT = "powertrip_env.env:PowerTripEnv"
"""Where Gymnasium finds the environment (``powertrip_env.ENTRY_POINT``)."""

POWER_DATA_PLACEHOLDER = (
    "<power data of the registered IDs: powertrip_env.registrations.document_power_data()>"
)
IDS_PLACEHOLDER = "<registered IDs: powertrip_env.registrations.document_power_data()>"


def is_entry_point(entry_point: Any) -> bool:
    """Whether a registration's entry point is ``PowerTripEnv``: its ``module:name``, as the
    package registers it, or the class itself, as a user may."""
    if callable(entry_point):
        entry_point = f"{entry_point.__module__}:{entry_point.__qualname__}"
    return entry_point == ENTRY_POINT


def registered_scenarios() -> list[tuple[str, str, dict[str, Any]]]:
    """(ID, shipped scenario, other arguments) of every Gymnasium registration of this class
    on a shipped scenario, in the order they were registered: ``import powertrip_env``
    registers its IDs before this module can be imported."""
    from gymnasium.envs.registration import registry

    shipped = scenario_names()
    found = []
    for env_id, spec in registry.items():
        kwargs = dict(spec.kwargs)
        name = kwargs.pop("scenario", None)
        if is_entry_point(spec.entry_point) and isinstance(name, str) and name in shipped:
            found.append((env_id, name, kwargs))
    return found


def document_power_data(doc: str | None) -> str | None:
    """``doc`` with the registered IDs and which of them run on real power data filled in,
    from the registry and the data folder's record (``powertrip_env.scenario.provenance``), so
    that neither list is kept by hand (``None`` stays ``None``: ``python -OO``)."""
    if doc is None:
        return None
    registered = registered_scenarios()
    ids = (
        "Registered IDs, each with its scenario: "
        + ", ".join(
            f"`{env_id}` (`{name}`" + "".join(f", `{k}={v!r}`" for k, v in kwargs.items()) + ")"
            for env_id, name, kwargs in registered
        )
        + "."
    )
    filled = {
        POWER_DATA_PLACEHOLDER: power_data_sentence([(e, name) for e, name, _ in registered]),
        IDS_PLACEHOLDER: textwrap.fill(ids, 92, break_on_hyphens=False),
    }
    for placeholder, text in filled.items():
        match = re.search(r"^([ \t]*)" + re.escape(placeholder) + r"$", doc, re.MULTILINE)
        if match is None:
            raise ValueError(f"the docstring has no placeholder {placeholder!r}")
        indented = "\n".join(match.group(1) + line for line in text.splitlines())
        doc = doc[: match.start()] + indented + doc[match.end() :]
    return doc
