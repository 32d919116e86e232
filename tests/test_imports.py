"""The import graph of the project's own modules: no cycles, and no import up the layers.

The layers, bottom first (a module may import from its own layer and the ones below it):

1. ``powertrip_env``: the environment. It imports nothing of the project's but itself.
2. ``baselines``: the policies, references and tools that run on the environment.
3. ``agents``: the Stable-Baselines3 pieces; they use the baselines (the reference policy,
   the evaluation harness) and register their policy classes with ``baselines.models``, the
   loader of saved agents, which never imports them (it imports ``baselines.models.PLUGINS``
   by name when a saved model names a class no one has registered yet).
4. ``train_agent.py``: the root script. Nothing imports it.

Inside ``powertrip_env`` the layers of ``POWERTRIP_ENV_LAYERS`` hold the same way: a module of
a listed package imports, of ``powertrip_env``, only modules of its own layer and the layers
below. A module belongs to the deepest listed name that holds it, so ``powertrip_env`` itself,
last, stands for its ``__init__`` (the registration) and for any module no other name lists:
such a module may import any other, but a listed one below may not import it. Extend the list
as the package grows; a prefix that does not exist is skipped.

The graph comes from the source with ``ast``: every ``import`` and ``from ... import``, at
module level and inside functions, relative ones resolved. ``from a import b`` is an edge to
``a.b`` when that is a module, else to the package ``a`` (its ``__init__``). Importing ``a.b``
also runs ``a/__init__.py``; that implicit edge is not drawn, or every package whose
``__init__`` imports its modules would be a cycle. Imports under ``if TYPE_CHECKING:`` never run:
they count for the layers, not for cycles.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
LAYERS = ("powertrip_env", "baselines", "agents", "train_agent")
"""The top-level folders (and the root script), bottom first."""

POWERTRIP_ENV_LAYERS: tuple[tuple[str, ...], ...] = (
    ("powertrip_env.dynamics",),  # the kernel: nothing else from powertrip_env
    ("powertrip_env.errors", "powertrip_env.atomic"),  # bad input and safe writes: nothing either
    ("powertrip_env.scenario",),  # scenario files and power data
    # what a scenario and the kernel make: the loaded tables, rewards, progress models, what a
    # policy may see, what a reference may foresee, pictures
    ("powertrip_env.simulation", "powertrip_env.rewards", "powertrip_env.learners",
     "powertrip_env.view", "powertrip_env.clairvoyant", "powertrip_env.render"),
    # the environment's contract, bound once per env: spaces, observations, actions and info;
    # where episodes start
    ("powertrip_env.layout", "powertrip_env.episodes"),
    ("powertrip_env.options",),  # the constructor arguments, checked into the layers below
    ("powertrip_env.env", "powertrip_env.vector_env"),  # the Gymnasium adapters
    # the registration (``__init__``) and other libraries' glue over the adapters
    ("powertrip_env.integrations", "powertrip_env"),
)  # fmt: skip
"""``powertrip_env``'s own layers, bottom first: module or package names (a package stands for
everything under it that no deeper name lists). Extend it as the package grows."""


@dataclass(frozen=True)
class Edge:
    """``source`` imports ``target`` at ``line`` of ``path``."""

    source: str
    target: str
    path: Path
    line: int
    type_only: bool  # under ``if TYPE_CHECKING:``

    def __str__(self) -> str:
        return f"{self.source} -> {self.target} ({self.path.relative_to(ROOT)}:{self.line})"


def project_files() -> dict[str, Path]:
    """Module name -> file of every .py file under the top-level folders, and the root script."""
    files = {"train_agent": ROOT / "train_agent.py"}
    for top in LAYERS[:-1]:
        for path in sorted((ROOT / top).rglob("*.py")):
            parts = path.relative_to(ROOT).with_suffix("").parts
            if "__pycache__" in parts:
                continue
            files[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return files


def _type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _imports(tree: ast.AST) -> Iterator[tuple[ast.Import | ast.ImportFrom, bool]]:
    """Every import statement anywhere in ``tree``, and whether it is under TYPE_CHECKING."""

    def walk(node: ast.AST, type_only: bool) -> Iterator[tuple[ast.Import | ast.ImportFrom, bool]]:
        if isinstance(node, ast.Import | ast.ImportFrom):
            yield node, type_only
        if isinstance(node, ast.If) and _type_checking(node.test):
            for child in node.body:
                yield from walk(child, True)
            for child in node.orelse:
                yield from walk(child, type_only)
            return
        for child in ast.iter_child_nodes(node):
            yield from walk(child, type_only)

    yield from walk(tree, False)


def _known(name: str, modules: dict[str, Path]) -> str | None:
    """The deepest of ``name`` and its parents that is a project module."""
    parts = name.split(".")
    for end in range(len(parts), 0, -1):
        candidate = ".".join(parts[:end])
        if candidate in modules:
            return candidate
    return None


def _targets(
    node: ast.Import | ast.ImportFrom, module: str, path: Path, modules: dict[str, Path]
) -> Iterator[str]:
    """The project modules that one import statement of ``module`` imports."""
    if isinstance(node, ast.Import):
        for alias in node.names:
            if (target := _known(alias.name, modules)) is not None:
                yield target
        return
    base = node.module or ""
    if node.level:
        package = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
        package = package[: len(package) - (node.level - 1)]
        base = ".".join([*package, *([base] if base else [])])
    for alias in node.names:
        if f"{base}.{alias.name}" in modules:  # ``from a import b``, b a module
            yield f"{base}.{alias.name}"
        elif (target := _known(base, modules)) is not None:
            yield target


def import_graph() -> list[Edge]:
    """Every import between two project modules, in file order."""
    modules = project_files()
    edges = []
    for module, path in modules.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for node, type_only in _imports(tree):
            for target in dict.fromkeys(_targets(node, module, path, modules)):
                if target != module:
                    edges.append(Edge(module, target, path, node.lineno, type_only))
    return edges


def cycles(edges: list[Edge]) -> list[list[Edge]]:
    """One cycle (as its edges) through each strongly connected group of modules."""
    graph: dict[str, list[Edge]] = {}
    for edge in edges:
        graph.setdefault(edge.source, []).append(edge)
        graph.setdefault(edge.target, [])
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    groups: list[set[str]] = []

    def connect(node: str) -> None:  # Tarjan; the graph is a few hundred modules deep at most
        index[node] = low[node] = len(index)
        stack.append(node)
        for edge in graph[node]:
            if edge.target not in index:
                connect(edge.target)
                low[node] = min(low[node], low[edge.target])
            elif edge.target in stack:
                low[node] = min(low[node], index[edge.target])
        if low[node] == index[node]:
            group = set()
            while True:
                member = stack.pop()
                group.add(member)
                if member == node:
                    break
            if len(group) > 1:
                groups.append(group)

    for node in sorted(graph):
        if node not in index:
            connect(node)
    found = []
    for group in groups:
        start = min(group)
        # breadth-first from start back to start, inside the group: the shortest cycle through it
        paths: dict[str, list[Edge]] = {start: []}
        queue = [start]
        while queue:
            node = queue.pop(0)
            for edge in graph[node]:
                if edge.target == start:
                    found.append([*paths[node], edge])
                    queue = []
                    break
                if edge.target in group and edge.target not in paths:
                    paths[edge.target] = [*paths[node], edge]
                    queue.append(edge.target)
    return found


def _layer(module: str) -> int:
    return LAYERS.index(module.split(".")[0])


def _inner_layer(module: str, layers: tuple[tuple[str, ...], ...]) -> int | None:
    """Index of the layer of the deepest listed name that holds ``module`` (itself or a package
    above it), else None."""
    holders = [(name.count("."), i) for i, names in enumerate(layers) for name in names
               if module == name or module.startswith(f"{name}.")]  # fmt: skip
    return max(holders)[1] if holders else None


def inner_violations(edges: list[Edge], layers: tuple[tuple[str, ...], ...]) -> list[Edge]:
    """Imports inside ``powertrip_env`` that break ``layers`` (see the module docstring)."""
    bad = []
    for edge in edges:
        if not edge.source.split(".")[0] == edge.target.split(".")[0] == "powertrip_env":
            continue
        source = _inner_layer(edge.source, layers)
        if source is None:
            continue
        target = _inner_layer(edge.target, layers)
        if target is None or target > source:
            bad.append(edge)
    return bad


EDGES = import_graph()


def test_the_graph_sees_the_project() -> None:
    """The walk finds the modules, function-level imports and relative imports."""
    modules = project_files()
    assert {"powertrip_env", "powertrip_env.env", "baselines.evaluate", "agents.site_policy",
            "train_agent"} <= set(modules)  # fmt: skip
    assert len(EDGES) > 50
    pairs = {(e.source, e.target) for e in EDGES}
    assert ("train_agent", "agents.training") in pairs
    assert ("agents.site_policy", "agents.extractors") in pairs


def test_no_import_cycles() -> None:
    found = cycles([e for e in EDGES if not e.type_only])
    report = ["\n  ".join(map(str, cycle)) for cycle in found]
    assert not found, "import cycles:\n  " + "\n\n  ".join(report)


def test_no_import_goes_up_the_layers() -> None:
    """powertrip_env imports neither baselines nor agents nor train_agent; baselines imports
    neither agents nor train_agent; agents does not import train_agent."""
    up = [e for e in EDGES if _layer(e.target) > _layer(e.source)]
    assert not up, (
        "imports up the layers " + " <- ".join(LAYERS) + ":\n  " + "\n  ".join(map(str, up))
    )


def test_powertrip_env_keeps_its_own_layers() -> None:
    """``powertrip_env.dynamics`` imports nothing else from powertrip_env, and so on up
    ``POWERTRIP_ENV_LAYERS``, for the layers that exist."""
    bad = inner_violations(EDGES, POWERTRIP_ENV_LAYERS)
    assert not bad, "imports up powertrip_env's layers:\n  " + "\n  ".join(map(str, bad))


def test_the_checks_catch_what_they_are_for(tmp_path: Path) -> None:
    """A cycle, an import up the layers and one up powertrip_env's layers are all reported."""
    here = Path(__file__)
    edges = [Edge("a.x", "a.y", here, 1, False), Edge("a.y", "a.z", here, 2, False),
             Edge("a.z", "a.x", here, 3, False), Edge("a.y", "a", here, 4, True)]  # fmt: skip
    (cycle,) = cycles(edges)
    assert [e.line for e in cycle] == [1, 2, 3]
    assert cycles(edges[1:]) == []
    assert _layer("baselines.evaluate") < _layer("agents.site_policy") < _layer("train_agent")
    layers = (("powertrip_env.k",), ("powertrip_env.s", "powertrip_env.t"))
    inner = [Edge("powertrip_env.k.a", "powertrip_env.k.b", here, 1, False),  # same layer
             Edge("powertrip_env.s", "powertrip_env.k.a", here, 2, False),  # down
             Edge("powertrip_env.k.a", "powertrip_env.s.c", here, 3, False),  # up
             Edge("powertrip_env.k.a", "powertrip_env.errors", here, 4, True),  # unlisted
             Edge("powertrip_env.env", "powertrip_env.s", here, 5, False)]  # fmt: skip
    assert [e.line for e in inner_violations(inner, layers)] == [3, 4]
    # the deepest listed name decides: the root, listed last, holds what nothing else lists
    nested = (*layers, ("powertrip_env",))
    inner = [Edge("powertrip_env", "powertrip_env.s", here, 1, False),  # down from the root
             Edge("powertrip_env.new", "powertrip_env.k.a", here, 2, False),  # unlisted: the root's
             Edge("powertrip_env.s", "powertrip_env.new", here, 3, False),  # up into the root's
             Edge("powertrip_env.k.a", "powertrip_env", here, 4, False)]  # fmt: skip
    assert [e.line for e in inner_violations(inner, nested)] == [3, 4]


