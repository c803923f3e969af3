#!/usr/bin/env python
"""Write docs/api.md, the public API page, from the public modules' names and their docstrings (and, for data, their
``#:`` comments): ``python scripts/gen_api_doc.py > docs/api.md``. tests/test_api_doc.py checks the page is what this
prints, so it cannot drift from the code."""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import re
import sys

MODULES = ["harness", "harness.fp8", "harness.mx", "harness.tensor_cores", "harness.names", "harness.interp.patch",
        "harness.interp.approx_math", "harness.compile.launches", "harness.replay", "harness.sanitize"]
PICKS = {"harness.interp.approx_math": ["div_full", "rcp_approx", "sqrt_approx", "rsqrt_approx", "ex2_approx",
                                        "exp_approx", "log2_libdevice", "log_libdevice"],
         "harness.compile.launches": ["expect_compile_failure", "skip_compile", "capture"],
         "harness.sanitize": ["SanitizerError", "SanitizerWarning"]}

def sources(mod: object) -> list[str]:
    out = [inspect.getsource(mod)]
    if hasattr(mod, "__path__"):
        for m in pkgutil.walk_packages(mod.__path__, mod.__name__ + "."):
            out.append(inspect.getsource(importlib.import_module(m.name)))
    return out

def data_doc(mod: object, n: str) -> str | None:
    for src in sources(mod):
        m = re.search(r"((?:^#:.*\n)+)^" + re.escape(n) + r"\b", src, re.M)
        if m:
            return " ".join(l[2:].strip() for l in m.group(1).splitlines())
    return None

def main() -> None:
    print("""# Public API

What a user imports. Each name's line is the first paragraph of its docstring (or, for data, of its `#:`
comment); the full text is in the source. `tests/test_api_doc.py` checks this page is what
`scripts/gen_api_doc.py` prints and that each name has its documentation. Everything else in `harness` is
internal: importable, but free to change.""")
    for m in MODULES:
        mod = importlib.import_module(m)
        names = PICKS.get(m, [n for n in mod.__all__ if not n.startswith("__")])
        print(f"\n## `{m}`\n")
        first = (inspect.getdoc(mod) or "").split("\n\n")[0].replace("\n", " ")
        print(first + "\n")
        print("| name | what it is |\n| --- | --- |")
        for n in names:
            obj = getattr(mod, n)
            if inspect.isfunction(obj) or inspect.isclass(obj):
                d = (inspect.getdoc(obj) or "").split("\n\n")[0].replace("\n", " ")
            else:
                d = data_doc(mod, n)
            if not d:
                print(f"UNDOCUMENTED {m}.{n}", file=sys.stderr)
                d = ""
            print(f"| `{n}` | {d.replace('|', chr(92) + '|')} |")


if __name__ == "__main__":
    main()
