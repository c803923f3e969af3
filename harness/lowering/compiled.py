"""The compiled kernel of a launch and what :mod:`harness.lowering` reads from it, cached in memory and on disk.

Why here: the facts (which pairs fused, each reduction's and scan's layout and order) belong to one (kernel,
signature, constexprs, ``num_warps``, arch, installed Triton); launch capture already compiles launches through
:func:`harness.compile.matrix.compile_matrix` (its per-process cache) and keys its disk cache with
:func:`harness.compile.disk_cache.cache_key`. :func:`lowering_for` compiles through the same path, keeps the
facts as JSON beside capture's outcomes (``<cache_dir>/lowering/``), so a warm rerun compiles nothing. A kernel
that does not compile for the target gives a :class:`KernelLowering` with ``error`` set: the caller says so once
and keeps the interpreter's own behaviour.

Positions are the interpreter's (:func:`harness.lowering.sites.node_key`): ``(file, line, absolute column)`` of
the ``BinOp`` / ``AugAssign`` / ``Call`` node.

The launch must be compiled as Triton's JIT specializes it on the GPU (:func:`specialize`): a pointer whose
address is a multiple of 16 and an integer that is are compiled as divisible by 16 (``tt.divisibility``), which
lets loads vectorize and so changes the layout (``sizePerThread`` 1 → 4 for an fp32 row) and with it the whole
reduction order; an integer equal to 1 becomes the constexpr 1.

Public API: :class:`Reduction`, :class:`Scan`, :class:`Fused`, :class:`Carried`, :class:`KernelLowering`,
:class:`Specialization`, :func:`specialize`, :func:`lowering_for`, :func:`facts_from_asm`, :func:`relocator`,
:func:`cached_facts` (the cache, for other facts of the same compiled kernel: :mod:`harness.lowering.stores`).
"""

from __future__ import annotations

import inspect
import json
import os
import re
import sys
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from harness.lowering import fma as fma_mod
from harness.lowering import ttgir
from harness.lowering.layout import AxisBits, axis_bits
from harness.lowering.reduce_order import rule_for
from harness.lowering.sites import node_key

__all__ = ["FORMAT", "Carried", "Fused", "KernelLowering", "Reduction", "Scan", "Specialization", "cached_facts",
           "facts_from_asm", "lowering_for", "relocator", "specialize"]

#: Bumped when what a lowering cache entry holds changes.
#: 7: Reduction.reorder; 8: error says whether the kernel compiled; 9: sides; 10: thread_fma; 11: quotient lines
#: beside a sum's own multiply; 12: carried; 13: a reduction or scan in a @jit helper at the helper's own line;
#: 14: an fp32 product read out of a vector by extractelement fuses on sm90; 15: a vector tl.fma counts its lanes;
#: 16: keyed by the kernel's content, in an entry that names the files it was read with (:func:`cached_facts`)
FORMAT = "harness-lowering-16"

Key = tuple[str, int, int]


@dataclass(frozen=True)
class Reduction:
    """A ``tt.reduce`` at ``where``: ``kind`` (add/max/min/argmax/argmin, or the combine ops when none of these),
    ``axis``, element type, ``bits`` (None when its layout is not modelled: ``error`` says why)."""

    where: Key | None
    kind: str
    axis: int
    elem: str
    bits: AxisBits | None
    error: str = ""
    #: where the operand came through a ``tt.reshape ... allow_reorder`` from another layout: the element whose
    #: registers the op combines as its position ``i`` is the source's element ``reorder[i]``
    #: (:func:`reorder_of`); ``None`` otherwise
    reorder: tuple[int, ...] | None = None
    #: for a sum of products in an in-thread tree (Triton 3.9): per first-level register pair, which product the
    #: compiled fma folds (0: the pair's first register's, 1: its second's; :func:`harness.lowering.fma.pair_sides`);
    #: ``None`` where the PTX does not say for this reduction alone
    sides: tuple[int, ...] | None = None
    #: for a sum of products: which of the in-thread adds (one per register after the first, in order) the
    #: compiled kernel contracts with the new register's product (the first: with register 0's), read from its
    #: LLIR (:func:`harness.lowering.fma.thread_chains`); ``None`` where it has none or its chains disagree
    thread_fma: tuple[bool, ...] | None = None


