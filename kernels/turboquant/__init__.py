"""TurboQuant K8V4 paged KV cache: FP8 keys, 4-bit min/max values, one slot per (token, kv-head).

Import only from tests or fixtures (never from a conftest at import time): Triton decides at decoration
time whether the kernels run on the interpreter.
"""

from kernels.turboquant.layout import KEY_MAX, SCALE_EPS, VALUE_MAX, slot_bytes
from kernels.turboquant.load import tq_load_k8v4
from kernels.turboquant.store import resolve_fp8_format, tq_store_k8v4

__all__ = [
    "tq_store_k8v4",
    "tq_load_k8v4",
    "resolve_fp8_format",
    "slot_bytes",
    "KEY_MAX",
    "VALUE_MAX",
    "SCALE_EPS",
]
