"""The harness: what plays policies on the environment and turns the episodes into results.

``baselines/`` holds the policies and the references; this package holds what runs them, and
stands above them (it imports the policies, never the reverse, as Grid2Op's ``Runner`` stands
above its agents). Each part holds one concern:

* ``evaluation``: play policies and saved agents on paired episodes (``powertrip evaluate``),
  the tables, the day bootstrap, the figures and the timeline of one episode;
* ``models``: saved agents (SB3 zips, RLlib checkpoints) loaded without unpickling and played
  as policies;
* ``reports``: the benchmark over the suite, its leaderboard and scores, and the headroom of a
  scenario;
* ``calibration``: the model against published runs (fidelity), its sensitivity, the surrogate
  fitted to and validated against real training, and the lookahead rules' tuning;
* ``datasets``: Minari datasets of the references and the strongest rules;
* ``arguments``: the options every tool shares (``--env``, ``--episodes``, ``--seed``,
  ``--out``, ``--force``, ``--no-progress``) and the checks that go with them.

Installed as ``powertrip_env.harness``; ``python -m powertrip_env.harness`` is ``powertrip
evaluate``.
"""