@dataclass(frozen=True)
class Scan:
    where: Key | None
    kind: str
    axis: int
    elem: str
    bits: AxisBits | None
    reverse: bool = False
    error: str = ""


@dataclass(frozen=True)
class Fused:
    """A multiply at ``mul`` whose product the add at ``add`` takes as operand ``operand`` (0 left, 1 right) and
    which the compiled kernel computes as one fma (``op``: fadd or fsub; ``elem``: float/bfloat/half)."""

    mul: Key | None
    add: Key | None
    op: str
    operand: int
    elem: str
    count: int


@dataclass(frozen=True)
class Carried:
    """A multiply at ``mul`` whose product a loop carries into the add at ``add`` of its next iteration (as operand
    ``operand``; ``op``: fadd or fsub), which ptxas contracts where unrolling puts the two in one block:
    ``unroll`` is the iterations per unrolled block (:func:`harness.lowering.fma.ptxas_unrolled`), iteration ``i``'s
    add is one fma with iteration ``i - 1``'s multiply where :func:`harness.lowering.fma.unrolled_position` is not
    0."""

    mul: Key | None
    add: Key | None
    op: str
    operand: int
    unroll: tuple[int, ...]


@dataclass(frozen=True)
class KernelLowering:
    triton: str
    arch: str
    num_warps: int
    reductions: tuple[Reduction, ...] = ()
    scans: tuple[Scan, ...] = ()
    fused: tuple[Fused, ...] = ()
    error: str = ""
    sources: dict[str, str] = field(default_factory=dict)
    #: source lines (file, line) where ptxas made an FFMA the PTX does not have
    #: (:func:`harness.lowering.fma.ptxas_contracted_lines`): not modelled, the caller warns there.
    ptxas_lines: tuple[tuple[str, int], ...] = ()
    #: of those, the lines where the FFMA is a ``div.full`` quotient's multiply contracted into the add that reads
    #: it (:func:`harness.lowering.fma.ptxas_quotient_lines`): modelled
    quotient_lines: tuple[tuple[str, int], ...] = ()
    #: of those, the loop-carried pairs whose unrolling was read from the SASS: modelled
    carried: tuple[Carried, ...] = ()

    def unmodelled_ptxas_lines(self) -> tuple[tuple[str, int], ...]:
        """:attr:`ptxas_lines` that neither :attr:`quotient_lines` nor :attr:`carried` explains."""
        known = set(self.quotient_lines) | {(c.add[0], c.add[1]) for c in self.carried if c.add is not None}
        return tuple(w for w in self.ptxas_lines if w not in known)


_KIND = {"arith.addf": "add", "arith.mulf": "mul", "arith.maxnumf": "max", "arith.minnumf": "min",
         "arith.addi": "add", "arith.muli": "mul"}


def _kind(combine: tuple[str, ...]) -> str:
    if len(combine) == 1 and combine[0] in _KIND:
        return _KIND[combine[0]]
    if "arith.cmpf ogt" in combine and "arith.select" in combine:
        return "argmax"
    if "arith.cmpf olt" in combine and "arith.select" in combine:
        return "argmin"
    return "+".join(combine)


def _key(pos: ttgir.Position | None, kind: str, version: str) -> Key | None:
    if pos is None:
        return None
    k = node_key(pos.file, pos.line, pos.col, kind, version)
    return None if k is None else (pos.file, k[0], k[1])


def _where(w: tuple[str, int, int] | None, kind: str, version: str) -> Key | None:
    if w is None:
        return None
    k = node_key(w[0], w[1], w[2], kind, version)
    return None if k is None else (w[0], k[0], k[1])


