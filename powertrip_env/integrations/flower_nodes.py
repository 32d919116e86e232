"""Flower's nodes as a scenario's sites: the supported release, which node runs which site,
and the grid as a round's inner strategy sees it.

The lowest floor of the Flower integration, shared by the server's strategy
(``powertrip_env.integrations.flower``) and the clients (``flower_task``); it imports flwr
only, after checking its release (``require_flower``).
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np


def _version(text: str) -> tuple[int, ...]:
    """The release numbers of a version string ("1.42.0rc1" -> (1, 42, 0))."""
    return tuple(int(part) for part in re.findall(r"\d+", text.split("+")[0])[:3])


FLOWER_RANGE = ((1, 42), (2, 0))
"""The flwr releases this module supports, ``[low, high)``: the Message API's strategies
(``flwr.serverapp.strategy``) as 1.42 has them; 2.0 may change them."""
FLOWER_SPEC = "flwr>=1.42,<2"
INSTALL = "pip install 'powertrip-env[flower]'"


def require_flower() -> str:
    """The installed flwr's version, or an ImportError that says which range and install fix it.

    Flower's strategy API changed across releases (1.x's ``flwr.server.strategy`` and the
    Message API of ``flwr.serverapp``), so a wrong release fails later in confusing ways.
    """
    try:
        import flwr
    except ImportError as exc:
        raise ImportError(
            f"powertrip_env.integrations.flower needs Flower ({FLOWER_SPEC}), which is not "
            f"installed; {INSTALL}"
        ) from exc
    version = str(getattr(flwr, "__version__", "0"))
    low, high = FLOWER_RANGE
    if not low <= _version(version) < high:
        raise ImportError(
            f"flwr {version} is installed; powertrip_env.integrations.flower supports "
            f"{FLOWER_SPEC}; {INSTALL}"
        )
    return version


require_flower()

from flwr.app import ConfigRecord, Message, RecordDict  # noqa: E402
from flwr.serverapp import Grid  # noqa: E402

DEFAULT_ENV = "PowerTrip-Digits-v1"
SITE_KEY = "site"  # a node config key: the name of the site the node runs
PARTITION_KEY = "partition-id"  # Flower's simulation: the node's partition, read as site index
QUERY = "query"  # the message type of the round that asks every node which site it runs


def site_of(node_config: Mapping[str, Any], site_names: Sequence[str]) -> int:
    """The index of the site a node runs, from its node config (``site`` or ``partition-id``).

    Used on both sides: the server maps nodes to sites with it, and a client picks its shard.
    """
    names = ", ".join(f"{i}: {name}" for i, name in enumerate(site_names))
    if SITE_KEY in node_config:
        name = str(node_config[SITE_KEY])
        if name not in site_names:
            raise ValueError(
                f"node config {SITE_KEY}={name!r} is not a site of the scenario; its sites are "
                f"{names}"
            )
        return list(site_names).index(name)
    if PARTITION_KEY in node_config:
        value = node_config[PARTITION_KEY]
        if isinstance(value, bool) or not isinstance(value, int | np.integer):
            raise ValueError(f"node config {PARTITION_KEY}={value!r}: must be a site index")
        if not 0 <= int(value) < len(site_names):
            raise ValueError(
                f"node config {PARTITION_KEY}={int(value)} is not a site: the scenario has "
                f"{len(site_names)} sites, {PARTITION_KEY} 0 to {len(site_names) - 1} ({names}); "
                f"run {len(site_names)} nodes, one per site"
            )
        return int(value)
    raise ValueError(
        f"node config {dict(node_config)!r} names no site: give {SITE_KEY}='<name>' (one of "
        f"{names}) or, in a simulation, {PARTITION_KEY}"
    )


def node_config_reply(message: Message, node_config: Mapping[str, Any]) -> Message:
    """A client's answer to the strategy's ``query`` message: its node config, as it is.

    The server, not the client, matches it to a site, so a node that names no site of the
    scenario stops the run with one error on the server instead of a failed reply.
    """
    record = ConfigRecord({str(k): v for k, v in node_config.items()})
    return Message(RecordDict({"node": record}), reply_to=message)


def discover_sites(grid: Grid, site_names: Sequence[str], timeout: float = 60.0) -> dict[int, int]:
    """Node id -> site index for every node of ``grid``, one node per site.

    Waits up to ``timeout`` s for as many nodes as sites to connect, asks each for its node
    config and matches the answers with ``site_of``. A node that names no site, two nodes of
    one site, a site with no node, or more nodes than sites each raise a ValueError naming them.
    """
    n = len(site_names)
    deadline = time.monotonic() + timeout
    while len(nodes := sorted(grid.get_node_ids())) < n:
        if time.monotonic() > deadline:
            raise ValueError(
                f"{len(nodes)} Flower nodes connected in {timeout:g} s; the scenario has {n} "
                f"sites ({', '.join(site_names)}), one node each"
            )
        time.sleep(0.2)
    if len(nodes) > n:
        raise ValueError(
            f"{len(nodes)} Flower nodes are connected; the scenario has {n} sites "
            f"({', '.join(site_names)}): run one node per site"
        )
    messages = [grid.create_message(RecordDict(), QUERY, node, "sites") for node in nodes]
    replies = list(grid.send_and_receive(messages, timeout=timeout))
    found: dict[int, int] = {}
    for reply in replies:
        node = reply.metadata.src_node_id
        if reply.has_error():
            raise ValueError(f"Flower node {node} did not say which site it runs: {reply.error}")
        site = site_of(dict(reply.content["node"]), site_names)
        twin = next((other for other, s in found.items() if s == site), None)
        if twin is not None:
            raise ValueError(
                f"Flower nodes {twin} and {node} both run site {site} ({site_names[site]}); "
                "run one node per site"
            )
        found[node] = site
    missing = [site_names[s] for s in range(n) if s not in found.values()]
    if missing:
        raise ValueError(f"no Flower node answered for sites {', '.join(missing)}")
    return found


class SiteGrid(Grid):
    """The grid as the inner strategy sees it in a round: only the chosen sites' nodes.

    FedAvg and its kin sample from ``get_node_ids``; showing them the policy's sites (and
    asking for all of them, ``fraction_train=1``) makes the policy, not the sampler, decide
    who trains. Everything else is the real grid's.
    """

    def __init__(self, grid: Grid, nodes: Sequence[int]) -> None:
        self._grid, self._nodes = grid, list(nodes)

    def set_run(self, run: Any) -> None:
        self._grid.set_run(run)

    @property
    def run(self) -> Any:
        return self._grid.run

    def create_message(self, *args: Any, **kwargs: Any) -> Message:
        return self._grid.create_message(*args, **kwargs)

    def get_node_ids(self) -> Iterable[int]:
        return list(self._nodes)

    def push_messages(self, messages: Iterable[Message]) -> Iterable[str]:
        return self._grid.push_messages(messages)

    def pull_messages(self, message_ids: Iterable[str]) -> Iterable[Message]:
        return self._grid.pull_messages(message_ids)

    def send_and_receive(
        self, messages: Iterable[Message], *, timeout: float | None = None
    ) -> Iterable[Message]:
        return self._grid.send_and_receive(messages, timeout=timeout)
