"""The maintainers' folder: the writers of the repository's own files, outside the wheel.

What is here writes the checkout, never an installed package: the documentation site's
generated pages and their check (``docs_site``, ``docs_envs``, ``docs_links``, ``doc_blocks``),
the tables of results in README.md and ``docs/`` (``readme_tables``), and the shipped pretrained
agent with its zero-shot table (``pretrain``). They read a checkout's README and pages and write
``agents/pretrained/``, so in a wheel they could only fail or write into site-packages: like
Gymnasium's ``docs/_scripts/`` and the tables SB3 keeps in rl-baselines3-zoo, they stay out of
what users install (setup.py packages ``powertrip_env/``, ``baselines/``, ``harness/`` and
``agents/`` only).

They still run as ``powertrip docs``, ``powertrip readme-tables`` and ``powertrip pretrain``:
``powertrip_env.cli`` finds this folder beside the ``powertrip_env`` it was imported from (an
editable install of a checkout), and outside a checkout refuses in one line. They stand on the
top floor: they may import anything of the package, and nothing in it imports them.
"""
