"""Stable-Baselines3 pieces: the site encoder and policy, the candidate-set agent, callbacks,
hyperparameter files, imitation of a clairvoyant teacher, and the training run behind
``train_agent.py`` (``powertrip_env.agents.training``).

Above the harness in the layers (``tests/test_imports.py``): it uses ``harness``, ``baselines``
and ``powertrip_env``, and nothing in the package imports it. ``powertrip_env.agents.site_policy``
registers its policy classes with ``powertrip_env.harness.models.registry``, so that the
harness, which never imports this package, loads the agents saved with them. The shipped
pretrained agent lives in ``pretrained/``; the command that makes it is a maintainers' one
(``maintainers/pretrain.py``).
"""