def relocator(source: str) -> Callable[[str], str]:
    """Where a source path of a compiled kernel is in this checkout. Why: Triton's own cache keys a kernel by its
    source text and starting line, not its file, so a kernel compiled in another checkout of the same file comes
    back with that checkout's paths (lines and columns are right). A path is moved to the loaded file (the
    kernel's ``source`` first, then any module's) sharing the longest tail of path components with it."""
    src = os.path.abspath(source) if source else ""
    memo: dict[str, str] = {}

    def move(path: str) -> str:
        if path in memo:
            return memo[path]
        p = os.path.abspath(path)
        best, score = p, 0
        if p != src:
            files = [src] + [f for m in list(sys.modules.values()) for f in [getattr(m, "__file__", None)]
                             if isinstance(f, str)]
            for c in files:
                k = _tail(os.path.abspath(c), p) if c else 0
                if k > score:
                    best, score = os.path.abspath(c), k
        memo[path] = best if score else p
        return memo[path]

    return move


def facts_from_asm(asm: Any, version: str, arch: str, num_warps: int, fp_fusion: bool = True,
                   source: str = "") -> KernelLowering:
    """The facts of one compiled kernel (``asm``: its stages by name, ``ttgir``/``llir``/``ptx``). With
    ``fp_fusion`` off (the compile's ``enable_fp_fusion``) nothing is contracted: LLVM keeps ``mul.rn``/``add.rn``
    and Triton passes ``--fmad=false`` to ptxas. ``source``: the kernel's file, where positions are moved
    (:func:`relocator`) when the compiled kernel names another checkout's."""
    move = relocator(source) if source else (lambda p: p)
    mod = ttgir.parse(asm["ttgir"])
    func_col = mod.func_loc[2] if mod.func_loc else 0
    reds: list[Reduction] = []
    scans: list[Scan] = []
    chains: dict[Key | None, list[tuple[bool, ...]]] = {}
    if fp_fusion:
        for w, found in fma_mod.thread_chains(asm["llir"], arch).items():
            chains.setdefault(_where(None if w is None else (move(w[0]), w[1], w[2]), "add", version), []).extend(found)
    for op in mod.ops:
        raw = None if op.position is None else ttgir.Position(move(op.position.file), op.position.line,
                                                                op.position.col + func_col)
        t = op.operands[0]
        try:
            bits, err = axis_bits(t.layout, t.shape, op.axis, mod.layouts), ""
        except ValueError as e:
            bits, err = None, str(e)
        if op.kind == "reduce":
            reorder = None
            if op.reordered_from is not None and bits is not None:
                try:
                    reorder = reorder_of(op.reordered_from, t.layout, t.shape, op.axis, mod.layouts)
                except ValueError as e:
                    bits, err = None, f"its operand is a tt.reshape allow_reorder from {op.reordered_from}: {e}"
            where = _key(raw, "call", version)
            reds.append(Reduction(where, _kind(op.combine), op.axis, t.elem, bits, err, reorder,
                                  thread_fma=_thread_fma(chains.get(where, []) if where is not None else [], bits)))
        else:
            scans.append(Scan(_key(raw, "call", version), _kind(op.combine), op.axis, t.elem, bits, op.reverse, err))
    sites_ = fma_mod.fused_sites(asm["llir"], asm.get("ptx"), arch) if fp_fusion else []
    def moved(w: tuple[str, int, int] | None) -> tuple[str, int, int] | None:
        return None if w is None else (move(w[0]), w[1], w[2])

    fused = tuple(Fused(_where(moved(s.mul), "mul", version), _where(moved(s.add), "add", version), s.op, s.operand,
                        s.elem, s.count) for s in sites_)
    reds = _with_sides(reds, fused, asm.get("ptx"), version)
    cubin = asm.get("cubin")
    sass = fp_fusion and isinstance(cubin, (bytes, bytearray)) and "ptx" in asm  # fusion on, SASS readable
    raw_ptxas = fma_mod.ptxas_contracted_lines(cubin, asm["ptx"]) if sass else set()
    quotients = fma_mod.ptxas_quotient_lines(cubin, asm["ptx"]) if sass else set()
    carried = []
    for c in fma_mod.carried_pairs(asm["llir"]) if raw_ptxas else ():
        if c.add is None or c.mul is None or (c.add[0], c.add[1]) not in raw_ptxas:
            continue
        unroll = fma_mod.ptxas_unrolled(cubin, (c.add[0], c.add[1]), (c.mul[0], c.mul[1]))
        if unroll is not None:
            carried.append(Carried(_where(moved(c.mul), "mul", version), _where(moved(c.add), "add", version), c.op,
                                   c.operand, unroll))
    return KernelLowering(version, arch, num_warps, tuple(reds), tuple(scans), fused,
                          sources={"reduce": rule_for(version).source, "fma": fma_mod.RULE_SOURCE},
                          ptxas_lines=tuple(sorted((move(f), n) for f, n in raw_ptxas)),
                          quotient_lines=tuple(sorted((move(f), n) for f, n in quotients)),
                          carried=tuple(carried))


