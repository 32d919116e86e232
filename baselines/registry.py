"""Every policy and reference by name: what ``--policies`` and ``make_policy`` accept.

Usage::

    from powertrip_env.baselines.registry import make_policy

    policy = make_policy("TopPower-3", n_sites=env.unwrapped.n_sites, seed=0)

The names are fixed (``POLICIES``: ``PowerTrip``, ``MyopicOptimal``, the lookahead rules
``HorizonRule`` and ``ForecastMPC`` with their tuned parameters, the clairvoyant
``BestFixedSet`` and ``BeamPlanner``, ...) or sized, ``<family>-<k>`` for 1 ≤ k ≤ N
(``SIZED``: ``TopPower-3``, ``Nearest-2``, ...). This module sits above the policies
(``baselines/policies.py``) and the references (``baselines/references.py``), which know
nothing of it.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

from powertrip_env.baselines.adaptive import TUNED_OPTIMISM, TUNED_TRACKING, Adaptive, Informed
from powertrip_env.baselines.base import MAX_EXHAUSTIVE_SITES, Policy
from powertrip_env.baselines.carbon import CarbonGreedy, DeadlineHorizon, FedZeroExcess
from powertrip_env.baselines.carbon_planner import CarbonPlanner, PerfectForecastPlanner
from powertrip_env.baselines.carbon_references import BestFixedCarbon, CarbonOptimiser
from powertrip_env.baselines.lookahead import TUNED, ForecastMPC, HorizonRule
from powertrip_env.baselines.policies import (
    AllSites,
    FastestK,
    FedZeroLike,
    MyopicOptimal,
    Nearest,
    OortLike,
    PowerTrip,
    PowerTripRTT,
    RandomK,
    TopPower,
)
from powertrip_env.baselines.references import BeamPlanner, BestFixedSet, Optimiser
from powertrip_env.view import DecisionView


def _myopic(n_sites: int, seed: int) -> Policy:
    if n_sites > MAX_EXHAUSTIVE_SITES:
        raise ValueError(
            f"MyopicOptimal supports N <= {MAX_EXHAUSTIVE_SITES} sites; this scenario has {n_sites}"
        )
    return MyopicOptimal()


POLICIES: dict[str, Callable[..., Policy]] = {
    "PowerTrip": lambda n_sites, seed: PowerTrip(),
    "PowerTripRTT": lambda n_sites, seed: PowerTripRTT(),
    "AllSites": lambda n_sites, seed: AllSites(),
    "RandomK": lambda n_sites, seed: RandomK(max(1, n_sites // 2), seed),
    "OortLike": lambda n_sites, seed: OortLike(seed),
    "FedZeroLike": lambda n_sites, seed: FedZeroLike(),
    "MyopicOptimal": _myopic,
    "HorizonRule": lambda n_sites, seed: HorizonRule(**TUNED["HorizonRule"]),
    "ForecastMPC": lambda n_sites, seed: ForecastMPC(
        int(TUNED["ForecastMPC"]["lookahead"]), TUNED["ForecastMPC"]["margin"]
    ),
    "AdaptiveHorizon": lambda n_sites, seed: Adaptive(_tuned("HorizonRule"), "AdaptiveHorizon"),
    "AdaptiveMPC": lambda n_sites, seed: Adaptive(_tuned("ForecastMPC"), "AdaptiveMPC"),
    "ExploringHorizon": lambda n_sites, seed: Adaptive(
        _tuned("HorizonRule"), "ExploringHorizon", optimism=TUNED_OPTIMISM
    ),
    "TrackingHorizon": lambda n_sites, seed: Adaptive(
        _tuned("HorizonRule"), "TrackingHorizon", tracking=TUNED_TRACKING
    ),
    "TrackingMPC": lambda n_sites, seed: Adaptive(
        _tuned("ForecastMPC"), "TrackingMPC", tracking=TUNED_TRACKING
    ),
    "Informed": lambda n_sites, seed: Informed(_tuned("HorizonRule"), "Informed"),
    "InformedMPC": lambda n_sites, seed: Informed(_tuned("ForecastMPC"), "InformedMPC"),
    "InformedDraw": lambda n_sites, seed: Informed(
        _tuned("HorizonRule"), "InformedDraw", monitor=False
    ),
    "CarbonGreedy": lambda n_sites, seed: CarbonGreedy(),
    "DeadlineHorizon": lambda n_sites, seed: DeadlineHorizon(),
    "FedZeroExcess": lambda n_sites, seed: FedZeroExcess(),
    "CarbonPlanner": lambda n_sites, seed: CarbonPlanner(),
    "BestFixedSet": lambda n_sites, seed: BestFixedSet(),
    "BeamPlanner": lambda n_sites, seed: _reference(BeamPlanner, n_sites, seed),
    "Optimiser": lambda n_sites, seed: _reference(Optimiser, n_sites, seed),
    "AdaptiveCarbonGreedy": lambda n_sites, seed: Adaptive(CarbonGreedy(), "AdaptiveCarbonGreedy"),
    "AdaptiveDeadlineHorizon": lambda n_sites, seed: Adaptive(
        DeadlineHorizon(), "AdaptiveDeadlineHorizon"
    ),
    "BestFixedCarbon": lambda n_sites, seed: BestFixedCarbon(),
    "PerfectForecastPlanner": lambda n_sites, seed: PerfectForecastPlanner(),
    "CarbonOptimiser": lambda n_sites, seed: _carbon_optimiser(n_sites, seed),
}
"""Fixed-name policies: ``factory(n_sites, seed) -> Policy``. ``RandomK`` takes N // 2 sites."""

