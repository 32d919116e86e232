"""The policies and the references they are measured against, and nothing else.

Hand-coded deployable policies (PowerTrip and the other baselines, the lookahead rules), the
clairvoyant references named for what they know (BestFixedSet, BeamPlanner, Optimiser) and the
lower bound on TTA. What plays them and reports on them is the harness (``harness/``, installed
as ``powertrip_env.harness``), which stands above this package: Grid2Op keeps its agents apart
from its ``Runner`` the same way.

The layers (``tests/test_imports.py``): ``powertrip_env`` ← ``baselines`` ← ``harness`` ←
``agents`` ← the command lines. Inside, ``base`` (the ``Policy`` interface and its helpers) and
``candidates`` (the forecast's ranked site sets) ← ``policies`` and ``lookahead`` ←
``references`` ← ``registry`` (every policy by name); ``lower_bound`` stands apart, on the
kernel's formulas.
"""