def _with_sides(reds: list[Reduction], fused: tuple[Fused, ...], ptx: str | None, version: str) -> list[Reduction]:
    """``reds`` with :attr:`Reduction.sides` set where it is unambiguous: one reduction of the kernel sums
    products in an in-thread tree, and the PTX's contracted product pairs are exactly its first level (any other
    pair in the kernel, an elementwise ``a * b + c * d``, leaves it unset)."""
    if not ptx or rule_for(version).thread == "sequential":
        return reds
    adds = {f.add for f in fused if f.mul is not None}
    summed = [i for i, r in enumerate(reds) if r.kind == "add" and r.where in adds and r.bits is not None]
    if len(summed) != 1:
        return reds
    i = summed[0]
    sides = fma_mod.pair_sides(ptx)
    if len(sides) != (1 << len(reds[i].bits.registers)) // 2:
        return reds
    return [replace(r, sides=sides) if k == i else r for k, r in enumerate(reds)]


def _thread_fma(chains: list[tuple[bool, ...]], bits: AxisBits | None) -> tuple[bool, ...] | None:
    """The in-thread adds' contraction pattern of a reduction: the first ``registers - 1`` adds of the chains at
    its position that contract any of them (the others are the warp and shared-memory stages', or no sum of
    products); one pattern when all such chains agree, else ``None``."""
    steps = (1 << len(bits.registers)) - 1 if bits is not None else 0
    found = {c[:steps] for c in chains if len(c) >= steps and any(c[:steps])}
    return next(iter(found)) if steps and len(found) == 1 else None


def reorder_of(src: str, dst: str, shape: tuple[int, ...], axis: int, aliases: dict[str, str]) -> tuple[int, ...]:
    """For a 1-D ``tt.reshape ... allow_reorder`` from layout ``src`` to ``dst``: ``perm`` with ``perm[i]`` the
    source element the reshaped tensor holds at position ``i``. Why: Triton lowers such a reshape by keeping every
    thread's registers and renaming them (``ReshapeOpConversion``: unpack, repack, same order; Triton 3.6 and 3.9),
    so register ``r`` of lane ``l`` of warp ``w`` is ``src``'s element there and ``dst``'s position there.
    ``ValueError`` where the two layouts do not hold the same number of distinct elements per thread."""
    if len(shape) != 1:
        raise ValueError(f"a reshape to {len(shape)}-D is not modelled")
    a, b = axis_bits(src, shape, axis, aliases), axis_bits(dst, shape, axis, aliases)
    if len(a.registers) != len(b.registers) or a.size != b.size or a.size != shape[0]:
        raise ValueError(f"the layouts hold {1 << len(a.registers)} and {1 << len(b.registers)} elements per thread")

    def at(bits: AxisBits, r: int, lane: int, warp: int) -> int:
        p = sum(s for k, s in enumerate(bits.registers) if r >> k & 1)
        p += sum(s for bit, s in bits.lanes if lane >> bit & 1)
        return p + sum(s for bit, s in bits.warps if warp >> bit & 1)

    lane_bits = max([bit + 1 for bit, _ in a.lanes + b.lanes] or [0])
    warp_bits = max([bit + 1 for bit, _ in a.warps + b.warps] or [0])
    perm = [-1] * shape[0]
    for r in range(1 << len(a.registers)):
        for lane in range(1 << lane_bits):
            for warp in range(1 << warp_bits):
                perm[at(b, r, lane, warp)] = at(a, r, lane, warp)
    if -1 in perm or sorted(perm) != list(range(shape[0])):
        raise ValueError("the two layouts do not map the same elements one to one")
    return tuple(perm)


