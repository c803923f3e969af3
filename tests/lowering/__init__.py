"""A package (with ``tests/__init__.py``) so pytest imports its test modules as ``tests.lowering.*`` instead of
putting this directory on ``sys.path``, where ``kernels.py`` would shadow the repository's ``kernels`` package."""