def _fresh_python(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300
    )


@pytest.mark.parametrize(
    ("code", "absent"),
    [
        ("import powertrip_env, gymnasium as gym; gym.make('PowerTrip-v0')",
         ("baselines", "agents", "train_agent")),
        # the tools and an evaluation of hand-coded policies and references: no agents needed
        ("import baselines.evaluate, baselines.headroom, baselines.validate, "
         "baselines.fidelity, baselines.sensitivity, baselines.readme_tables, baselines.models\n"
         "baselines.evaluate.evaluate('PowerTrip-v0', ['PowerTrip', 'BestFixedSet'], episodes=1,"
         " progress=False)", ("agents", "train_agent")),
        ("import agents.pretrain, agents.training, agents.checks", ("train_agent",)),
    ],
)  # fmt: skip
def test_a_layer_runs_without_the_layers_above(code: str, absent: tuple[str, ...]) -> None:
    """What the graph says, at run time: nothing imports a layer above, not even by name."""
    check = "\nimport sys\nprint(sorted({m.split('.')[0] for m in sys.modules}))"
    done = _fresh_python(code + check)
    assert done.returncode == 0, done.stderr
    loaded = set(ast.literal_eval(done.stdout.strip().splitlines()[-1]))
    assert not loaded & set(absent), loaded & set(absent)


