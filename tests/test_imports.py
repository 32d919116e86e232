"""The import graph of the project's own modules: no cycles, and no import up the layers.

The layers, bottom first (a module may import from its own layer and the ones below it), are
``LAYERS``. Their top floors are the repository's other folders, installed inside the package
(``package-dir`` in pyproject.toml, read by ``layout``), and the maintainers' folder above them:

* ``powertrip_env`` (its own floors first): the environment. It imports nothing above it.
* ``powertrip_env.baselines`` (``baselines/``): the policies and the references, nothing else.
* ``powertrip_env.harness`` (``harness/``): what plays them and reports on them (evaluation,
  saved agents, reports, calibration, datasets). It stands above the policies it plays and below
  the agents: ``agents/`` registers its policy classes with
  ``powertrip_env.harness.models.registry``, read by the loader of saved agents, which never
  imports them (it imports ``registry.PLUGINS`` by name when a saved model names a class no one
  registered yet).
* ``powertrip_env.agents`` (``agents/``): the Stable-Baselines3 pieces and the training run.
* ``powertrip_env.cli`` (the ``powertrip`` command) and ``train_agent.py``: nothing in the
  package imports them.
* ``maintainers`` (``maintainers/``, outside the wheel): the writers of the checkout's docs,
  README tables and pretrained agent. The site's CLI page reads every command's parser, so it
  stands above the command line; ``cli`` reaches it only by name, in a checkout.

A module belongs to the deepest listed name that holds it, so ``powertrip_env`` stands for its
``__init__`` (the registration) and for any module no deeper name lists: such a module may
import any module of its layer or below, but a module below may not import it. Inside the
kernel, ``DYNAMICS_LAYERS`` holds the same way. Extend the lists as the package grows; a name
that does not exist is skipped.

The graph comes from the source with ``ast``: every ``import`` and ``from ... import``, at
module level and inside functions, relative ones resolved. ``from a import b`` is an edge to
``a.b`` when that is a module, else to the package ``a`` (its ``__init__``). Importing ``a.b``
also runs ``a/__init__.py``; that implicit edge is not drawn, or every package whose
``__init__`` imports its modules would be a cycle. Imports under ``if TYPE_CHECKING:`` never run,
but they count for the layers and for cycles too: a circle of names is a circle to a reader.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from layout import ROOT, code_folders

FOLDERS = code_folders()
"""The repository's folders of code and the name each imports as (``layout``)."""

LAYERS: tuple[tuple[str, ...], ...] = (
    ("powertrip_env.units",),  # the units and their conversions: imports nothing
    ("powertrip_env.dynamics",),  # the kernel: nothing else from powertrip_env
    ("powertrip_env.errors", "powertrip_env.atomic"),  # bad input and safe writes: nothing either
    ("powertrip_env.scenario",),  # scenario files and power data
    # what a scenario and the kernel make: the loaded tables, rewards, progress models, what a
    # policy may see, what a reference may foresee, pictures
    (
        "powertrip_env.simulation",
        "powertrip_env.rewards",
        "powertrip_env.learners",
        "powertrip_env.view",
        "powertrip_env.clairvoyant",
        "powertrip_env.render",
    ),
    # the environment's contract, bound once per env: spaces, observations, actions and info;
    # where episodes start
    ("powertrip_env.interface", "powertrip_env.episodes"),
    # the constructor arguments, checked into the layers below; the registered IDs' sentences
    ("powertrip_env.options", "powertrip_env.tasks"),
    ("powertrip_env.engine",),  # B episodes of one setup: the one implementation of both envs
    ("powertrip_env.env", "powertrip_env.vector_env"),  # the Gymnasium adapters
    # the registration (``__init__``) and other libraries' glue over the adapters
    ("powertrip_env.integrations", "powertrip_env"),
    ("powertrip_env.baselines",),  # the policies and the references
    ("powertrip_env.harness",),  # what plays them: evaluation, saved agents, reports, ...
    # SB3 pieces and the training run; the Flower strategy, which runs the baselines' policies
    # and saved agents in a federation (its nodes and clients stand with the other integrations)
    ("powertrip_env.agents", "powertrip_env.integrations.flower"),
    ("powertrip_env.cli", "train_agent"),  # the command lines
    # the maintainers' writers (outside the wheel): the site's generator documents every command
    ("maintainers",),
)
"""The project's layers, bottom first: module or package names (a package stands for
everything under it that no deeper name lists). Extend it as the package grows."""

