"""Which multiply / add pairs the compiled kernel computes as one ``fma``, by source position, and the rule.

Why: with fp fusion on (Triton's ``enable_fp_fusion``, the default through 3.9) the NVPTX backend is built
with ``AllowFPOpFusion = Fast``, and LLVM's DAG combiner (``DAGCombiner::visitFADDForFMACombine``, with
``NVPTXTargetLowering::enableAggressiveFMAFusion`` returning true) folds, within one basic block:

- ``fadd(fmul(a, b), c)`` and ``fadd(c, fmul(a, b))`` into ``fma(a, b, c)``, whatever other uses the ``fmul``
  has; with both operands products, the one with fewer uses, the left one on a tie;
- ``fsub(fmul(a, b), c)`` into ``fma(a, b, -c)``, else ``fsub(c, fmul(a, b))`` into ``fma(-a, b, c)``.

The LLVM IR Triton hands the backend (``asm["llir"]``) still has the separate ``fmul``/``fadd`` with their
``!dbg`` source locations, so :func:`fused_sites` applies that rule to it and checks the count against the
``fma.rn`` instructions of the PTX (a mismatch raises: the rule no longer describes the compiler). What is left
in the PTX as ``mul.f32`` / ``add.f32`` without ``.rn`` may still be contracted by ptxas (Triton passes no
``--fmad=false`` when fusion is on); :func:`ptxas_candidates` lists such pairs, which only SASS settles. A loop
that carries a product into the next iteration's add (:func:`carried_pairs`) is one ptxas contracts wherever its
unrolling puts the two in one block (:func:`ptxas_unrolled`, :func:`unrolled_position`).

An operand that is a product only through a ``shufflevector`` (LLVM's VectorCombine moving a lane of a product
vector) is folded where the backend's split of the vector into legal pieces makes it a plain use of the product
(``<2 x float>`` on sm90) and not where the shuffle stays (lane 1 to 0 of ``<2 x half>``): :func:`_product`.
:func:`thread_chains` applies the rule to each add of a reduction's in-thread chain.

Public API: :class:`Site`, :func:`fused_sites`, :func:`thread_chains`, :func:`ptx_fma_count`,
:func:`ptxas_candidates`, :func:`ptxas_contracted_lines`, :class:`CarriedPair`, :func:`carried_pairs`,
:func:`ptxas_unrolled`, :func:`unrolled_position`, :func:`nvdisasm`, :func:`fma` (re-exported from
:mod:`harness.lowering.numeric`).
"""

from __future__ import annotations

import functools
import re
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass

from harness.lowering.numeric import fma
from harness.lowering.sites import triton_library

__all__ = ["READ_UNROLLS", "RULE_SOURCE", "CarriedPair", "Site", "carried_pairs", "fma", "fused_sites", "nvdisasm",
           "ptx_fma_count", "ptxas_candidates", "ptxas_contracted_lines", "ptxas_unrolled", "thread_chains",
           "unrolled_position"]

RULE_SOURCE = ("LLVM DAGCombiner::visitFADDForFMACombine / visitFSUBForFMACombine with AllowFPOpFusion=Fast and "
               "NVPTX enableAggressiveFMAFusion=true, applied to Triton's LLIR; count checked against the PTX's "
               "fma.rn instructions (Triton 3.6.0 and 3.9.0, sm90)")

Where = tuple[str, int, int]  # (file, line, Triton's raw column)

_DEF = re.compile(r"^\s*(%[\w.]+)\s*=\s*(fmul|fadd|fsub)\s+(?:(?:fast|contract|reassoc|nnan|ninf|nsz|arcp|afn)\s+)*"
                  r"(float|bfloat|half|<\d+ x (?:float|bfloat|half)>)\s+(%[\w.]+|[-\w.+]+),\s*(%[\w.]+|[-\w.+]+)"
                  r"(?:,\s*!dbg\s+(!\d+))?")
_USE = re.compile(r"%[\w.]+")
_LABEL = re.compile(r"^([\w.$-]+):")
_META = re.compile(r"^(!\d+)\s*=\s*(?:distinct\s+)?(.*)$")


@dataclass(frozen=True)
class Site:
    """A fused pair: the ``fmul``'s and the ``fadd``/``fsub``'s source positions (innermost user code, Triton's
    raw columns), the add's kind, which add operand the product is (0 left, 1 right), the element type
    (``float``/``bfloat``/``half``) and how many LLIR instructions fused this way."""

    mul: Where | None
    add: Where | None
    op: str
    operand: int
    elem: str
    count: int = 1