def test_a_saved_agent_brings_its_policy_classes_in_through_the_plugins(tmp_path: Path) -> None:
    """``baselines.models`` loads an agent saved with ``agents``' SitePolicy in a process that
    never imported ``agents``: it imports its ``PLUGINS`` by name, which register the class."""
    import gymnasium as gym
    from stable_baselines3 import PPO

    from agents.site_policy import SitePolicy

    env = gym.make("PowerTrip-v0", obs_mode="dict")
    path = tmp_path / "sites.zip"
    PPO(SitePolicy, env, n_steps=32, batch_size=32, device="cpu", seed=0).save(path)
    code = (
        "from baselines import models\n"
        "assert not any(name.startswith('agents.') for names in models._POLICY_CLASSES.values()"
        " for name in names)\n"
        f"agent, _ = models.load_agent({str(path)!r}, 'ppo', 'sites', 'PowerTrip-v0')\n"
        "print(type(agent.model.policy).__module__)"
    )
    check = "\nimport sys\nprint(sorted({m.split('.')[0] for m in sys.modules}))"
    done = _fresh_python(code + check)
    assert done.returncode == 0, done.stderr
    *_, policy_module, modules = done.stdout.strip().splitlines()
    assert policy_module == "agents.site_policy"
    assert "train_agent" not in ast.literal_eval(modules)