def _dump(k: KernelLowering) -> dict[str, Any]:
    return {"format": FORMAT, **asdict(k)}


def _load(d: dict[str, Any], move: Callable[[str], str]) -> KernelLowering | None:
    """The facts :func:`_dump` wrote, every position's file passed through ``move`` (:func:`cached_facts`);
    ``None`` for an entry of another format."""
    try:
        d = dict(d)
        if d.pop("format", None) != FORMAT:
            return None

        def bits(b: Any) -> AxisBits | None:
            return None if b is None else AxisBits(b["size"], tuple(b["registers"]),
                                                     tuple(map(tuple, b["lanes"])), tuple(map(tuple, b["warps"])),
                                                     bool(b.get("first_register_on_axis", True)))

        def key(w: Any) -> Key | None:
            return None if w is None else (move(str(w[0])), int(w[1]), int(w[2]))

        return KernelLowering(
            d["triton"], d["arch"], d["num_warps"],
            tuple(Reduction(key(r["where"]), r["kind"], r["axis"], r["elem"], bits(r["bits"]), r["error"],
                            None if r.get("reorder") is None else tuple(int(i) for i in r["reorder"]),
                            None if r.get("sides") is None else tuple(int(i) for i in r["sides"]),
                            thread_fma=None if r.get("thread_fma") is None else tuple(bool(i) for i in r["thread_fma"]))
                  for r in d["reductions"]),
            tuple(Scan(key(s["where"]), s["kind"], s["axis"], s["elem"], bits(s["bits"]), s["reverse"], s["error"])
                  for s in d["scans"]),
            tuple(Fused(key(f["mul"]), key(f["add"]), f["op"], f["operand"], f["elem"], f["count"])
                  for f in d["fused"]),
            d["error"], d["sources"], tuple((move(str(f)), int(n)) for f, n in d.get("ptxas_lines", ())),
            tuple((move(str(f)), int(n)) for f, n in d.get("quotient_lines", ())),
            tuple(Carried(key(c["mul"]), key(c["add"]), c["op"], int(c["operand"]), tuple(int(s) for s in c["unroll"]))
                  for c in d.get("carried", ())))
    except (ValueError, KeyError, TypeError):
        return None


@dataclass(frozen=True)
class Specialization:
    """What :func:`lowering_for` takes for one launch: the runtime arguments' types, the constexprs (the
    kernel's own and the integers equal to 1), the arguments compiled as divisible by 16, the launch options."""

    signature: dict[str, str]
    constexprs: dict[str, Any]
    divisible: frozenset[str]
    num_warps: int = 4
    fp_fusion: bool | None = None
    #: the other launch options the launch passed (``num_stages``, ``num_ctas``, ``maxnreg``): the GPU's JIT
    #: compiles with them
    options: dict[str, int] = field(default_factory=dict)