def _locations(llir: str) -> dict[str, Where | None]:
    """``!dbg`` id → the innermost non-library position of its inline chain."""
    meta = {m.group(1): m.group(2) for ln in llir.splitlines() for m in [_META.match(ln)] if m}

    def file_of(scope: str, depth: int = 0) -> str | None:
        text = meta.get(scope, "")
        f = re.search(r"file:\s*(!\d+)", text)
        if f:
            ft = meta.get(f.group(1), "")
            name = re.search(r'filename:\s*"([^"]*)"', ft)
            d = re.search(r'directory:\s*"([^"]*)"', ft)
            if name:
                return (d.group(1) + "/" if d and not name.group(1).startswith("/") else "") + name.group(1)
        s = re.search(r"scope:\s*(!\d+)", text)
        return file_of(s.group(1), depth + 1) if s and depth < 16 else None

    out: dict[str, Where | None] = {}
    for key, text in meta.items():
        if not text.startswith("!DILocation"):
            continue
        cur: str | None = key
        found = None
        for _ in range(32):
            if cur is None:
                break
            t = meta.get(cur, "")
            line = re.search(r"line:\s*(\d+)", t)
            col = re.search(r"column:\s*(\d+)", t)
            scope = re.search(r"scope:\s*(!\d+)", t)
            path = file_of(scope.group(1)) if scope else None
            if line and path and not triton_library(path):
                found = (path, int(line.group(1)), int(col.group(1)) if col else 0)
                break
            nxt = re.search(r"inlinedAt:\s*(!\d+)", t)
            cur = nxt.group(1) if nxt else None
        out[key] = found
    return out


_EXTRACT = re.compile(r"^\s*(%[\w.]+)\s*=\s*extractelement\s+<\d+ x float>\s+(%[\w.]+),")
_SHUFFLE = re.compile(r"^\s*(%[\w.]+)\s*=\s*shufflevector\s+<\d+ x (?:float|bfloat|half)>\s+(%[\w.]+),\s*<[^>]*>\s+"
                      r"[^,]+,\s*<\d+ x i32>\s+<([^>]*)>")


@dataclass
class _Parsed:
    locs: dict[str, Where | None]
    defs: dict[str, tuple[str, str, str, str, str | None]]
    uses: Counter[str]
    block_of: dict[str, int]
    adds: list[tuple[str, str, str, str, str, str | None, int]]
    shuffles: dict[str, tuple[str, tuple[int | None, ...]]]  # name -> (source vector, mask; None: poison)
    extracts: dict[str, str]  # name -> the vector an ``extractelement`` reads a lane of


def _parse(llir: str) -> _Parsed:
    defs: dict[str, tuple[str, str, str, str, str | None]] = {}
    uses: Counter[str] = Counter()
    block_of: dict[str, int] = {}
    shuffles: dict[str, tuple[str, tuple[int | None, ...]]] = {}
    extracts: dict[str, str] = {}
    block = 0
    adds: list[tuple[str, str, str, str, str, str | None, int]] = []
    for ln in llir.splitlines():
        if _LABEL.match(ln) or ln.startswith("define "):
            block += 1
        m = _DEF.match(ln)
        body = ln.split("!dbg")[0]
        lhs = body.split("=", 1)
        for u in _USE.findall(lhs[1] if len(lhs) == 2 else body):
            uses[u] += 1
        ex = _EXTRACT.match(ln)
        if ex:
            extracts[ex.group(1)] = ex.group(2)
            block_of[ex.group(1)] = block
        sh = _SHUFFLE.match(ln)
        if sh:
            mask = tuple(None if x.strip() in ("i32 poison", "i32 undef") else int(x.split()[-1])
                         for x in sh.group(3).split(","))
            shuffles[sh.group(1)] = (sh.group(2), mask)
            block_of[sh.group(1)] = block
        if not m:
            continue
        name, op, ty, a, b, dbg = m.groups()
        defs[name] = (op, ty, a, b, dbg)
        block_of[name] = block
        if op in ("fadd", "fsub"):
            adds.append((name, op, ty, a, b, dbg, block))
    return _Parsed(_locations(llir), defs, uses, block_of, adds, shuffles, extracts)


def _legal_lanes(elem: str, arch: str) -> int:
    """How many lanes of an ``elem`` vector one NVPTX register op takes on ``arch``: the backend splits wider
    vectors into pieces of this width before it combines (type legalization). 16-bit: 2 (``<2 x half>`` /
    ``<2 x bfloat>`` stay ``mul``/``fma.rn``/``add.f16x2``, ``.bf16x2``: Triton 3.6.0's PTX for sm90); ``float``:
    1 on sm90 (scalar ``fma.rn.f32`` per live lane, same PTX), 2 from sm100 on (``mul``/``fma.rn``/``add.f32x2``:
    Triton 3.6.0's PTX for sm100, a ``<4 x float>`` fold split in two)."""
    if elem != "float":
        return 2
    digits = "".join(ch for ch in str(arch) if ch.isdigit())
    return 2 if digits and int(digits) >= 100 else 1