DYNAMICS_LAYERS: tuple[tuple[str, ...], ...] = tuple(
    tuple(f"powertrip_env.dynamics{'.' + name if name else ''}" for name in names)
    for names in (
        ("layout", "features", "jit"),  # slot names, declared columns, how it compiles
        ("site_table", "learning"),  # the per-row site table; progress and rewards
        ("params",),  # a scenario as the kernel's arrays
        # packed state, power tables, counter-based randomness, the unknowns and telemetry
        ("state", "tables", "jitter", "unknowns", "paths"),
        ("round", "info"),  # a round on the true trace; what an environment reports of it
        # the what-if, the observation, the formulas, a policy's estimates from the telemetry
        ("predict", "observation", "formulas", "estimates"),
        ("candidates",),  # candidate sets ranked by the what-if
        ("plans",),  # plans played rounds ahead
        ("",),  # the package's ``__init__`` (its public names) and ``__main__``
    )
)
"""The kernel's own layers, bottom first, the same way."""


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
    """Module name -> file of every .py file of the folders, as installed, and the root script."""
    files = {"train_agent": ROOT / "train_agent.py"}
    for folder, package in FOLDERS.items():
        for path in sorted((ROOT / folder).rglob("*.py")):
            parts = path.relative_to(ROOT / folder).with_suffix("").parts
            if "__pycache__" in parts:
                continue
            files[".".join([package, *(parts[:-1] if parts[-1] == "__init__" else parts)])] = path
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


def _layer(module: str, layers: tuple[tuple[str, ...], ...] = LAYERS) -> int | None:
    """Index of the layer of the deepest listed name that holds ``module`` (itself or a package
    above it), else None."""
    holders = [
        (name.count("."), i)
        for i, names in enumerate(layers)
        for name in names
        if module == name or module.startswith(f"{name}.")
    ]
    return max(holders)[1] if holders else None


def violations(edges: list[Edge], layers: tuple[tuple[str, ...], ...]) -> list[Edge]:
    """Imports that break ``layers`` (see the module docstring): from a listed module up, or to
    a module no name lists. Edges whose source no name lists are not ``layers``' business."""
    bad = []
    for edge in edges:
        source = _layer(edge.source, layers)
        if source is None:
            continue
        target = _layer(edge.target, layers)
        if target is None or target > source:
            bad.append(edge)
    return bad


def _within(edges: list[Edge], package: str) -> list[Edge]:
    inside = (package, f"{package}.")
    return [e for e in edges if e.source.startswith(inside) and e.target.startswith(inside)]


EDGES = import_graph()


def test_the_graph_sees_the_project() -> None:
    """The walk finds the modules, as installed, function-level imports and relative imports."""
    modules = project_files()
    assert {
        "powertrip_env",
        "powertrip_env.env",
        "powertrip_env.harness.evaluation.evaluate",
        "powertrip_env.agents.site_policy",
        "powertrip_env.cli",
        "train_agent",
    } <= set(modules)
    evaluate = modules["powertrip_env.harness.evaluation.evaluate"]
    assert evaluate == ROOT / "harness" / "evaluation" / "evaluate.py"
    assert modules["maintainers.docs_site"] == ROOT / "maintainers" / "docs_site.py"
    assert len(EDGES) > 50
    pairs = {(e.source, e.target) for e in EDGES}
    assert ("train_agent", "powertrip_env.agents.training") in pairs
    assert ("powertrip_env.agents.site_policy", "powertrip_env.agents.extractors") in pairs
    assert ("powertrip_env.dynamics.round", "powertrip_env.dynamics.params") in pairs  # type-only


def test_every_module_has_a_layer() -> None:
    """A new top-level module or folder must be placed in ``LAYERS`` before it can import."""
    assert [m for m in project_files() if _layer(m) is None] == []


def test_no_import_cycles() -> None:
    """None at run time, and none through ``TYPE_CHECKING`` imports either."""
    found = cycles(EDGES)
    report = ["\n  ".join(map(str, cycle)) for cycle in found]
    assert not found, "import cycles:\n  " + "\n\n  ".join(report)


def test_no_import_goes_up_the_layers() -> None:
    """The environment imports none of the tools, the baselines import neither the agents nor
    the command lines, and so on up ``LAYERS``, down to the kernel's floors."""
    bad = violations(EDGES, LAYERS)
    assert not bad, "imports up the layers:\n  " + "\n  ".join(map(str, bad))


def test_the_kernel_keeps_its_own_layers() -> None:
    """Inside ``powertrip_env.dynamics``: ``layout`` imports nothing of the kernel, and so on up
    ``DYNAMICS_LAYERS``; ``params`` builds the site table without importing the observation."""
    bad = violations(_within(EDGES, "powertrip_env.dynamics"), DYNAMICS_LAYERS)
    assert not bad, "imports up the kernel's layers:\n  " + "\n  ".join(map(str, bad))


