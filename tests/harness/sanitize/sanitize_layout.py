"""Tensors laid out apart, for tests whose report fields depend on what lies past a tensor.

Why: an access is in bounds when it falls inside the storage of *any* argument of the launch, and the CPU
allocator may put two small tensors side by side, so a tail overrun of ``x`` can land in ``y``'s storage (in
bounds, by the rule) and the count of offending lanes would depend on the allocator."""

from __future__ import annotations

from collections.abc import Callable

import torch

GAP = 1 << 16


def apart(*makers: Callable[[], torch.Tensor], gap: int = GAP) -> list[torch.Tensor]:
    """One tensor from each maker, no two storages within ``gap`` bytes of each other. A spacer of ``gap`` bytes is
    allocated after each (a heap that hands out addresses in order then puts them apart), and rejected attempts and
    spacers stay alive until the end, so the allocator cannot hand the same addresses back. After a rejected
    attempt, 32 more tensors of each maker are held too: a heap with many freed chunks of their size (the
    interpreter's numpy temporaries) hands those out first, close together, and these use them up."""
    held = []
    for _ in range(64):
        ts = []
        for m in makers:
            ts.append(m())
            held.append(torch.empty(gap, dtype=torch.uint8))
        spans = sorted((t.untyped_storage().data_ptr(), t.untyped_storage().data_ptr() + t.untyped_storage().nbytes())
                       for t in ts)
        if all(b[0] - a[1] >= gap for a, b in zip(spans, spans[1:], strict=False)):
            return ts
        held.append(ts)
        held.extend(m() for m in makers for _ in range(32))
    raise RuntimeError(f"could not allocate {len(makers)} tensors {gap} bytes apart in 64 tries")