def _product(p: _Parsed, operand: str, blk: int, elem: str, arch: str | None) -> tuple[tuple[str, ...], int] | None:
    """The ``fmul`` an add operand is as the DAG combiner sees it on ``arch``, with the lanes it feeds (``None``:
    none); ``arch`` ``None``: only a direct ``fmul`` operand.

    A ``shufflevector`` between the multiply and the add (LLVM's VectorCombine moving lane j of a product vector
    to lane d: ``foldExtractExtract``) hides the multiply from the combiner where it survives legalization: when
    d and j sit at different places of a legal piece (:func:`_legal_lanes`), e.g. 16-bit lane 1 to lane 0 on
    sm90 (``mov.b32 {_, %rs}`` then ``add.f16x2``, no ``fma``; SASS keeps the ``HADD2``) or fp32 lane 3 to 0 on
    sm100. Where they sit at the same place the split makes the shuffle a plain use of the multiply's piece,
    which the combiner folds (fp32 on sm90: every lane; fp32 lane 2 to 0 on sm100). Triton 3.6.0's LLIR and PTX;
    :func:`fused_sites` checks the count against the PTX."""
    d = p.defs.get(operand)
    if d is not None:
        if d[0] != "fmul" or p.block_of.get(operand) != blk:
            return None
        lanes = int(d[1][1:].split(" x ")[0]) if d[1].startswith("<") else 1
        return d, lanes
    if arch is None:
        return None
    vec = p.extracts.get(operand)
    if vec is not None:
        # an fp32 lane read out of a product vector (LLVM's SLP vectorizer pairs two squares of a sum: Triton 3.6's
        # `fmul <2 x float>` then `extractelement`): where the backend splits the vector into scalars (fp32 on
        # sm90) the lane is a plain use of its own multiply, which the combiner folds (3.6.0's PTX: the QSA cache
        # kernel's sum of squares, 3 fma.rn.f32 for 3 such adds)
        d = p.defs.get(vec)
        if (_legal_lanes(elem, arch) != 1 or d is None or d[0] != "fmul" or p.block_of.get(vec) != blk
                or p.block_of.get(operand) != blk):
            return None
        return d, 1
    s = p.shuffles.get(operand)
    if s is None:
        return None
    live = [(dst, src) for dst, src in enumerate(s[1]) if src is not None]
    width = _legal_lanes(elem, arch)
    if not live or any(dst % width != src % width for dst, src in live):
        return None
    d = p.defs.get(s[0])
    if d is None or d[0] != "fmul" or p.block_of.get(s[0]) != blk or p.block_of.get(operand) != blk:
        return None
    return d, len(live)


def _fold(p: _Parsed, a: str, b: str, blk: int, elem: str, arch: str) -> tuple[int, tuple[str, ...], int] | None:
    """Which operand of an add the combiner folds (0 or 1), its ``fmul`` and the lanes, or ``None``. An operand
    that is a product through a shuffle counts only where neither is a direct product: in a vector add with a
    direct product (Triton 3.9's in-thread tree, ``fadd <16 x float> %p, shuffle(%p)``) the direct one's lanes
    are the count's upper bound, and which scalar the split add folds is not derived."""
    ma, mb = _product(p, a, blk, elem, None), _product(p, b, blk, elem, None)
    if not (ma or mb):
        ma, mb = _product(p, a, blk, elem, arch), _product(p, b, blk, elem, arch)
    if ma and mb:
        pick = 1 if p.uses[a] > p.uses[b] else 0
    elif ma:
        pick = 0
    elif mb:
        pick = 1
    else:
        return None
    mul, lanes = ma if pick == 0 else mb  # type: ignore[misc]
    return pick, mul, lanes


def fused_sites(llir: str, ptx: str | None = None, arch: str = "sm90") -> list[Site]:
    """The pairs LLVM fuses (see the module docstring), grouped by position (``count``: LLIR element operations,
    a vector op counting all its lanes). With ``ptx``, the PTX's ``fma.rn`` element count must be what the rule
    predicts (exactly, for scalar IR; between the scalar fusions and all lanes when the IR has vector adds),
    else ``ValueError``: the derived rule does not describe this compiler."""
    p = _parse(llir)
    found: Counter[tuple[Where | None, Where | None, str, int, str]] = Counter()
    scalar = 0
    for _name, op, ty, a, b, dbg, blk in p.adds:
        elem = ty.split(" x ")[-1].rstrip(">")
        fold = _fold(p, a, b, blk, elem, arch)
        if fold is None:
            continue
        pick, mul, lanes = fold
        lanes = min(lanes, int(ty[1:].split(" x ")[0]) if ty.startswith("<") else 1)
        scalar += lanes == 1 and not ty.startswith("<")
        key = (p.locs.get(mul[4]) if mul and mul[4] else None, p.locs.get(dbg) if dbg else None, op, pick, elem)
        found[key] += lanes
    sites = [Site(k[0], k[1], k[2], k[3], k[4], n) for k, n in found.items()]
    if ptx is not None:
        # Vector adds (LLVM's vectorizer builds <8 x float> ops of which the code uses some lanes, and the
        # backend scalarizes them) count every lane: the PTX then has at least the scalar fusions and at most
        # all lanes' (plus explicit fma calls); for purely scalar IR the count is exact.
        want = ptx_fma_count(ptx)
        got = sum(s.count for s in sites)
        explicit = _explicit_lanes(llir)
        low = got if scalar == got else scalar
        if not low <= want <= got + explicit:
            raise ValueError(f"fused_sites: the rule predicts {got} contracted fma (+ up to {explicit} explicit "
                             f"ones), the PTX has {want} ({RULE_SOURCE})")
    return sites


