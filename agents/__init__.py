"""Stable-Baselines3 pieces: the site encoder and policy, callbacks, hyperparameter files, and the
training run behind ``train_agent.py`` (``powertrip_env.agents.training``).

The third of the project's layers (``tests/test_imports.py``): it uses ``baselines`` and
``powertrip_env``, and nothing imports the root script. ``powertrip_env.agents.site_policy``
registers its policy classes with ``powertrip_env.harness.models.registry``, so that the evaluation
harness, which never imports this package, loads the agents saved with them.
"""