PLANNERS: dict[str, Callable[[int, int, Sequence[str]], Policy]] = {
    "BeamPlanner": lambda n_sites, seed, starts: _reference(BeamPlanner, n_sites, seed, starts),
    "Optimiser": lambda n_sites, seed, starts: _reference(Optimiser, n_sites, seed, starts),
    "CarbonOptimiser": lambda n_sites, seed, starts: _carbon_optimiser(n_sites, seed, starts),
}
"""The references that plan from other policies' episodes: ``factory(n_sites, seed, starts)``,
``starts`` naming those policies (``make_policy``'s)."""

SIZED: dict[str, Callable[[int, int], Policy]] = {
    "TopPower": lambda k, seed: TopPower(k),
    "Nearest": lambda k, seed: Nearest(k),
    "FastestK": lambda k, seed: FastestK(k),
    "RandomK": lambda k, seed: _named(RandomK(k, seed), f"RandomK-{k}"),
}
"""Policies named ``<family>-<k>`` for 1 ≤ k ≤ N, e.g. ``TopPower-3``."""

_SIZED_NAME = re.compile(r"^(?P<family>[A-Za-z]+)-(?P<k>\d+)$")

REFERENCES = ("BestFixedSet", "BeamPlanner", "Optimiser")
"""The clairvoyant references (``baselines/references.py``): ``--policies references``."""

CARBON = ("CarbonGreedy", "DeadlineHorizon", "FedZeroExcess")
"""The carbon tasks' deployable baselines (``baselines/carbon.py``): they spend the deadline's
slack on cleaner sites and hours. They run only where the scenario has carbon intensity.
``CarbonPlanner`` (``baselines/carbon_planner.py``) is a named policy but not among them: on
the train days it emits half as much again as ``CarbonGreedy`` (150.0 against 99.6 kg), so the
board leaves it out until it does better (docs/carbon.md)."""

CARBON_REFERENCES = ("BestFixedCarbon", "PerfectForecastPlanner", "CarbonOptimiser")
"""The carbon tasks' clairvoyant references (``baselines/carbon_references.py``,
``PerfectForecastPlanner`` in ``baselines/carbon_planner.py``): the best fixed set in hindsight,
the carbon planner on the true rows, and the carbon optimiser (score 1)."""

