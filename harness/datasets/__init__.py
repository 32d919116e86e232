"""Minari datasets of the references and the rules: ``build`` records and loads them
(``powertrip datasets``), ``recording`` plays one into Minari's buffers, ``store`` is what both
need of Minari."""
