"""Tools that make and convert the data in ``traces/`` (run as ``python -m traces.tools.<name>``).

They live beside the data, not inside the installed package: the wheel carries the data files of
``traces/`` only.
"""
