"""Hand-coded policies (PowerTrip and others), the clairvoyant references and the harness.

The second of the project's layers (``tests/test_imports.py``): ``powertrip_env`` ←
``baselines`` ← ``agents`` ← ``train_agent.py``. This package imports the environment and never
``agents``: a saved agent whose policy class lives there is loaded through the registry of
``powertrip_env.harness.models.registry``, which ``agents`` fills. Inside, ``base`` (the ``Policy``
interface and its helpers) ← ``policies`` ← ``references`` ← ``registry`` (every policy by name) ←
the tools (``models``, ``evaluate``, ``headroom``, ...).
"""
