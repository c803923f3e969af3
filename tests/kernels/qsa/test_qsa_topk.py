"""The radix top-k of kernels.qsa.topk on adversarial rows, with tiles small enough that the interpreter runs
the multi-level paths (tiles whose candidates are selected again, one or several times) that the shipped
tile sizes only reach at GPU widths.

Expected results come from the documented definition (``_spec``): order the visible columns by the
order-preserving key of their float (so ``-0.0 < +0.0`` and NaN sits by its sign bit), ties to the lower
column, keep ``k``, list them in ascending column order, pad with ``-1``.
"""

from __future__ import annotations

import struct

import pytest
import torch

from kernels.qsa import topk as T
from kernels.qsa.reference import select_exact

NAN = float("nan")
INF = float("inf")
#: (single, tile): one level; two levels; three or more levels (tiles of 16 with k = 8 do not halve).
PLANS = [(128, 64), (32, 16), (16, 16)]
WIDTH = 100


def _key(x: float) -> int:
    b = struct.unpack("<i", struct.pack("<f", x))[0]
    return b if b >= 0 else b ^ 0x7FFFFFFF


def _spec(logits: torch.Tensor, vis: torch.Tensor, k: int) -> list[list[int]]:
    out = []
    for r in range(logits.shape[0]):
        v = int(vis[r])
        order = sorted(range(v), key=lambda c: (-_key(float(logits[r, c])), c))
        chosen = sorted(order[:k])
        out.append(chosen + [-1] * (k - len(chosen)))
    return out


