"""``train_agent.py``'s command line: the parser that ``powertrip_env.agents.training`` reads.

The options are added in groups, one small function each, in the order ``--help`` lists them;
``given_options`` tells which ones a command line gave, which ``--resume`` needs. The options
every tool shares (``--env``, ``--seed``, ``--out``, ``--force``, ``--no-progress``) come from
``powertrip_env.harness.arguments``, with its checks and its rule for the IDs ``--env`` takes.
Otherwise only shapes are checked here (``powertrip_env.agents.checks``' argument types); what
the values mean is checked by ``training.setup``, once every option is known.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence

from powertrip_env.agents import checks, hyperparams
from powertrip_env.harness.arguments import (
    add_env,
    add_force,
    add_no_progress,
    add_out,
    add_seed,
)
from powertrip_env.harness.tracks import CARBON, KNOWN, MEASURED, MOVING
from powertrip_env.rewards import SHAPINGS

# The candidate-set agent on PowerTrip-v0, whose last slot is the tuned horizon rule: over a
# 300k-step run its best model on the periodic test-split evaluation came at the first one, 50k
# steps, and it tied the rule on 30 test episodes (26.55 h against 26.51). 100k steps leave
# time for a second evaluation; on the native candidate vector env they take about 35 s.
DEFAULT_TIMESTEPS = 100_000
# One PowerTrip step costs less than the policy's forward pass, so many envs in one process
# (one batched forward for all) beat worker processes: 60k PPO steps took 17 s with 16 envs
# in-process, 29 s with 4, 44 s with 2 or 4 forkserver workers.
DEFAULT_N_ENVS = 16
# The final table by default: the final environment's track's (``Track.final_policies``). On
# the known track the paper's heuristic, the best one-round rule, the strongest deployable
# baselines (the lookahead rules), and the two clairvoyant references that say how much of the
# sequential headroom the agent took: the best fixed set and the optimiser (the benchmark's 1).
DEFAULT_FINAL_POLICIES = KNOWN.final_policies
# On the measured track: the paper's heuristic, the strongest rule on the stated values, the
# adaptive rules (the strongest deployable baselines there), Informed (told the draw: the
# learnable room's end) and the optimiser.
DEFAULT_MEASURED_FINAL_POLICIES = MEASURED.final_policies
# On the moving track: those, the tracking rules (which detect changes and re-probe) and
# Informed told the draw alone and as a perfect monitor.
DEFAULT_MOVING_FINAL_POLICIES = MOVING.final_policies
# What the main job trains on: the flagship's moving task, where a policy must measure its
# sites and job and keep measuring as they change. Of the flagship's tasks it leaves a learning
# agent the most room (the benchmark's learnable room: 1.0097 against the measured task's
# 1.0030; docs/agents.md); the 24-site moving task leaves more (1.025), but its final table
# alone takes longer than the main job may. ``--env PowerTrip-v0`` is the known flagship.
DEFAULT_ENV = "PowerTrip-Moving-v0"


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # one line, no usage block; exit 2 as argparse does
        self.exit(2, f"{self.prog}: error: {message} (see --help)\n")


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """The command line; see ``--help``. Only shapes are checked here, meanings in ``setup``."""
    return build_parser().parse_args(argv)


def given_options(argv: Sequence[str]) -> set[str]:
    """The options (argparse ``dest`` names) that ``argv`` gives, whatever their values.

    ``--resume`` takes every setting from the run's ``config.yaml`` except those given, so it
    must tell ``--seed 0`` typed by the user from the default 0: the same parser with every
    default suppressed leaves only the given options in the namespace.
    """
    parser = build_parser()
    for action in parser._actions:
        action.default = argparse.SUPPRESS
    return set(vars(parser.parse_args(argv)))


def build_parser() -> argparse.ArgumentParser:
    """``train_agent.py``'s argument parser (``parse_args`` and ``given_options`` share it)."""
    p = _Parser(
        prog="train_agent.py",
        description="Train an SB3 agent on a PowerTrip environment, then compare it with the "
        "baselines on the test split.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    _add_environment_options(p)
    _add_training_options(p)
    _add_run_folder_options(p)
    _add_evaluation_options(p)
    _add_runtime_options(p)
    return p


def _add_environment_options(p: argparse.ArgumentParser) -> None:
    """The environment trained on and the one of the final table: IDs, scenarios, padding."""
    add_env(p, DEFAULT_ENV, scenario_hint=True, what="the environment trained on")
    p.add_argument(
        "--scenario",
        action="append",
        default=None,
        help="scenario name or TOML file for the env; repeat it to train on several (the "
        "training envs take them in turn, padded to --max-sites)",
    )
    p.add_argument(
        "--max-sites",
        type=checks.positive_int,
        default=None,
        help="pad observations and actions to this many sites, so that the agent can act on "
        "any scenario with at most that many (default: none; with several --scenario, their "
        "largest site count; PowerTrip-Random-v0 registers 32)",
    )
    add_env(
        p,
        None,
        flag="--final-env",
        what="the final comparison's environment",
        default_text="--env; for PowerTrip-Random-v0, PowerTrip-v0, whose job it draws sites for",
    )


def _add_training_options(p: argparse.ArgumentParser) -> None:
    """What is trained and how: algorithm, steps, envs, seed, reward, policy, hyperparameters."""
    p.add_argument("--algo", default="ppo", choices=sorted(hyperparams.ALGOS))
    p.add_argument(
        "--timesteps",
        type=checks.positive_int,
        default=DEFAULT_TIMESTEPS,
        help="environment steps of the whole run (with --resume: default the run's own; a "
        "larger total extends it)",
    )
    p.add_argument(
        "--n-envs",
        type=checks.positive_int,
        default=DEFAULT_N_ENVS,
        help="parallel training environments",
    )
    p.add_argument(
        "--vec-env",
        choices=("dummy", "subproc"),
        default="dummy",
        help="run the envs in this process (dummy) or in worker processes "
        "(subproc, forkserver); one PowerTrip step is cheaper than the IPC",
    )
    add_seed(p, "seeds the training envs, the network's initialisation and its sampling")
    p.add_argument(
        "--reward-mode",
        default=None,
        help="the reward the agent trains on: excess_gain, gain_rate or carbon (default: the "
        "task's own objective, as its ID is registered: carbon on the carbon track, excess_gain "
        "elsewhere)",
    )
    p.add_argument(
        "--shaping",
        choices=SHAPINGS,
        default=None,
        help="add the env's potential-based shaping term to the training reward (progress: "
        "ahead of the deadline's pace earns, an idle round pays; over an episode the terms sum "
        "to zero, so the objective and its best policies are unchanged: docs/carbon.md); the "
        "final table scores the objective alone (default: none)",
    )
    p.add_argument(
        "--extractor",
        choices=hyperparams.EXTRACTORS,
        default="candidates",
        help="candidates: choose one of a few candidate site sets built each round from "
        "predict_round, MlpPolicy on their features (agents/candidates.py; on a carbon reward "
        "the carbon slots, agents/carbon_slots.py: idle, CarbonGreedy's pick, the cleanest "
        "prefixes, priced on the forecast); sites: per-site "
        "actions, dict observation, site encoder and shared per-site action head "
        "(agents/site_policy.py); mlp: per-site actions, flat observation and SB3's MlpPolicy",
    )
    p.add_argument(
        "--config", default=None, help="hyperparameter YAML (default: agents/configs/<algo>.yaml)"
    )
    p.add_argument(
        "--hp",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override a hyperparameter of the config (repeatable), e.g. "
        "--hp gamma=0.999 --hp policy_kwargs.net_arch=[64,64]",
    )


def _add_run_folder_options(p: argparse.ArgumentParser) -> None:
    """Where the run is written, and what becomes of a used folder (``--force``, ``--resume``)."""
    add_out(
        p,
        None,
        what="run directory, new or empty",
        default_text="runs/<env>-<algo>-<seed>; with --resume, the run's own",
    )
    add_force(p, "use a non-empty --out: delete its files (once every argument is checked)")
    p.add_argument(
        "--resume",
        default=None,
        metavar="PATH",
        help="continue the run a saved model .zip belongs to (interrupted.zip, a checkpoint, "
        "final_model.zip) with the settings in its config.yaml, up to its --timesteps",
    )


def _add_evaluation_options(p: argparse.ArgumentParser) -> None:
    """The periodic test-split evaluation, the checkpoints and the final comparison."""
    p.add_argument(
        "--eval-freq",
        type=checks.non_negative_int,
        default=50_000,
        help="evaluate on the test split every this many steps (0: never)",
    )
    p.add_argument("--eval-episodes", type=checks.positive_int, default=10)
    p.add_argument(
        "--checkpoint-freq",
        type=checks.non_negative_int,
        default=100_000,
        help="save a checkpoint every this many steps (0: never)",
    )
    p.add_argument(
        "--final-episodes",
        type=checks.non_negative_int,
        default=30,
        help="test episodes of the final comparison (0: skip it)",
    )
    p.add_argument(
        "--final-policies",
        default=None,
        help="baselines in the final table: a comma-separated list of names, 'all' (the "
        "deployable baselines of the final environment's track) and 'references' (its "
        "clairvoyant references) (default: the track's own: "
        f"{DEFAULT_FINAL_POLICIES} on the known track, "
        f"{DEFAULT_MEASURED_FINAL_POLICIES} on the measured track, "
        f"{DEFAULT_MOVING_FINAL_POLICIES} on the moving track, "
        f"{CARBON.final_policies} on the carbon track)%(default).0s",
    )
    p.add_argument(
        "--eval-seed",
        type=int,
        default=0,
        help="seed of the test episodes in the final table (the same for every run)",
    )


def _add_runtime_options(p: argparse.ArgumentParser) -> None:
    """How the run uses the machine; none of them changes what is trained."""
    p.add_argument(
        "--torch-threads",
        type=checks.positive_int,
        default=1,
        help="torch CPU threads; small networks gain nothing from more",
    )
    add_no_progress(p)
