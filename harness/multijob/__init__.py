"""The multi-job track's board: its joint policies played on paired episodes, and its facts."""