def _rows(k: int, rng: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    w = WIDTH
    x = torch.randint(-3, 4, (12, w), generator=rng).float() * 0.5  # 0: few values, many ties
    x[1] = 2.0  # all equal
    # 2: k - 2 clear winners, then 5 ties at the k-th place spread over the tiles (straddling the cut)
    ties = [3, 17, 40, 63, 97]
    others = torch.tensor([c for c in range(w) if c not in ties])
    x[2] = -1.0
    x[2, others[torch.randperm(len(others), generator=rng)[: max(0, k - 2)]]] = 5.0
    x[2, ties] = 1.0
    # 3: specials; the NaN with every bit set has the smallest key of all (INT32_MIN)
    x[3] = torch.randn(w, generator=rng)
    x[3, ::7] = NAN
    x[3, 1::9] = -NAN
    x[3, 2::11] = INF
    x[3, 3::13] = -INF
    x[3, 4::5] = -0.0
    x[3, 5::6] = 0.0
    x[3, [1, 6]] = torch.tensor([-1], dtype=torch.int32).view(torch.float32)
    x[4] = torch.where(torch.rand(w, generator=rng) < 0.5, -0.0, 0.0)  # signed zeros only
    x[5] = -INF
    x[6] = torch.randn(w, generator=rng) * torch.exp2(torch.randint(-100, 100, (w,), generator=rng).float())
    x[7] = torch.tensor([-1], dtype=torch.int32).view(torch.float32)  # all INT32_MIN keys
    x[7, w - 1] = -INF
    vis = torch.full((12,), w, dtype=torch.int32)
    vis[8] = max(0, k - 1)  # fewer than k
    vis[9] = 0
    vis[10] = k  # exactly k
    vis[11] = k + 1
    x[8:10] = x[3]  # the specials, INT32_MIN key included, in rows that take everything
    x[10:] = x[0]
    return x, vis


@pytest.mark.parametrize("plan", PLANS, ids=["one-level", "two-levels", "many-levels"])
@pytest.mark.parametrize("k", [1, 5, 8])
def test_radix_topk_is_the_documented_selection(plan, k, rng, device):
    single, tile = plan
    assert T._plan(WIDTH, k, single, tile) is not None
    x, vis = _rows(k, rng)
    out = torch.full((x.shape[0], k), 7, dtype=torch.int32, device=device)
    assert T._radix_topk(x.to(device), vis.to(device), k, out, single, tile)
    want = _spec(x, vis, k)
    got = out.cpu().tolist()
    bad = [r for r in range(len(want)) if got[r] != want[r]]
    assert not bad, f"rows {bad}: got {[got[r] for r in bad]}, expected {[want[r] for r in bad]}"


def test_radix_topk_writes_a_row_slice_of_a_larger_result(rng, device):
    # out with a row stride larger than k (a column slice of a wider buffer): nothing written outside it
    k = 5
    x, vis = _rows(k, rng)
    buf = torch.full((x.shape[0], k + 3), 99, dtype=torch.int32, device=device)
    assert T._radix_topk(x.to(device), vis.to(device), k, buf[:, 1 : k + 1], 32, 16)
    assert buf[:, 1 : k + 1].cpu().tolist() == _spec(x, vis, k)
    assert (buf[:, 0] == 99).all() and (buf[:, k + 1 :] == 99).all()


@pytest.mark.parametrize("chunk", [32, 128], ids=["chunked", "resident"])
@pytest.mark.parametrize("k", [1, 5])
def test_bitwise_topk_is_the_documented_selection(chunk, k, rng, device, monkeypatch):
    monkeypatch.setattr(T, "CHUNK", chunk)  # 32: the row is re-read in chunks on every counting pass
    x, vis = _rows(k, rng)
    out = torch.full((x.shape[0], k), 7, dtype=torch.int32, device=device)
    T._bitwise_topk(x.to(device), vis.to(device), k, out)
    assert out.cpu().tolist() == _spec(x, vis, k)


@pytest.mark.parametrize("search", ["bitwise-chunked", "bitwise-resident", "radix"])
def test_visible_counts_are_read_clamped_to_the_row(search, rng, device, monkeypatch):
    """A count past the width or below 0 reads as the width or 0, and the last row fully visible: its columns
    end where the tensor does, so a read one past them is outside every argument (the sanitizer fails it)."""
    k = 5
    x, vis = _rows(k, rng)
    vis[0], vis[9], vis[11] = WIDTH + 7, -4, WIDTH
    out = torch.full((x.shape[0], k), 7, dtype=torch.int32, device=device)
    if search == "radix":
        assert T._radix_topk(x.to(device), vis.to(device), k, out, 32, 16)
    else:
        monkeypatch.setattr(T, "CHUNK", 32 if search == "bitwise-chunked" else 128)
        T._bitwise_topk(x.to(device), vis.to(device), k, out)
    assert out.cpu().tolist() == _spec(x, vis.clamp(0, WIDTH), k)


@pytest.mark.parametrize(
    ("width", "k", "search"),
    [(32, 5, "bitwise"), (WIDTH, 5, "radix"), (WIDTH, 9, "bitwise")],
    ids=["fits-registers", "wide", "wide-k-above-half-a-tile"],
)
def test_topk_columns_chooses_the_search_by_width_and_k(width, k, search, rng, device, monkeypatch):
    for name, value in (("RADIX_ABOVE", 32), ("SINGLE", 32), ("TILE", 16), ("CHUNK", 32)):
        monkeypatch.setattr(T, name, value)
    calls = []
    bitwise = T._bitwise_topk
    monkeypatch.setattr(T, "_bitwise_topk", lambda *a: (calls.append("bitwise"), bitwise(*a)))
    x, vis = _rows(k, rng)
    x, vis = x[:, :width], vis.clamp(max=width)
    got = T.topk_columns(x.to(device), vis.to(device), k).cpu().tolist()
    assert calls == (["bitwise"] if search == "bitwise" else [])
    assert got == _spec(x, vis, k)


@pytest.mark.parametrize("width", [1, 16, 17, 5000, 16385, 40000, 10**6])
@pytest.mark.parametrize("k", [1, 512, 2048, 8192, 8193])
def test_plan_levels_fit_in_registers_and_end_in_one_tile(width, k):
    plan = T._plan(width, k, T.SINGLE, T.TILE)
    if width > T.SINGLE and 2 * k > T.TILE:
        assert plan is None
        return
    assert plan is not None
    w = width
    for i, (block, n) in enumerate(plan):
        assert block & (block - 1) == 0 and 16 <= block <= T.MAX_TILE
        assert n == (1 if i == len(plan) - 1 else -(-w // block))
        assert block * n >= w
        w = n * k


def test_few_rows_cut_the_last_level_down():
    """Below FEW_ROWS rows the last level ranks at most SINGLE_FEW candidates (8 x 256k MTP2: 16 rows of
    65,536 columns gave 16 programs of 16,384 candidates, 0.094 ms on the H200; 3 levels: 0.059 ms)."""
    assert T._plan(65536, 512, T.SINGLE, T.TILE, rows=16) == [(2048, 32), (2048, 8), (4096, 1)]
    assert T._plan(65536, 512, T.SINGLE, T.TILE, rows=64) == [(2048, 32), (16384, 1)]
    assert T._plan(65536, 512, T.SINGLE, T.TILE) == [(2048, 32), (16384, 1)]


@pytest.mark.parametrize("k", [1, 5])
def test_few_rows_plan_is_the_documented_selection(k, rng, device, monkeypatch):
    monkeypatch.setattr(T, "SINGLE_FEW", 16)  # 12 rows < FEW_ROWS: the last level ranks <= 16 candidates
    assert T._plan(WIDTH, k, 64, 16, rows=12)[-1] == (16, 1)  # k = 5: 100 -> 7 tiles -> 3 tiles -> 15
    x, vis = _rows(k, rng)
    out = torch.full((x.shape[0], k), 7, dtype=torch.int32, device=device)
    assert T._radix_topk(x.to(device), vis.to(device), k, out, 64, 16)
    assert out.cpu().tolist() == _spec(x, vis, k)


def test_sort_spec_is_the_documented_selection(rng):
    x, vis = _rows(5, rng)
    assert select_exact(x, vis, 5).tolist() == _spec(x, vis, 5)


@pytest.mark.gpu
@pytest.mark.parametrize(("rows", "width"), [(64, 8192), (128, 8192), (64, 16384), (64, 32768), (256, 16384)])
def test_topk_columns_at_decode_shapes_gpu(rows, width, rng, device):
    k = 512
    x = (torch.randn(rows, width, generator=rng) * 4).round() / 4  # coarse: ties at the k-th place
    vis = torch.randint(0, width + 1, (rows,), generator=rng, dtype=torch.int32)
    vis[:5] = torch.tensor([width, 0, k, k - 1, k + 1])
    x[5] = 1.0
    x[6, ::2] = -0.0
    x[7, ::5] = NAN
    x[7, 1::7] = INF
    x[8, ::3] = -NAN
    x, vis = x.to(device), vis.to(device)
    want = select_exact(x, vis, k)
    assert torch.equal(T.topk_columns(x, vis, k), want)
    old = torch.empty_like(want)
    T._bitwise_topk(x, vis, k, old)
    assert torch.equal(old, want)