def thread_chains(llir: str, arch: str = "sm90") -> dict[Where | None, list[tuple[bool, ...]]]:
    """Per ``fadd`` source position, its chains of adds (each add reading the previous one directly), in order,
    with whether the combiner folds a product into each (the rule of :func:`fused_sites`, lane 0).

    Why: a reduction's in-thread part lowers to one such chain per result register (Triton 3.6:
    ``acc = combine(acc, value[i])``), and LLVM may vectorize it without reassociating: lane 0 of
    ``fadd <2 x half>`` keeps the chain's order, but an add fed by a product through a ``shufflevector`` stays
    unfused (:func:`_product`). Which of the chain's adds fuse is then no count but a pattern, e.g.
    ``fma, fma, add, fma, add, fma, add`` for 8 fp16 registers loaded as pairs (Triton 3.6.0, sm90); the
    evaluation order is the chain's either way. The chain goes on into the warp shuffles' adds, whose operands
    are no products."""
    p = _parse(llir)
    names = {a[0]: a for a in p.adds if a[1] == "fadd"}
    users: dict[str, list[str]] = {}
    for name, (_n, _op, _ty, a, b, _dbg, _blk) in names.items():
        for x in {a, b}:
            if x in names:
                users.setdefault(x, []).append(name)
    out: dict[Where | None, list[tuple[bool, ...]]] = {}
    for name, (_n, _op, ty, a, b, dbg, _blk) in names.items():
        if a in names or b in names:
            continue  # not a chain's first add
        where = p.locs.get(dbg) if dbg else None
        flags: list[bool] = []
        cur: str | None = name
        while cur is not None:
            _n, _op, ty, a, b, d, blk = names[cur]
            elem = ty.split(" x ")[-1].rstrip(">")
            flags.append(_fold(p, a, b, blk, elem, arch) is not None)
            nxt = [u for u in users.get(cur, []) if (p.locs.get(names[u][5]) if names[u][5] else None) == where]
            cur = nxt[0] if len(nxt) == 1 else None
        out.setdefault(where, []).append(tuple(flags))
    return out


_PAIR_FMA = re.compile(r"^\s*fma\.rn\.f32\s+%r\d+,\s*%r(\d+),\s*%r\d+,\s*(%r\d+);", re.M)
_MUL_F32 = re.compile(r"^\s*mul\.f32\s+(%r\d+),\s*%r(\d+),\s*%r\d+;", re.M)


def pair_sides(ptx: str) -> tuple[int, ...]:
    """For each ``fadd(fmul, fmul)`` the compiled kernel contracted, ``fma.rn.f32 d, a, b, m`` with ``m`` a
    ``mul.f32 m, c, e`` of the PTX, ordered by their operands' registers: 0 where the product folded into the fma
    is the earlier-defined element's (``a`` numbered below ``c``), 1 where it is the later one's.

    Why: which product the DAG folds decides the rounding, and Triton 3.9's LLVM (its SLP vectorizer) folds the
    right-hand one in some first-level pairs of an in-thread tree sum (Liger-Kernel's rms_norm, fp32, N = 4096, 8
    warps: 2 of its 8 pairs; sm90 PTX of Triton 3.9.0, 2026-12-06), where the LLIR's operand order says left.
    PTX registers are numbered in definition order, and a thread's elements are loaded (so defined) in register
    order: that the numbering follows the elements is checked on the H100 by that kernel's outputs."""
    muls = {m.group(1): int(m.group(2)) for m in _MUL_F32.finditer(ptx)}
    pairs = []
    for m in _PAIR_FMA.finditer(ptx):
        other = muls.get(m.group(2))
        if other is not None:
            a = int(m.group(1))
            pairs.append((min(a, other), int(a > other)))
    return tuple(side for _, side in sorted(pairs))


#: fma calls already in the LLIR (``tl.fma``, libdevice's polynomial steps): PTX fma that are no contraction.
_EXPLICIT = re.compile(r"call\s+[^@]*@llvm\.(?:fma\.|nvvm\.fma\.rn\.(?:f|bf16|f16|bf16x2|f16x2)\()")