def specialize(fn: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Specialization:
    """The :class:`Specialization` of ``fn[grid](*args, **kwargs)`` as Triton 3.6 / 3.9's JIT makes it
    (``BaseBackend.get_tensor_specialization``: ``data_ptr() % 16 == 0``; ``get_int_specialization``:
    ``value % 16 == 0``; ``specialize_impl``: an int equal to 1 is the constexpr 1; a parameter's
    ``do_not_specialize`` / ``do_not_specialize_on_alignment`` turn these off). The types come from
    :func:`harness.compile.launches.launch_from_args`; ``ValueError`` for an argument it cannot type."""
    from harness.compile.launches import launch_from_args
    from harness.interp.jit import as_jit

    launch = launch_from_args(fn, args, kwargs)
    jit = as_jit(fn)
    params = {p.name: p for p in jit.params}
    bound = inspect.signature(jit.fn).bind(*args, **{k: v for k, v in kwargs.items() if k in params or k not in
                                                     ("num_warps", "num_stages", "num_ctas", "maxnreg",
                                                      "enable_fp_fusion")})
    sig = dict(launch.signature)
    consts = dict(launch.constexprs)
    divisible = set()
    for name, ty in list(sig.items()):
        p = params.get(name)
        spec = not getattr(p, "do_not_specialize", False)
        align = not getattr(p, "do_not_specialize_on_alignment", False)
        v = bound.arguments.get(name)
        if ty.startswith("*"):
            if align and hasattr(v, "data_ptr") and v.data_ptr() % 16 == 0:
                divisible.add(name)
        elif ty[0] in "iu" and ty != "i1" and isinstance(v, int) and not isinstance(v, bool):
            if spec and v == 1:
                consts[name] = 1
                del sig[name]
            elif spec and align and v % 16 == 0:
                divisible.add(name)
    opts = dict(launch.options)
    fusion = kwargs.get("enable_fp_fusion")
    return Specialization(sig, consts, frozenset(divisible), int(opts.get("num_warps", 4)),
                          None if fusion is None else bool(fusion),
                          {k: int(v) for k, v in opts.items() if k != "num_warps"})


_MEMO: dict[tuple[Any, ...], Any] = {}


def _tail(a: str, b: str) -> int:
    """How many trailing path components ``a`` and ``b`` share."""
    pa, pb = a.split(os.sep), b.split(os.sep)
    k = 0
    while k < min(len(pa), len(pb)) and pa[-1 - k] == pb[-1 - k]:
        k += 1
    return k


def _files(fn: Any, source: str) -> dict[str, str]:
    """The files a kernel's facts can place positions in, by absolute path, with their content hashes
    (:func:`harness.compile.disk_cache.source_hash`): its own file first, then its ``@jit`` helpers'
    (:func:`harness.compile.disk_cache.helper_files`)."""
    from harness.compile.disk_cache import helper_files, source_hash

    out = {os.path.abspath(source): source_hash(source)}
    for path in helper_files(fn):
        out.setdefault(os.path.abspath(path), source_hash(path))
    return out


def _mover(stored_source: str, stored: Mapping[str, str], source: str,
           here: Mapping[str, str]) -> Callable[[str], str] | None:
    """How a cache entry's positions move to this checkout: ``stored`` (absolute path → content hash of the files
    the entry was read with, ``stored_source`` the kernel's) onto ``here`` (the same for this checkout, ``source``
    the kernel's). The kernel's file goes to the kernel's file; a helper's to this checkout's file of the same
    content (of several, the one sharing the longest path tail); any other path as :func:`relocator` moves it.
    ``None`` where the kernel's content differs: the entry is not this kernel's."""
    if stored.get(stored_source) != here.get(source):
        return None
    exact = {stored_source: source}
    for path, digest in stored.items():
        same = [p for p, d in here.items() if d == digest and p != source]
        if path not in exact and same:
            exact[path] = path if path in same else max(same, key=lambda p, path=path: _tail(p, path))
    other = relocator(source)
    return lambda p: exact[p] if p in exact else other(p)


def _moved_error(entry: Mapping[str, Any], move: Callable[[str], str]) -> Any:
    """A cache entry's facts with the paths in its compiler message (``error``: "does not compile (...
    /path/k.py:57:13: error ...)") moved to this checkout as ``move`` moves positions: another checkout's warm
    cache must not name files of a directory this one may not have."""
    facts = entry["facts"]
    error = facts.get("error") if isinstance(facts, Mapping) else None
    paths = [p for p in {entry["source"], *entry["files"]} if isinstance(p, str) and p]
    if not isinstance(error, str) or not error or not paths:
        return facts
    pattern = re.compile("|".join(re.escape(p) for p in sorted(paths, key=len, reverse=True)))
    return {**facts, "error": pattern.sub(lambda m: move(m.group(0)), error)}


def cached_facts(fn: Any, signature: dict[str, str], constexprs: dict[str, Any] | None, *, num_warps: int,
                 arch: str, fp_fusion: bool | None, divisible: frozenset[str] | set[str] | tuple[str, ...],
                 directory: Path | None, kind: str, read: Callable[[dict[str, str], str, str, bool], Any],
                 failed: Callable[[str, str], Any], dump: Callable[[Any], dict[str, Any]],
                 load: Callable[[dict[str, Any], Callable[[str], str]], Any],
                 keep_errors: bool = True, options: Mapping[str, int] | None = None) -> Any:
    """What ``read(asm, triton_version, source_file, fp_fusion_on)`` reads from one launch configuration's
    compiled kernel, from memory, else the disk cache (``<cache_dir>/<kind>/``, as ``dump`` / ``load`` write and
    read it; ``load`` gives ``None`` for an entry of another format), else compiled; ``failed(triton_version,
    why)`` when it does not compile or ``read`` raises ``ValueError`` / ``KeyError``. The key is
    launch capture's (:func:`harness.compile.disk_cache.cache_key`: the content of the kernel's file and of its
    ``@jit`` helpers', never their paths or module names) plus the options that change the lowering, so another
    checkout of the same files reads the entry too: the entry names the files it was read with, and ``load`` gets
    ``move``, which takes each position's file to this checkout's (:func:`_mover`). In memory, the facts are kept
    per checkout (two checkouts of one kernel in one process each get their own positions).
    ``keep_errors=False``: facts with ``error`` set stay in memory only (a compile that failed for a reason of the
    process, e.g. ``triton.language`` left patched by a script without the interpreter fixes, is tried again by
    the next process). ``options``: the launch's other options (``num_stages``...), compiled with as the GPU's JIT
    does; launch capture then takes this compile as its own of the launch
    (:func:`harness.compile.cache.specialized`). The compile's ptxas runs under the default budget
    (:mod:`harness.compile.budget`); past it the facts say so and stay in memory only."""
    from harness.compile.budget import DEFAULT_SECONDS, ptxas_budget
    from harness.compile.disk_cache import cache_dir, cache_key
    from harness.compile.errors import BUDGET, error_kind
    from harness.compile.launches import Launch
    from harness.compile.matrix import compile_matrix
    from harness.interp.jit import as_jit
    from harness.versions import triton_version

    if not isinstance(num_warps, int) or num_warps < 1 or num_warps & (num_warps - 1):
        raise ValueError(f"{kind}_for: num_warps must be a power of two, got {num_warps!r}")
    consts = dict(constexprs or {})
    pyfn = as_jit(fn).fn
    options: dict[str, Any] = {**dict(options or {}), "num_warps": num_warps}
    if fp_fusion is not None:
        options["enable_fp_fusion"] = bool(fp_fusion)
    default = os.environ.get("TRITON_DEFAULT_FP_FUSION", "") + os.environ.get("TRITON_FORCE_DISABLE_FP_FUSION", "")
    source = inspect.getsourcefile(pyfn) or ""
    here = _files(fn, source)
    # the qualified name without the module: a copy of the file imported under another name is the same kernel
    launch = Launch(pyfn.__qualname__, source, tuple(signature.items()), tuple(consts.items()),
                    tuple(sorted(options.items())) + (("fp_fusion_env", default),
                                                      ("divisible", ",".join(sorted(divisible)))), fn)
    key = cache_key(launch, arch)
    memo = (kind, key, tuple(here))
    if memo in _MEMO:
        return _MEMO[memo]
    d = (directory or cache_dir()) / kind / key[:2]
    path = d / f"{key}.json"
    # a file that cannot be read has no content to key by: its facts stay in memory
    on_disk = bool(source) and "?" not in here.values()
    hit = None
    try:
        entry = json.loads(path.read_text()) if on_disk else None
        move = None if entry is None else _mover(entry["source"], entry["files"], os.path.abspath(source), here)
        hit = None if move is None else load(_moved_error(entry, move), move)
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        hit = None
    if hit is None:
        # bounded as capture's compiles are: Triton's FMA fallback (an fp64 tl.dot) kept ptxas busy for over 10
        # minutes per launch; past the budget the launch keeps the interpreter's own behaviour, with the warning
        with ptxas_budget(DEFAULT_SECONDS):
            res = compile_matrix(fn, signature=signature, constexprs=consts, targets=[arch], options=options,
                                 divisible=divisible)[arch]
        over_budget = isinstance(res, BaseException) and error_kind(res) == BUDGET
        meta = getattr(getattr(res, "kernel", None), "metadata", None)
        fused_on = bool(getattr(meta, "enable_fp_fusion", True if fp_fusion is None else fp_fusion))
        version = triton_version()
        if over_budget:
            hit = failed(version, f"could not be compiled: {res}")
        elif isinstance(res, BaseException):
            hit = failed(version, f"does not compile ({type(res).__name__}: {str(res)[:300]})")
        else:
            try:
                hit = read(res.asm, version, source, fused_on)
            except (ValueError, KeyError) as e:
                hit = failed(version, f"compiles, but its code does not give the facts ({type(e).__name__}: {e})")
        try:
            if not on_disk or over_budget or (getattr(hit, "error", "") and not keep_errors):
                raise OSError("not kept")  # a later run may find ptxas faster; a write failure costs a recompile
            d.mkdir(parents=True, exist_ok=True)
            tmp = path.with_suffix(f".tmp{os.getpid()}")
            tmp.write_text(json.dumps({"source": os.path.abspath(source), "files": here, "facts": dump(hit)}))
            os.replace(tmp, path)
        except OSError:
            pass
    _MEMO[memo] = hit
    return hit


def lowering_for(fn: Any, signature: dict[str, str], constexprs: dict[str, Any] | None = None, *,
                 num_warps: int = 4, arch: str = "sm90", fp_fusion: bool | None = None,
                 divisible: frozenset[str] | set[str] | tuple[str, ...] = (),
                 directory: Path | None = None, options: Mapping[str, int] | None = None) -> KernelLowering:
    """The :class:`KernelLowering` of ``fn`` (a ``@triton.jit`` kernel, interpreted or not) for one launch
    configuration, from memory, else the disk cache, else compiled (``error`` set when it does not compile).

    ``fp_fusion``: the launch's ``enable_fp_fusion`` keyword, ``None`` when it passed none (then Triton's default
    decides: ``TRITON_DEFAULT_FP_FUSION``, on unless set to 0 through 3.9; the compiled kernel's metadata is read
    back, so the facts follow whatever Triton chose). ``divisible``: the arguments Triton's JIT compiles as
    divisible by 16 for this launch (:func:`specialize` gives all of these from the launch's arguments).
    ``options``: the launch's other options (:func:`cached_facts`)."""
    return cached_facts(fn, signature, constexprs, num_warps=num_warps, arch=arch, fp_fusion=fp_fusion,
                        divisible=divisible, directory=directory, kind="lowering",
                        read=lambda asm, version, source, fused_on: facts_from_asm(asm, version, arch, num_warps,
                                                                                   fused_on, source=source),
                        failed=lambda version, why: KernelLowering(version, arch, num_warps, error=why),
                        dump=_dump, load=_load, options=options)