ADAPTIVE_CARBON = ("AdaptiveCarbonGreedy", "AdaptiveDeadlineHorizon")
"""The carbon rules fed the adaptive rules' online estimates (``baselines/adaptive.py``): the
carbon baselines of a measured carbon task, where a pace judged on the stated values misses
deadlines."""

ADAPTIVE = ("AdaptiveHorizon", "AdaptiveMPC", "ExploringHorizon")
"""The measured track's deployable baselines (``baselines/adaptive.py``): the lookahead rules
fed online estimates of what the scenario does not state, one of them exploring."""

INFORMED = ("Informed", "InformedMPC")
"""The lookahead rules told each episode's drawn unknowns (``baselines/adaptive.py``): what
perfect identification reaches, never the future. References, not deployable."""


TRACKING = ("TrackingHorizon", "TrackingMPC")
"""The moving track's deployable baselines (``baselines/adaptive.py``): the adaptive rules with
change detection on the telemetry, forgetting, and re-probing of sites whose last
measurement is old (docs/moving.md)."""

MOVING_TOLD = ("InformedDraw", *INFORMED)
"""The references of the moving track's room chain: told the draw alone (``InformedDraw``),
and told the draw and every process's present state (``Informed``, ``InformedMPC``: perfect
monitors, never the future)."""


def _tuned(name: str) -> Policy:
    """A lookahead rule with its tuned parameters (``lookahead.TUNED``)."""
    return POLICIES[name](n_sites=0, seed=0)


def _reference(
    kind: type[BeamPlanner], n_sites: int, seed: int, starts: Sequence[str] | None = None
) -> BeamPlanner:
    """A planner started from the episodes of ``starts`` (a track's deployable baselines and
    the rules it tells the draw, built with the same seed as when they are evaluated), so that
    none of them beats it in any episode; ``Optimiser`` is what the benchmark scores against.

    Without ``starts`` (a scenario no track scores), it starts from every shipped rule the
    episode's scenario can run (``runnable_starts``)."""
    if starts is not None:
        return kind(starts=[make_policy(name, n_sites, seed) for name in starts])
    names = [*default_policy_names(n_sites, measured=True, carbon=True), *INFORMED]
    built = [(name, make_policy(name, n_sites, seed)) for name in names]
    return kind(starts=lambda view: runnable_starts(built, view))


def _carbon_optimiser(n_sites: int, seed: int, starts: Sequence[str] | None = None) -> BeamPlanner:
    """``CarbonOptimiser`` started from ``starts`` (``_reference``'s) and from
    ``PerfectForecastPlanner``'s episode too: the clairvoyant plan then costs at most the
    perfect-forecast planner's in every episode, so the carbon chain's last step (perfect
    forecast → clairvoyant plan) never goes up."""
    optimiser = _reference(CarbonOptimiser, n_sites, seed, starts)
    given = optimiser.extra_starts
    perfect = PerfectForecastPlanner()
    if callable(given):
        optimiser.extra_starts = lambda view: (
            [*given(view), perfect] if view.carbon_known else given(view)
        )
    else:
        optimiser.extra_starts = [*given, perfect]
    return optimiser


def runnable_starts(built: Sequence[tuple[str, Policy]], view: DecisionView) -> list[Policy]:
    """Of ``built`` (name, policy) pairs, the policies the episode's scenario can run, in
    order: those that need telemetry only where unknowns are drawn, those that read carbon only
    where it is known."""
    return [
        policy
        for name, policy in built
        if (view.measured_track or name not in NEEDS_TELEMETRY)
        and (view.carbon_known or name not in NEEDS_CARBON)
    ]


def _named(policy: Policy, name: str) -> Policy:
    policy.name = name
    return policy


def _fixed_names(n_sites: int) -> list[str]:
    """The names of ``POLICIES`` that run on ``n_sites`` sites (MyopicOptimal: N <= 16)."""
    exhaustive = n_sites <= MAX_EXHAUSTIVE_SITES
    return [name for name in POLICIES if name != "MyopicOptimal" or exhaustive]


