"""Bridges to training libraries, outside the environment's core.

``rllib`` is the Ray RLlib entry point (an env creator, scenarios by value and a per-site
RLModule; needs the ``rllib`` extra) and ``torch_sites`` holds the torch pieces the SB3 site
policy (``agents/``) and RLlib's module share. Each imports its library when it is imported;
importing this package, like ``import powertrip_env``, imports neither.
"""