def _explicit_lanes(llir: str) -> int:
    """The element operations of the LLIR's explicit fma calls (``tl.fma``): a vector call counts each lane
    (``@llvm.fma.v8f32``: 8, as the backend scalarizes it into 8 ``fma.rn.f32``; Triton 3.9's LLIR of the
    turboquant store's reciprocal division), an ``x2`` intrinsic two."""
    n = 0
    for m in _EXPLICIT.finditer(llir):
        width = re.match(r"v(\d+)", llir[m.end():])
        n += int(width.group(1)) if width else 2 if m.group(0).endswith("x2(") else 1
    return n


def ptx_fma_count(ptx: str) -> int:
    """The ``fma.rn`` element operations in the PTX (``fma.rn.f32``, ``fma.rn.bf16``, ``fma.rn.f16``; ``x2`` forms
    count two). ``.ftz`` forms are not counted: contraction keeps denormals (no ``.ftz``), libdevice's
    polynomials flush."""
    n = 0
    for m in re.finditer(r"^\s*(?:@!?%p\d+\s+)?fma\.rn\.(f32|bf16|f16|bf16x2|f16x2|f32x2)\b", ptx, re.M):
        n += 2 if m.group(1).endswith("x2") else 1
    return n


def ptxas_candidates(ptx: str) -> int:
    """PTX ``mul.f32`` results (no ``.rn``: contractible) read by an ``add.f32``/``sub.f32`` (no ``.rn``): pairs
    ptxas may still contract."""
    muls = set(re.findall(r"^\s*mul\.f32\s+(%r\d+),", ptx, re.M))
    n = 0
    for m in re.finditer(r"^\s*(?:add|sub)\.f32\s+%r\d+,\s*(%r\d+),\s*(%r\d+);", ptx, re.M):
        n += int(m.group(1) in muls or m.group(2) in muls)
    return n


#: PTX instructions whose SASS expansion contains FFMA of its own (division, square root, MUFU range reduction):
#: a line holding one says nothing about contraction.
_EXPANDS = re.compile(r"^\s*(?:@!?%p\d+\s+)?(?:div|rcp|sqrt|rsqrt|ex2|lg2|sin|cos|tanh)\.", re.M)
_PTX_LOC = re.compile(r"^\s*\.loc\s+(\d+)\s+(\d+)\s+(\d+)")
_PTX_FILE = re.compile(r'^\s*\.file\s+(\d+)\s+"([^"]*)"', re.M)


def _located(ptx: str) -> Iterator[tuple[tuple[str, int], str]]:
    """Each PTX line after a ``.loc``, with the (file, line) of the innermost ``.loc`` above it (as ``nvdisasm -g``
    reports lines)."""
    files = {m.group(1): m.group(2) for m in _PTX_FILE.finditer(ptx)}
    cur: tuple[str, int] | None = None
    for ln in ptx.splitlines():
        m = _PTX_LOC.match(ln)
        if m:
            cur = (files.get(m.group(1), m.group(1)), int(m.group(2)))
        elif cur is not None:
            yield cur, ln


def _ptx_lines(ptx: str) -> dict[tuple[str, int], set[str]]:
    """(file, line) → the PTX opcodes emitted under that ``.loc``."""
    out: dict[tuple[str, int], set[str]] = {}
    for where, ln in _located(ptx):
        op = re.match(r"^\s*(?:@!?%p\d+\s+)?([a-z][\w.]*)\s", ln)
        if op and not ln.lstrip().startswith("."):
            out.setdefault(where, set()).add(op.group(1))
    return out


@functools.lru_cache(maxsize=8)  # every ptxas_* function reads one kernel's SASS: disassembled once (read-only)
def _sass_text(cubin: bytes, tool: str) -> str:
    """``nvdisasm -g -c``: the SASS with the source line (``//## File ..., line N``) above each run of
    instructions."""
    import subprocess
    import tempfile

    with tempfile.NamedTemporaryFile(suffix=".cubin") as f:
        f.write(cubin)
        f.flush()
        return subprocess.run([tool, "-g", "-c", f.name], capture_output=True, text=True, timeout=120).stdout


_SASS_FILE = re.compile(r'^\s*//## File "([^"]*)", line (\d+)')


@functools.lru_cache(maxsize=8)
def _sass_lines(cubin: bytes, tool: str) -> dict[tuple[str, int], list[str]]:
    out: dict[tuple[str, int], list[str]] = {}
    cur: tuple[str, int] | None = None
    for ln in _sass_text(cubin, tool).splitlines():
        m = _SASS_FILE.match(ln)
        if m:
            cur = (m.group(1), int(m.group(2)))
            continue
        op = re.search(r"\b(FFMA|FMUL|FADD|HFMA2|HMUL2|HADD2)\b", ln)
        if op and cur is not None:
            out.setdefault(cur, []).append(op.group(1))
    return out