def policy_names(n_sites: int) -> list[str]:
    """Every valid policy name for a scenario of ``n_sites`` sites."""
    names = _fixed_names(n_sites)
    for family in SIZED:
        names.extend(f"{family}-{k}" for k in range(1, n_sites + 1))
    return names


def _describe_valid(n_sites: int) -> str:
    fixed = _fixed_names(n_sites)
    sized = [f"{family}-k" for family in SIZED]
    return f"{', '.join(fixed)}, and {', '.join(sized)} with 1 <= k <= {n_sites}"


def make_policy(
    name: str, n_sites: int, seed: int = 0, *, starts: Sequence[str] | None = None
) -> Policy:
    """Build the policy called ``name`` for a scenario with ``n_sites`` sites.

    ``starts`` names the policies whose episodes a planning reference (``PLANNERS``) must not
    lose to: a track declares them (``powertrip_env.harness.tracks``); other policies ignore it.
    Raises ``ValueError`` naming every valid choice when ``name`` is unknown or its k is out of
    range.
    """
    if name in PLANNERS and starts is not None:
        return PLANNERS[name](n_sites, seed, starts)
    if name in POLICIES:
        return POLICIES[name](n_sites=n_sites, seed=seed)
    match = _SIZED_NAME.match(name)
    if match and match["family"] in SIZED:
        k = int(match["k"])
        if 1 <= k <= n_sites:
            return SIZED[match["family"]](k, seed)
        raise ValueError(
            f"policy {name!r}: k = {k} is out of range; this scenario has {n_sites} sites, so "
            f"1 <= k <= {n_sites}"
        )
    raise ValueError(f"unknown policy {name!r}; valid names: {_describe_valid(n_sites)}")


def common_rules(n_sites: int) -> list[str]:
    """The deployable baselines every scenario runs: PowerTrip, the simple rules, MyopicOptimal
    where it runs (N <= 16) and the lookahead rules. Every track's rules start with them."""
    names = ["PowerTrip", "AllSites", "RandomK"]
    names += [f"TopPower-{k}" for k in (1, 2, 4) if k <= n_sites]
    names += [f"Nearest-{k}" for k in (2, 4) if k <= n_sites]
    names += [f"FastestK-{k}" for k in (4,) if k <= n_sites]
    names += ["OortLike", "FedZeroLike"]
    if n_sites <= MAX_EXHAUSTIVE_SITES:
        names.append("MyopicOptimal")
    return [*names, *LOOKAHEAD]


def default_policy_names(n_sites: int, measured: bool = False, carbon: bool = False) -> list[str]:
    """Every deployable baseline a scenario can run: the common rules; where it draws unknowns
    (``measured``) the adaptive ones too (``ADAPTIVE``), and where it has carbon intensity
    (``carbon``) the carbon rules (``CARBON``). A track declares its own list
    (``powertrip_env.harness.tracks``); this is what a planner without one starts from.

    The clairvoyant references are not in it (they cost seconds per episode); name them, or ask
    for ``references`` (``powertrip_env.harness.reports.headroom`` runs them with the bound).
    """
    return [
        *common_rules(n_sites),
        *(ADAPTIVE if measured else ()),
        *(CARBON if carbon else ()),
        *(ADAPTIVE_CARBON if measured and carbon else ()),
    ]


LOOKAHEAD = ("HorizonRule", "ForecastMPC")
"""The strongest deployable baselines (``baselines/lookahead.py``): rules that charge a join
over the rounds a set is kept, tuned on train days."""

NEEDS_TELEMETRY = frozenset({*ADAPTIVE, *ADAPTIVE_CARBON, *INFORMED, *TRACKING, *MOVING_TOLD})
"""Rules that estimate or are told the drawn unknowns: the planners start from them only where
the scenario draws unknowns (``DecisionView.measured_track``); elsewhere they repeat their inner
rule or chase the jitter."""
NEEDS_CARBON = frozenset({*CARBON, *ADAPTIVE_CARBON, "CarbonPlanner", "PerfectForecastPlanner"})
"""Rules that read grid carbon: they run only where the scenario has carbon intensity."""
