"""Saved agents as policies: ``loading`` is the entry (``load_agent``), ``registry`` the classes
that ``agents/`` registers, ``sb3_zip`` and ``spaces`` read an SB3 zip without unpickling it, and
``policies`` plays a loaded model behind the ``Policy`` interface."""