def nvdisasm() -> str | None:
    """The ``nvdisasm`` Triton ships (``triton/backends/nvidia/bin``), or ``None``."""
    import os

    try:
        import triton.backends.nvidia as nv
    except ImportError:
        return None
    path = os.path.join(os.path.dirname(nv.__file__), "bin", "nvdisasm")
    return path if os.access(path, os.X_OK) else None


_CONTRACTIBLE_MUL = re.compile(r"^\s*(?:@!?%p\d+\s+)?mul\.f32\s", re.M)


def ptxas_contracted_lines(cubin: bytes, ptx: str, tool: str | None = None) -> set[tuple[str, int]]:
    """Source lines where ptxas made an ``FFMA`` the PTX does not have: SASS (``nvdisasm -g``) holds an FFMA there,
    the PTX has no ``fma.rn`` there but a contractible ``mul.f32`` and ``add``/``sub.f32`` (no ``.rn``), and no
    instruction whose own expansion uses FFMA (division, sqrt, MUFU).

    Why: Triton does not pass ``--fmad=false`` to ptxas when fp fusion is on, and ptxas contracts what LLVM left,
    e.g. across a loop's back edge (``acc = (acc + p) * 0.75`` unrolled: ``FFMA acc, 0.75, p``; seen on Triton
    3.6.0 and 3.9.0, sm90). Such a kernel's rounding is ptxas's choice per unrolled iteration: a line is
    modelled only where that choice is read (:func:`ptxas_unrolled`, :func:`ptxas_quotient_lines`), the others are
    reported. Empty when no ``nvdisasm``."""
    if not _CONTRACTIBLE_MUL.search(ptx):
        return set()  # ptxas fuses only a contractible multiply: without one, nothing to disassemble
    tool = tool or nvdisasm()
    if tool is None:
        return set()
    ptx_by = _ptx_lines(ptx)
    out = set()
    for where, ops in _sass_lines(bytes(cubin), tool).items():
        if "FFMA" not in ops:
            continue
        p = ptx_by.get(where, set())
        if any(o.startswith("fma.") for o in p) or any(_EXPANDS.match(" " + o + " ") for o in p):
            continue
        if "mul.f32" in p and ("add.f32" in p or "sub.f32" in p):
            out.add(where)
        elif "mul.f32" in p or "add.f32" in p or "sub.f32" in p:
            out.add(where)  # the pair's halves sit on two lines: this line holds an FFMA the PTX does not
    return out


_PHI = re.compile(r"^\s*(%[\w.]+)\s*=\s*phi\s+(?:float|<\d+ x float>)\s+(.*)$")
_FMUL_DBG = re.compile(r"^\s*(%[\w.]+)\s*=\s*fmul\b.*!dbg\s+(!\d+)")
_INCOMING = re.compile(r"\[\s*(%[\w.]+|[-\w.+]+)\s*,\s*%[\w.]+\s*\]")


@dataclass(frozen=True)
class CarriedPair:
    """A multiply whose product the loop carries (an LLIR ``phi``) into the next iteration's add: their source
    positions, the add's kind and which of its operands the carried product is (0 left, 1 right)."""

    mul: Where | None
    add: Where | None
    op: str
    operand: int


def carried_pairs(llir: str) -> list[CarriedPair]:
    """The fp32 adds of a one-block loop that read, through the loop header's ``phi``, a multiply of the same
    block: LLVM cannot contract them (the multiply is the previous iteration's), ptxas may
    (:func:`ptxas_unrolled`)."""
    p = _parse(llir)
    phis = {m.group(1): _INCOMING.findall(m.group(2)) for ln in llir.splitlines() for m in [_PHI.match(ln)] if m}
    # a vector multiply by a constant (`fmul <4 x float> %x, splat (float 7.5e-01)`) has an operand _DEF does not
    # read through, so its !dbg is read here
    mul_dbg = {m.group(1): m.group(2) for ln in llir.splitlines() for m in [_FMUL_DBG.match(ln)] if m}
    out = []
    for _name, op, ty, a, b, dbg, blk in p.adds:
        if ty.split(" x ")[-1].rstrip(">") != "float":
            continue
        for side, x in enumerate((a, b)):
            muls = [v for v in phis.get(x, ()) if p.defs.get(v, ("",))[0] == "fmul" and p.block_of.get(v) == blk]
            if len(muls) == 1:
                where = mul_dbg.get(muls[0])
                out.append(CarriedPair(p.locs.get(where) if where else None, p.locs.get(dbg) if dbg else None,
                                       op, side))
    return out


