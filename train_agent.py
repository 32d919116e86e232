"""Train a Stable-Baselines3 agent on a PowerTrip environment and compare it with the baselines.

    python train_agent.py                  # PPO over candidate sets on PowerTrip-Moving-v0
    python train_agent.py --env PowerTrip-v0       # the known-track flagship
    python train_agent.py --env PowerTrip-Measured-v0      # the measured-track flagship
    python train_agent.py --extractor sites --timesteps 700_000   # per-site actions, SitePolicy
    python train_agent.py --algo a2c --extractor mlp --timesteps 500_000
    python train_agent.py --resume runs/PowerTrip-Moving-v0-ppo-0/interrupted.zip   # finish it
    python train_agent.py --resume runs/PowerTrip-v0-ppo-0/final_model.zip --timesteps 1_000_000
    python train_agent.py --env PowerTrip-Random-v0        # one agent for any site catalogue
    python train_agent.py --scenario a.toml --scenario b.toml --max-sites 16
    tensorboard --logdir runs

The run directory (``--out``, default ``runs/<env>-<algo>-<seed>``) receives:

    tb/            TensorBoard: SB3's scalars, powertrip/* (agents/callbacks.py), eval/*
    checkpoints/   model_<steps>_steps.zip every --checkpoint-freq steps
    best_model.zip the best model on the periodic test-split evaluation (+ best_model.json)
    final_model.zip, or interrupted.zip after Ctrl-C
    config.yaml    the command line and the hyperparameters that were used, then one entry per
                   --resume (never rewritten: a resume appends to it)
    summary.md, episodes.csv, ...   the final comparison, written by powertrip evaluate and
                   moved in as a set

A used ``--out`` is refused unless ``--force`` (which empties it once every argument is
checked) or ``--resume`` continues the run in it. ``--resume`` takes the run's settings from its
``config.yaml`` and trains up to the run's ``--timesteps``; given options that would change the
run are refused (``powertrip_env.agents.checks.FIXED_ON_RESUME``), the others (``--timesteps`` to
extend it, ``--final-episodes``, ...) apply from then on.

The run itself is ``powertrip_env.agents.training`` (which ``maintainers.pretrain`` trains
with too): read it top to bottom for the arguments, the environment thunk, the training and the
final table. Every file is written atomically; every bad argument is a one-line error and exit code
2.
"""

from __future__ import annotations

import sys

from powertrip_env.agents.training import main

if __name__ == "__main__":
    sys.exit(main())
