"""Compile coverage on a CPU box: the compile matrix (every kernel compiled for sm75…sm120 with the installed
Triton), launch capture (every interpreted launch compiled for those targets, its dtype variants and the
branches its launcher can choose), and the GPU lane's warm-start manifest.

The logic, one concern a module, imports without pytest: :mod:`.targets` (which targets, what each lacks),
:mod:`.signature` and :mod:`.launches` (a launch as a compile request), :mod:`.cache` and :mod:`.disk_cache`
(compiles and their outcomes, in memory and on disk), :mod:`.matrix` and :mod:`.findings` (what a compile
result means), :mod:`.personality` (a launcher replayed as another GPU), :mod:`.autotune` (autotuned kernels on
the interpreter), :mod:`.lowering` (what the PTX says a kernel runs on), :mod:`.warm` (the warm-start
manifest), :mod:`.message` (every failure text), :mod:`.cli` (``python -m harness compile``). The pytest glue
is :mod:`.plugin`.
"""