def test_the_checks_catch_what_they_are_for(tmp_path: Path) -> None:
    """A cycle, an import up the layers and one to an unlisted module are all reported."""
    here = Path(__file__)
    edges = [Edge("a.x", "a.y", here, 1, False), Edge("a.y", "a.z", here, 2, False),
             Edge("a.z", "a.x", here, 3, True), Edge("a.y", "a", here, 4, True)]  # fmt: skip
    (cycle,) = cycles(edges)
    assert [e.line for e in cycle] == [1, 2, 3]  # a type-only edge closes it too
    assert cycles(edges[1:]) == []
    assert (
        _layer("powertrip_env.env")
        < _layer("powertrip_env.baselines.policies")
        < _layer("powertrip_env.harness.evaluation.evaluate")
        < _layer("powertrip_env.agents.site_policy")
        < _layer("train_agent")
        == _layer("powertrip_env.cli")
        < _layer("maintainers.docs_site")
    )
    layers = (("p.k",), ("p.s", "p.t"))
    inner = [Edge("p.k.a", "p.k.b", here, 1, False),  # same layer
             Edge("p.s", "p.k.a", here, 2, False),  # down
             Edge("p.k.a", "p.s.c", here, 3, False),  # up
             Edge("p.k.a", "p.errors", here, 4, True),  # unlisted
             Edge("p.env", "p.s", here, 5, False)]  # fmt: skip
    assert [e.line for e in violations(inner, layers)] == [3, 4]
    # the deepest listed name decides: the root holds what nothing deeper lists
    nested = (*layers, ("p",), ("p.top",))
    inner = [
        Edge("p", "p.s", here, 1, False),  # down from the root
        Edge("p.new", "p.k.a", here, 2, False),  # unlisted: the root's
        Edge("p.s", "p.new", here, 3, False),  # up into the root's
        Edge("p.k.a", "p", here, 4, False),  # up to the root
        Edge("p.new", "p.top.x", here, 5, False),
    ]  # up from the root's
    assert [e.line for e in violations(inner, nested)] == [3, 4, 5]
    assert _within(inner, "p.k") == []


def _fresh_python(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300
    )


_TOOLS = (
    "evaluation.evaluate",
    "reports.headroom",
    "reports.benchmark",
    "calibration.validate",
    "calibration.fidelity",
    "calibration.sensitivity",
    "models.loading",
    "datasets.build",
)


@pytest.mark.parametrize(
    ("code", "absent"),
    [
        ("import powertrip_env, gymnasium as gym; gym.make('PowerTrip-v0')",
         ("powertrip_env.baselines", "powertrip_env.agents", "powertrip_env.cli", "train_agent")),
        # the tools and an evaluation of hand-coded policies and references: no agents needed
        ("".join(f"import powertrip_env.harness.{tool}\n" for tool in _TOOLS)
         + "powertrip_env.harness.evaluation.evaluate.evaluate('PowerTrip-v0',"
         " ['PowerTrip', 'BestFixedSet'], episodes=1, progress=False)",
         ("powertrip_env.agents", "powertrip_env.cli", "train_agent")),
        ("import powertrip_env.agents.training, powertrip_env.agents.imitation,"
         " powertrip_env.agents.checks", ("powertrip_env.cli", "train_agent", "maintainers")),
        # the command line's help names every command without importing any of them
        ("import powertrip_env.cli\npowertrip_env.cli.main(['--help'])",
         ("powertrip_env.baselines", "powertrip_env.harness", "powertrip_env.agents", "torch",
          "maintainers")),
    ],
)  # fmt: skip
def test_a_layer_runs_without_the_layers_above(code: str, absent: tuple[str, ...]) -> None:
    """What the graph says, at run time: nothing imports a layer above, not even by name."""
    check = "\nimport sys\nprint(sorted(sys.modules))"
    done = _fresh_python(code + check)
    assert done.returncode == 0, done.stderr
    loaded = ast.literal_eval(done.stdout.strip().splitlines()[-1])
    found = [m for m in loaded if m in absent or m.startswith(tuple(f"{a}." for a in absent))]
    assert not found, found


def test_a_saved_agent_brings_its_policy_classes_in_through_the_plugins(tmp_path: Path) -> None:
    """``powertrip_env.harness.models.loading`` loads an agent saved with the agents' SitePolicy in
    a process that never imported them: it imports its ``PLUGINS`` by name, which register it."""
    import gymnasium as gym
    from stable_baselines3 import PPO

    from powertrip_env.agents.site_policy import SitePolicy

    env = gym.make("PowerTrip-v0", obs_mode="dict")
    path = tmp_path / "sites.zip"
    PPO(SitePolicy, env, n_steps=32, batch_size=32, device="cpu", seed=0).save(path)
    code = (
        "from powertrip_env.harness.models import loading as models\n"
        "assert not any(name.startswith(('powertrip_env.agents.', 'agents.'))"
        " for names in models.POLICY_CLASSES.values()"
        " for name in names)\n"
        f"agent, _ = models.load_agent({str(path)!r}, 'ppo', 'sites', 'PowerTrip-v0')\n"
        "print(type(agent.model.policy).__module__)"
    )
    check = "\nimport sys\nprint(sorted({m.split('.')[0] for m in sys.modules}))"
    done = _fresh_python(code + check)
    assert done.returncode == 0, done.stderr
    *_, policy_module, modules = done.stdout.strip().splitlines()
    assert policy_module == "powertrip_env.agents.site_policy"
    assert "train_agent" not in ast.literal_eval(modules)
