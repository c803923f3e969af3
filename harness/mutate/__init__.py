"""Kernel mutation testing: would the tests that launch a ``@triton.jit`` kernel fail if it were wrong?

:mod:`harness.mutate.mutations` makes the mutants (source edits of one function, each with its diff);
:mod:`harness.mutate.runner` records which test launched which kernel and runs each mutant in a child pytest;
:mod:`harness.mutate.hook` loads a mutant there under the module's own name; :mod:`harness.mutate.plugin` is the
child's pytest glue; :mod:`harness.mutate.cli` is ``python -m harness mutate``. See docs/mutation.md.
"""
