"""Run site-selection policies in a Flower federation: PowerTrip's own framework.

    pip install -e ".[flower]"
    python examples/flower_powertrip.py                        # 4 policies, 5 paired episodes
    python examples/flower_powertrip.py --episodes 10 --compare-torch

A Flower simulation of eight virtual clients, one per site of ``PowerTrip-Digits-v1``, each
holding its non-IID shard of scikit-learn's digits and training a real PyTorch MLP. The
ServerApp plays every policy over the same test episodes with ``PowerTripStrategy``: the
scenario's power traces and clock decide who can train and how long each round takes, the policy
chooses the sites, Flower trains them and aggregates with FedAvg, and the accuracy evaluated after
each round is recorded on the simulated clock. It prints the table ``powertrip evaluate`` prints.

``--compare-torch`` then plays the same policies and episodes with the in-process learner
(``learner="torch"``), which trains the same shards from the same initial models, and prints both
mean TTAs per policy and the Kendall τ between the two rankings, over all pairs and over the pairs
the in-process runs separate (95% intervals apart). ``--model PATH --algo ALGO`` adds a saved
agent (default: the shipped pretrained one). Bad arguments exit with code 2 before Flower starts.
"""

from __future__ import annotations

import argparse
import logging
import sys
import time
from collections.abc import Sequence
from typing import Any

import pandas as pd

ENV_ID = "PowerTrip-Digits-v1"
DEFAULT_POLICIES = "PowerTrip,AllSites,MyopicOptimal"


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="flower_powertrip.py",
        description=__doc__.split("\n\n")[0],
    )
    parser.add_argument(
        "--policies",
        default=DEFAULT_POLICIES,
        help=f"comma-separated baselines policies (default {DEFAULT_POLICIES})",
    )
    parser.add_argument(
        "--model",
        default="pretrained",
        help="a saved agent to add ('pretrained', a .zip, or 'none')",
    )
    parser.add_argument(
        "--algo", default="ppo", help="the saved agent's algorithm (ppo, a2c, maskable_ppo)"
    )
    parser.add_argument("--episodes", type=int, default=5, help="paired test episodes (5)")
    parser.add_argument("--seed", type=int, default=0, help="episode e resets with seed + e (0)")
    parser.add_argument(
        "--compare-torch",
        action="store_true",
        help="also play the episodes with learner='torch' and compare",
    )
    args = parser.parse_args(argv)
    if args.episodes < 1:
        parser.error(f"--episodes {args.episodes}: must be at least 1")
    return args


def policies_of(args: argparse.Namespace) -> list[Any]:
    """The policy names and the saved agent, each checked before Flower starts."""
    import gymnasium as gym

    from powertrip_env.baselines.registry import make_policy
    from powertrip_env.harness.models.loading import load_agent, model_label

    names = [name.strip() for name in args.policies.split(",") if name.strip()]
    n_sites = gym.make(ENV_ID).unwrapped.n_sites
    for name in names:
        make_policy(name, n_sites)  # a ValueError names the valid ones
    chosen: list[Any] = list(names)
    if args.model != "none":
        load_agent(args.model, args.algo, model_label(args.model), ENV_ID)
        chosen.append((args.model, args.algo))
    return chosen


def run_flower(policies: list[Any], episodes: int, seed: int) -> tuple[Any, float]:
    """One simulation: a ServerApp whose main plays every policy; returns the Evaluation."""
    from flwr.serverapp import ServerApp
    from flwr.simulation import run_simulation

    from powertrip_env.integrations.flower import evaluate_federated
    from powertrip_env.integrations.flower_task import ScenarioTask, client_app

    task = ScenarioTask(ENV_ID)
    server = ServerApp()
    found: dict[str, Any] = {}

    @server.main()
    def main(grid: Any, context: Any) -> None:
        def progress(label: str, episode: int, row: dict[str, Any]) -> None:
            print(
                f"  {label}, episode {episode}: TTA {row['tta_h']:.4f} h in {row['rounds']} rounds",
                file=sys.stderr,
                flush=True,
            )

        found["evaluation"] = evaluate_federated(
            grid,
            policies,
            ENV_ID,
            episodes=episodes,
            seed=seed,
            initial_model=task.initial_arrays,
            evaluate_fn=task.evaluate_fn,
            progress=progress,
        )

    start = time.perf_counter()
    run_simulation(
        server,
        client_app(ENV_ID),
        num_supernodes=len(task.site_names),
        backend_config={"client_resources": {"num_cpus": 1}},
    )
    return found["evaluation"], time.perf_counter() - start


def compare(flower: Any, torch_run: Any) -> str:
    """Both learners' mean TTAs per policy, and Kendall τ between their rankings."""
    from powertrip_env.harness.calibration.validate import summarise

    columns = ["policy", "episode", "seed", "start_time", "tta_h", "success", "rounds"]
    frames = []
    for learner, result in (("real", torch_run), ("surrogate", flower)):
        frame = result.episodes[columns].copy()
        frame.insert(0, "learner", learner)  # validate's names: torch is the reference here
        frames.append(frame)
    summary = summarise(pd.concat(frames, ignore_index=True), env_id=ENV_ID)
    lines = [
        f"# Flower against learner='torch': {summary['episodes']} paired episodes",
        "",
        "| policy | torch TTA (h) | torch 95% CI (h) | Flower TTA (h) | difference |",
        "|---|---:|---:|---:|---:|",
    ]
    for name, row in summary["policies"].items():
        ci = row["real_ci95_h"]
        ci_text = f"[{ci[0]:.4f}, {ci[1]:.4f}]" if ci else "–"
        lines.append(
            f"| {name} | {row['real_tta_h']:.4f} | {ci_text} | {row['surrogate_tta_h']:.4f} | "
            f"{row['relative_error']:+.1%} |"
        )
    separated = summary["kendall_tau_separated"]
    pairs = ", ".join(f"{a} < {b}" for a, b in summary["separated_pairs"]) or "none"
    lines += [
        "",
        f"- Kendall τ over all {summary['pairs']} pairs: {summary['kendall_tau']:.3f}",
        f"- over the {len(summary['separated_pairs'])} pairs torch separates ({pairs}): "
        + ("undefined" if separated is None else f"{separated:.3f}"),
        f"- median |difference| of the mean TTAs: {summary['median_abs_tta_error']:.1%}",
    ]
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        import powertrip_env.integrations.flower_nodes  # noqa: F401  (the version check)

        policies = policies_of(args)
    except (ImportError, ValueError) as exc:
        print(f"flower_powertrip.py: {exc}", file=sys.stderr)
        return 2
    logging.getLogger("flwr").setLevel(logging.WARNING)  # Flower logs every message at INFO
    evaluation, seconds = run_flower(policies, args.episodes, args.seed)
    print(evaluation.to_markdown())
    print(f"Flower simulation: {seconds:.0f} s for {len(evaluation.episodes)} episodes")
    if args.compare_torch:
        from powertrip_env.harness.evaluation.evaluate import evaluate

        names = [p for p in policies if isinstance(p, str)]
        models = [p for p in policies if isinstance(p, tuple)]
        start = time.perf_counter()
        torch_run = evaluate(
            ENV_ID,
            names,
            episodes=args.episodes,
            seed=args.seed,
            models=models,
            env_kwargs={"learner": "torch"},
            progress=False,
        )
        print(f"learner='torch': {time.perf_counter() - start:.0f} s\n")
        print(compare(evaluation, torch_run))
    return 0


if __name__ == "__main__":
    sys.exit(main())