_SASS_LABEL = re.compile(r"^(\.L_x_\d+):")
_SASS_OP = re.compile(r"^\s*/\*[0-9a-f]+\*/\s+(?:@(!?)(U?P\w+)\s+)?([A-Z][\w.]*)([^;]*);")
_SASS_BRA = re.compile(r"`\((\.L_x_\d+)\)")
_UNSIGNED_NONZERO = re.compile(r"^\s*(P\d),\s*PT,\s*R\d+,\s*RZ,\s*PT\s*$")

#: The unrolled shapes whose control flow has been read (sm90 SASS of ``tests/lowering/kernels.py::scaled_loop``,
#: Triton 3.6.0 with ptxas 12.8 and Triton 3.9.0 with ptxas 13.4, identical): a 4-iteration loop while at least 4
#: remain, then 2 iterations if at least 2 remain, then a 1-iteration loop for the rest.
READ_UNROLLS = frozenset({(4, 2, 1)})


def ptxas_unrolled(cubin: bytes, add: tuple[str, int], mul: tuple[str, int],
                   tool: str | None = None) -> tuple[int, ...] | None:
    """How ptxas unrolled the loop of a carried pair (:func:`carried_pairs`; ``add``, ``mul``: their (file, line)),
    as the iterations per unrolled block in code order, e.g. ``(4, 2, 1)``; ``None`` where its SASS is not a shape
    of :data:`READ_UNROLLS`.

    Why: ptxas contracts the multiply of one iteration with the add of the next where unrolling puts them in one
    block, so which iterations' adds are ``FFMA`` depends on the unroll: per block of ``s`` iterations (sm90 SASS,
    ``nvdisasm -g``, one chain per element a thread holds) the first add stays ``FADD``, the next ``s - 1`` are
    ``FFMA`` with the previous multiply and the last multiply stays ``FMUL``: ``s`` adds and ``s`` multiplies in
    one ``FADD``, one ``FMUL`` and ``s - 1`` ``FFMA`` per chain, the counts this reads. The main loop runs while
    ``s`` iterations remain, the smaller blocks take the remainder from the largest down (read from the branch
    conditions of :data:`READ_UNROLLS`' shape). A block before the main loop whose pair runs only where an
    unsigned ``trip > 0`` fails (``ISETP.GT.U32 P, PT, R, RZ``, then ``@!P`` or behind ``@P BRA``) is ptxas's
    peel for a trip count that wrapped to 0, unreachable behind the PTX's own ``trip < 1`` exit, and is skipped.
    Any other ``FADD``/``FFMA``/``FMUL`` on the two lines, or any other block shape: ``None``."""
    tool = tool or nvdisasm()
    if tool is None:
        return None
    blocks: list[dict] = [{"label": None, "word": [], "loop": False, "preds": set(), "guard": ""}]
    nonzero: set[str] = set()
    line: tuple[str, int] | None = None
    for ln in _sass_text(bytes(cubin), tool).splitlines():
        lab = _SASS_LABEL.match(ln)
        if lab:
            blocks.append({"label": lab.group(1), "word": [], "loop": False, "preds": set(), "guard": ""})
            continue
        m = _SASS_FILE.match(ln)
        if m:
            line = (m.group(1), int(m.group(2)))
            continue
        m = _SASS_OP.match(ln)
        if not m:
            continue
        neg, pred, op, rest = m.groups()
        blk = blocks[-1]
        if op.startswith("ISETP.GT.U32.AND"):
            u = _UNSIGNED_NONZERO.match(rest)
            if u:
                nonzero.add(u.group(1))
        if op == "BRA":
            b = _SASS_BRA.search(rest)
            blk["loop"] |= bool(b and b.group(1) == blk["label"])
            if pred and not neg and pred in nonzero:
                blk["guard"] = "!" + pred  # what follows in the block runs only where the branch is not taken
        if op not in ("FADD", "FFMA", "FMUL") or line not in (add, mul):
            continue
        sym = {"FADD": "A", "FFMA": "F", "FMUL": "M"}[op]
        if (sym == "M") != (line == mul) and add != mul:
            return None  # an add on the multiply's line or the reverse: not the pair read here
        blk["word"].append(sym)
        blk["preds"].add((neg or "") + pred if pred else blk["guard"])
    shape = []
    for blk in blocks:
        w = blk["word"]
        if not w:
            continue
        na, nf, nm = w.count("A"), w.count("F"), w.count("M")
        if na != nm or nf % na or w[0] != "A" or w[-1] != "M":
            return None
        shape.append((nf // na + 1, blk["loop"], blk["preds"]))
    if shape and shape[0][0] == 1 and not shape[0][1] and len(shape[0][2]) == 1:
        (p,) = shape[0][2]
        if p.startswith("!") and p[1:] in nonzero:
            shape = shape[1:]
    sizes = tuple(s for s, _, _ in shape)
    if sizes not in READ_UNROLLS or not shape[0][1] or not shape[-1][1] or any(lp for _, lp, _ in shape[1:-1]):
        return None
    return sizes


def unrolled_position(i: int, n: int, unroll: tuple[int, ...]) -> int:
    """Iteration ``i``'s place (0: first) in its unrolled block, of a loop of ``n`` iterations that ptxas unrolled
    as ``unroll`` (:func:`ptxas_unrolled`): the main loop's blocks while ``unroll[0]`` remain, then each smaller
    block where that many remain. Iteration ``i``'s add is contracted with iteration ``i - 1``'s multiply where
    this is not 0."""
    if not 0 <= i < n:
        raise ValueError(f"unrolled_position: iteration {i} of a loop of {n}")
    main = n // unroll[0] * unroll[0]
    if i < main:
        return i % unroll[0]
    j, left = i - main, n - main
    for s in unroll[1:]:
        if left >= s:
            if j < s:
                return j
            j, left = j - s, left - s
    raise ValueError(f"unrolled_position: blocks {unroll} do not cover {n} iterations")


_DIV_FULL = re.compile(r"^\s*(?:@!?%p\d+\s+)?div\.full\.f32\s+(%r\d+),", re.M)
_ADD_SUB = re.compile(r"^\s*(?:@!?%p\d+\s+)?(?:add|sub)\.f32\s+%r\d+,\s*(%r\d+),\s*(%r\d+);")
_ADD_SUB_ANY = re.compile(r"^\s*(?:@!?%p\d+\s+)?(?:add|sub)\.f32\s+%r\d+,\s*(%r\d+),\s*(%r\d+);", re.M)
_MUL_DEST = re.compile(r"^\s*(?:@!?%p\d+\s+)?mul\.f32\s+(%r\d+),")


#: PTX instructions whose sm90 SASS expansion holds an FFMA of its own: a line with one says nothing
_FFMA_EXPANSIONS = re.compile(r"^\s*(?:@!?%p\d+\s+)?(?:ex2|lg2|sin|cos|tanh|div\.rn|div\.approx|rcp\.rn|sqrt\.rn)\.",
                              re.M)


def ptxas_quotient_lines(cubin: bytes, ptx: str, tool: str | None = None) -> set[tuple[str, int]]:
    """Source lines where ptxas contracted a ``div.full.f32``'s closing multiply into the add or subtract that
    reads the quotient: the line's PTX has an ``add``/``sub.f32`` (no ``.rn``) reading a ``div.full.f32`` result,
    no ``mul.f32`` and no instruction whose own expansion holds an FFMA, and its SASS (``nvdisasm -g``) holds more
    FFMAs than its PTX has ``fma``.

    Why: ``div.full.f32`` expands in SASS to range scaling, ``MUFU.RCP`` and one ``FMUL`` (sm90;
    :mod:`harness.interp.approx_math`), and ptxas contracts that ``FMUL`` with a following ``FADD`` like any
    other: layernorm's ``x - tl.sum(x) / N`` becomes ``FFMA(-sum', rcp(N'), x)`` and ``var + eps`` with
    ``var = tl.sum(d * d) / N`` becomes ``FFMA(rcp(N'), sumsq', eps)`` (SASS of Triton 3.6.0 and 3.9.0, sm90;
    measured on an H100: ``tests/lowering`` layernorm at N = 1000, where the reciprocal is inexact). One rounding
    of a known product: modelled, unlike a multiply ptxas contracts. Empty when no ``nvdisasm``."""
    quotients = set(_DIV_FULL.findall(ptx))
    if not quotients or not isinstance(cubin, (bytes, bytearray)):
        return set()
    tool = tool or nvdisasm()
    if tool is None:
        return set()
    # a multiply spoils its line only where an add or subtract reads it (a pair ptxas could contract): one whose
    # product only an fma reads (a sum of squares' first element, on the same source line as `/ N + eps`) cannot
    added = {r for m in _ADD_SUB_ANY.finditer(ptx) for r in m.groups()}
    reads: set[tuple[str, int]] = set()
    spoiled: set[tuple[str, int]] = set()
    fmas: dict[tuple[str, int], int] = {}
    for where, ln in _located(ptx):
        a = _ADD_SUB.match(ln)
        mul = _MUL_DEST.match(ln)
        if a and (a.group(1) in quotients or a.group(2) in quotients):
            reads.add(where)
        elif (mul and mul.group(1) in added) or _FFMA_EXPANSIONS.match(ln):
            spoiled.add(where)
        elif re.match(r"^\s*(?:@!?%p\d+\s+)?fma\.", ln):
            fmas[where] = fmas.get(where, 0) + 1
    if not reads - spoiled:
        return set()
    sass = _sass_lines(bytes(cubin), tool)
    return {w for w in reads - spoiled if sass.get(w, []).count("FFMA") > fmas.get(w, 0)}
