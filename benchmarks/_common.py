"""Benchmark plumbing shared by ``benchmarks/bench_*.py``: timing, the device's own limits, a table and JSON.

Why one module: every row must be measured the same way (``triton.testing.do_bench``, inputs larger than L2,
the measured copy bandwidth beside it) or rows of two scripts cannot be compared. Importing it also puts the
repo root on ``sys.path``, so ``python benchmarks/bench_x.py`` works on a GPU box without an install.
"""

from __future__ import annotations

import argparse
import datetime
import json
import subprocess
import sys
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import torch  # noqa: E402
import triton  # noqa: E402
import triton.testing  # noqa: E402


def parse_args(
    description: str,
    argv: Sequence[str] | None = None,
    *,
    extra: Callable[[argparse.ArgumentParser], None] | None = None,
) -> argparse.Namespace:
    """The options every benchmark takes: ``--json PATH`` (write the rows there too); ``extra`` adds a
    script's own options (e.g. ``--sweep``)."""
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--json", metavar="PATH", type=Path, default=None, help="also write the rows as JSON here")
    if extra is not None:
        extra(p)
    return p.parse_args(argv)


def require_cuda(script: str) -> None:
    if not torch.cuda.is_available():
        raise SystemExit(f"{script} needs a CUDA GPU (torch.cuda.is_available() is False)")


def device_info() -> dict[str, Any]:
    """What a row's numbers depend on: the GPU, its L2, the software versions and the date."""
    props = torch.cuda.get_device_properties(torch.cuda.current_device())
    return {
        "gpu": props.name,
        "capability": f"sm{props.major}{props.minor}",
        "l2_bytes": int(getattr(props, "L2_cache_size", 0)),
        "torch": torch.__version__,
        "triton": triton.__version__,
        "python": sys.version.split()[0],
        "date": datetime.date.today().isoformat(),
    }


def time_ms(fn: Callable[[], Any]) -> float:
    """Median milliseconds of ``fn`` by do_bench (which flushes L2 between runs)."""
    return float(triton.testing.do_bench(fn, warmup=25, rep=100, return_mode="median"))


def graph_ms(fn: Callable[[], Any]) -> float:
    """Median milliseconds of ``fn`` captured in a CUDA graph and replayed: the GPU time alone, without the
    Python launch overhead (``fn`` must be capturable; it is run once first to compile)."""
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        fn()
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        fn()
    return time_ms(graph.replay)


def copy_bandwidth_gbs(nbytes: int = 1 << 30) -> float:
    """Measured device-to-device copy bandwidth (bytes read + written per second): the roof for memory-bound rows."""
    src = torch.empty(nbytes, dtype=torch.uint8, device="cuda")
    dst = torch.empty_like(src)
    ms = time_ms(lambda: dst.copy_(src))
    return 2 * nbytes / ms / 1e6


def check_larger_than_l2(nbytes: int, label: str) -> None:
    """A row whose inputs fit in L2 measures the cache, not HBM: refuse it."""
    l2 = device_info()["l2_bytes"]
    if l2 and nbytes <= l2:
        raise ValueError(f"benchmark {label!r}: inputs of {nbytes} bytes fit in L2 ({l2} bytes); use a larger shape")


def emit(title: str, columns: Sequence[tuple[str, str]], rows: Sequence[dict[str, Any]], json_path: Path | None,
         extra: dict[str, Any] | None = None) -> None:
    """Print ``rows`` as a table (``columns`` = (key, format spec) pairs) and write them as JSON if asked."""
    info = device_info()
    print(f"{title}: {info['gpu']} ({info['capability']}), torch {info['torch']}, triton {info['triton']}, "
          f"{info['date']}")
    cells = [[format(r[k], spec) if isinstance(r[k], (int, float)) else str(r[k]) for k, spec in columns]
             for r in rows]
    widths = [max(len(k), *(len(c[i]) for c in cells)) if cells else len(k) for i, (k, _) in enumerate(columns)]
    head = "  ".join(k.rjust(w) for (k, _), w in zip(columns, widths, strict=True))
    print(head)
    print("-" * len(head))
    for c in cells:
        print("  ".join(v.rjust(w) for v, w in zip(c, widths, strict=True)))
    if json_path is not None:
        json_path.parent.mkdir(parents=True, exist_ok=True)
        json_path.write_text(json.dumps({"title": title, "device": info, **(extra or {}), "rows": list(rows)},
                                        indent=2) + "\n")


def host_us(fn: Callable[[], Any], calls: int = 50, *, sync: bool = True) -> float:
    """Median microseconds of Python time per call of ``fn``, each started with the GPU idle (synchronized
    before it): what the host side of a call costs, apart from the GPU's time (issue 25's "host us" column).
    ``sync=False``: back to back, the GPU busy (``host_breakdown.py``'s "queued")."""
    import statistics
    import time

    fn()
    times = []
    for _ in range(calls):
        if sync:
            torch.cuda.synchronize()
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    torch.cuda.synchronize()
    return 1e6 * statistics.median(times)


def cuobjdump(cubin: bytes, *flags: str) -> str:
    """What the ``cuobjdump`` bundled with Triton prints for ``cubin`` with ``flags`` (``-sass``, ``-res-usage``):
    SASS read from an ahead-of-time compile on a box with no CUDA toolkit."""
    tool = Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / "cuobjdump"
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "k.cubin"
        path.write_bytes(cubin)
        return subprocess.run([str(tool), *flags, str(path)], capture_output=True, text=True, check=True).stdout
