"""Goldens: outputs captured on a GPU, checked bit for bit (or within a tolerance row) on every lane, with one
regeneration workflow.

The logic imports without pytest: :mod:`.decide` (the pure table of what a check does: mode x file state x arch,
CI rules), :mod:`.files` (golden names and paths, safe reads and writes, the ``.npz`` format), :mod:`.fixture`
(the ``Golden`` object that carries out one check), :mod:`.message` (every failure text of a check),
:mod:`.unused` (the unused-golden rule, for one run and for the union of shards' records) and :mod:`.cli`
(``python -m harness golden regen``, ``golden unused`` and ``golden repack``). The pytest glue is
:mod:`.plugin`.
"""
