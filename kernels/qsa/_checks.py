"""Input validation shared by the QSA entry points: every bad argument is named with what was expected.

Why the value checks are opt-in (``validate=True``, a host sync): the kernels clamp bad metadata on the device
themselves (a block id past the cache or a visible count past the page table is
never read), so the default call stays free of host syncs and CUDA-graph capturable; ``validate=True``
names the first bad entry instead, for debugging. Shapes, dtypes and devices are checked on every call.

Why index tensors are copied to contiguous: the kernels address them as ``ptr + i``; a strided view (a
column of a larger tensor, a reversed or expanded view) would silently read other entries.
"""

from __future__ import annotations

import torch

_INT = (torch.int32, torch.int64)


def tensor(
    name: str,
    x: object,
    *,
    dim: int,
    dtypes: tuple[torch.dtype, ...] | None = None,
    device: torch.device | None = None,
) -> torch.Tensor:
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(x).__name__}")
    if x.dim() != dim:
        raise ValueError(f"{name} must have {dim} dims, got shape {tuple(x.shape)}")
    if dtypes is not None and x.dtype not in dtypes:
        raise TypeError(f"{name} must have dtype in ({', '.join(map(str, dtypes))}), got {x.dtype}")
    if device is not None and x.device != device:
        raise ValueError(f"{name} is on {x.device}, expected {device} (the cache's device)")
    return x


def int_tensor(name: str, x: object, *, dim: int, device: torch.device) -> torch.Tensor:
    """An int32/int64 index tensor, returned contiguous (the kernels index it as ``ptr + i``)."""
    return tensor(name, x, dim=dim, dtypes=_INT, device=device).contiguous()


def overlapping(x: torch.Tensor) -> bool:
    """Whether two indices of ``x`` address one element (an expanded or as_strided view)."""
    dims = sorted((s, n) for s, n in zip(x.stride(), x.shape, strict=True) if n > 1)
    span = 1  # elements covered by the dims of smaller stride: the next stride must step past them
    for stride, size in dims:
        if stride < span:
            return True
        span = stride * size
    return False


def writable(name: str, x: torch.Tensor) -> torch.Tensor:
    """Refuse an output whose elements alias each other: kernel programs would race on one address."""
    if overlapping(x):
        raise ValueError(
            f"{name} has overlapping memory (shape {tuple(x.shape)}, strides {x.stride()}): two elements "
            "share one address, so writes would race; pass a tensor with distinct elements (e.g. .clone())"
        )
    return x


def flag(name: str, v: object) -> bool:
    if not isinstance(v, bool):
        raise TypeError(f"{name} must be a bool, got {type(v).__name__} {v!r}")
    return v


def count(name: str, v: object, *, minimum: int) -> int:
    """An int >= ``minimum`` (bool refused: ``True`` is not a count)."""
    if isinstance(v, bool) or not isinstance(v, int) or v < minimum:
        raise ValueError(f"{name} must be an int >= {minimum}, got {v!r}")
    return v


def visible_within(
    visible: torch.Tensor, bt: torch.Tensor, row_req: torch.Tensor, *, page_size: int, num_blocks: int
) -> None:
    """visible >= 0, visible <= page-table capacity, and every page a row can see maps to a real block."""
    if visible.numel() == 0:
        return
    capacity = bt.shape[1] * page_size
    vmin, vmax = int(visible.min()), int(visible.max())
    if vmin < 0:
        raise ValueError(f"visible_blocks must be >= 0, got min {vmin}")
    if vmax > capacity:
        r = int(torch.argmax(visible.long()))
        raise ValueError(
            f"visible_blocks[{r}] = {vmax} exceeds the page-table capacity "
            f"{bt.shape[1]} pages × page_size {page_size} = {capacity}"
        )
    need = torch.zeros(bt.shape[0], dtype=torch.long, device=bt.device)
    pages = (visible.long() + page_size - 1) // page_size
    need.scatter_reduce_(0, row_req.long(), pages, reduce="amax")
    used = torch.arange(bt.shape[1], device=bt.device)[None, :] < need[:, None]
    bad = used & ((bt < 0) | (bt >= num_blocks))
    if bool(bad.any()):
        b, p = (int(v) for v in bad.nonzero()[0])
        raise ValueError(
            f"block_table[{b}, {p}] = {int(bt[b, p])} is outside [0, {num_blocks}) "
            f"(num_blocks of the cache) but page {p} is visible to request {b}"
        )


def row_req_within(row_req: torch.Tensor, requests: int) -> None:
    if row_req.numel() == 0:
        return
    lo, hi = int(row_req.min()), int(row_req.max())
    if lo < 0 or hi >= requests:
        raise ValueError(f"row_req entries must index block_table rows [0, {requests}), got range [{lo}, {hi}]")


def same_dtype(name: str, x: torch.Tensor, dtype: torch.dtype) -> None:
    if x.dtype != dtype:
        raise TypeError(
            f"{name}.dtype must equal the cache dtype {dtype}, got {x.dtype}; "
            f"normalize it with normalize_query(..., dtype={dtype})"
        )
