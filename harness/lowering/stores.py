"""The stores of a compiled kernel: which GPU thread stores each element of a ``tl.store``, and whether a CTA-wide
barrier lies between two stores.

Why: the interpreter runs one program's stores in program order, so a byte two of its stores write always holds
the later value there. On the GPU the two stores are made by the threads their layouts give the element to, and
two different threads are ordered only by a barrier between the stores (PTX ISA, "bar, barrier": the memory
accesses a thread requested before ``bar.sync`` are performed relative to every thread of the CTA past it). The
sanitizer (:mod:`harness.sanitize.races`) asks this module about the stores of one program that overlap.

What is read, per Triton version (3.6 and 3.9 write both the same way):

- TTGIR: each ``tt.store``, its pointer operand's shape and layout (:func:`harness.lowering.layout.bases`) and its
  ``loc`` (the innermost position: a store inside a ``@jit`` helper is the helper's line, as the interpreter sees
  it);
- PTX: the ``st.global`` instructions under the ``.loc`` of each store (the same line and column as the TTGIR
  ``loc``), CTA-wide barriers (``bar.sync`` / ``barrier.sync`` with a barrier id only, unpredicated), what makes
  the order of the text not the order of execution (basic-block labels, branches, calls, returns: ``flow``), and
  synchronization whose reach is not the whole CTA or not known (predicated or counted barriers,
  ``bar.warp.sync``, ``mbarrier``, ``bar.arrive``, ``bar.red``: ``syncs``). ``bar.warp.sync -1`` orders the
  memory accesses of the warp's threads (PTX ISA, ``bar.warp.sync``), so in a one-warp CTA it is a CTA barrier.

The element → thread rule is Triton's store lowering (``LoadStoreOpToLLVM.cpp``, 3.6 and 3.9): a layout's element
is held by every (register, lane, warp) whose index the linear layout maps to it, and a bit whose basis is zero
holds duplicates; ``emitRedundantThreadPredicate`` lets only the lane and warp with those bits 0 store (and one
register). So each element has one storing thread: lane and warp from the non-zero bases.

The barrier rule (:meth:`StoreFacts.ordered`), sound for straight-line code and silent elsewhere: two stores that
are each one TTGIR op, neither inside a PTX loop (a branch back to a label before it), whose PTX instructions do
not interleave, with no ``flow`` line between the last instruction of the first and the first of the second, are
ordered when a CTA barrier lies there, and unordered when neither a barrier nor one of the ``syncs`` does.
Anything else (a store in a loop, unrolled or not; a branch between; one source position with two TTGIR stores;
only a sync of unknown reach between) is not judged.

Public API: :class:`StoreSite`, :class:`StoreFacts`, :func:`facts_from_asm`, :func:`stores_for`,
:func:`thread_table`.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from harness.lowering import ttgir
from harness.lowering.compiled import cached_facts, relocator
from harness.lowering.layout import bases as layout_bases
from harness.lowering.sites import node_key

__all__ = ["FORMAT", "StoreFacts", "StoreSite", "facts_from_asm", "stores_for", "thread_table"]

#: Bumped when what a cache entry holds changes. 3: keyed by the kernel's content, positions moved on load
#: (:func:`harness.lowering.compiled.cached_facts`)
FORMAT = "harness-stores-3"

Key = tuple[str, int, int]


@dataclass(frozen=True)
class StoreSite:
    """One ``tt.store``: ``where`` in the interpreter's coordinates (``None`` when its position is unknown),
    the pointer tensor's ``shape`` (``()`` for a scalar store), its layout's ``bases``
    (:func:`harness.lowering.layout.bases`; ``None`` with ``error`` saying why), the PTX line indices of its
    first and last ``st.global`` (``-1`` when none is found), whether it is inside a PTX loop, and ``count``:
    how many TTGIR stores share its position."""

    where: Key | None
    shape: tuple[int, ...]
    bases: dict[str, list[list[int]]] | None
    error: str = ""
    first: int = -1
    last: int = -1
    looped: bool = False
    count: int = 1


@dataclass(frozen=True)
class StoreFacts:
    """The stores of one compiled kernel and what orders them: ``barriers``, ``flow``, ``syncs`` and
    ``warp_syncs`` are PTX line indices (a CTA-wide barrier; a label, branch, call or return; a sync of other or
    unknown reach; a ``bar.warp.sync -1``, also among ``syncs``). ``error``: why there are no facts (the kernel
    does not compile for the target, or its code is not read)."""

    triton: str
    arch: str
    num_warps: int
    threads_per_warp: int = 32
    sites: tuple[StoreSite, ...] = ()
    barriers: tuple[int, ...] = ()
    flow: tuple[int, ...] = ()
    syncs: tuple[int, ...] = ()
    warp_syncs: tuple[int, ...] = ()
    error: str = ""
    _by_where: dict[Key, StoreSite | None] = field(default_factory=dict, init=False, repr=False, compare=False)
    _tables: dict[int, np.ndarray | None] = field(default_factory=dict, init=False, repr=False, compare=False)

    def threads(self, site: StoreSite) -> np.ndarray | None:
        """:func:`thread_table` of one of this kernel's sites, computed once."""
        key = id(site)
        if key not in self._tables:
            self._tables[key] = thread_table(site, self.threads_per_warp)
        return self._tables[key]

    def site_at(self, where: Key | None) -> StoreSite | None:
        """The store at the interpreter's position ``where``; ``None`` where there is none, or where several
        share it with different shapes or layouts (a ``@jit`` helper's store reached from two calls)."""
        if not self._by_where and self.sites:
            for s in self.sites:
                if s.where is None:
                    continue
                seen = self._by_where.get(s.where, s)
                same = seen is not None and (seen.shape, seen.bases) == (s.shape, s.bases)
                self._by_where[s.where] = seen if same else None
        return self._by_where.get(where) if where is not None else None

    def ordered(self, a: StoreSite, b: StoreSite) -> bool | None:
        """Whether a CTA-wide barrier orders every thread's ``a`` before every thread's ``b`` (``a`` runs first):
        ``True``/``False`` where the rule of the module docstring judges, ``None`` where it does not."""
        if a.count != 1 or b.count != 1 or a.first < 0 or b.first < 0 or a.looped or b.looped:
            return None
        if a.last >= b.first:
            return None

        def between(lines: tuple[int, ...]) -> bool:
            return any(a.last < i < b.first for i in lines)

        if between(self.flow):
            return None
        if between(self.barriers) or (self.num_warps == 1 and between(self.warp_syncs)):
            return True
        return None if between(self.syncs) else False


def thread_table(site: StoreSite, threads_per_warp: int = 32) -> np.ndarray | None:
    """Per element of ``site``'s tensor (C order), the thread that stores it (``warp * threads_per_warp + lane``),
    or ``None`` where the layout does not map elements one to one onto its non-zero bases."""
    if site.bases is None:
        return None
    shape = site.shape
    if not shape:
        # a scalar store: lane 0 of warp 0 only (the redundant-thread rule; sm90 PTX of Triton 3.6 and 3.9 stores
        # under setp.eq tid.x, 0)
        return np.zeros(1, dtype=np.int64)
    lane_bits = threads_per_warp.bit_length() - 1
    live = [(kind, bit, v) for kind in ("register", "lane", "warp") for bit, v in enumerate(site.bases[kind])
            if any(v)]
    n = int(np.prod(shape))
    if len(live) > 24 or (1 << len(live)) != n or any(len(v) != len(shape) for _, _, v in live):
        return None
    combo = np.arange(n, dtype=np.int64)
    idx = [np.zeros(n, dtype=np.int64) for _ in shape]
    tid = np.zeros(n, dtype=np.int64)
    for k, (kind, bit, v) in enumerate(live):
        on = (combo >> k) & 1
        for d, x in enumerate(v):
            if x:
                idx[d] ^= on * x
        if kind == "lane":
            tid |= on << bit
        elif kind == "warp":
            tid |= on << (bit + lane_bits)
    if any(int(i.max()) >= s for i, s in zip(idx, shape, strict=True)):
        return None
    table = np.full(n, -1, dtype=np.int64)
    table[np.ravel_multi_index(tuple(idx), shape)] = tid
    return None if (table < 0).any() else table


_STORE = re.compile(r"^\s*tt\.store\s+[^:]*:\s*(.*?)\s+loc\((#loc\d*|\"[^\"]*\":\d+:\d+)\)\s*$")
_PTR_TENSOR = re.compile(r"^tensor<((?:\d+x)+)!tt\.ptr<\w+>,\s*(#[\w.]+)>$")
_PTR_SCALAR = re.compile(r"^!tt\.ptr<\w+>$")
_CALLSITE = re.compile(r"^callsite\((#loc\d*|.+?)\s+at\s+(#loc\d*|.+)\)$")
_NAMED = re.compile(r'^"[^"]*"\((#loc\d*|.*)\)$')
_FILELOC = re.compile(r'^"([^"]*)":(\d+):(\d+)$')

_PFILE = re.compile(r'^\s*\.file\s+(\d+)\s+"([^"]*)"(?:\s*,\s*"([^"]*)")?')
_PLOC = re.compile(r"^\s*\.loc\s+(\d+)\s+(\d+)\s+(\d+)")
_PLABEL = re.compile(r"^(\$L__BB\w+):")
_PBRA = re.compile(r"\bbra(?:\.uni)?\s+(\$L__BB\w+)")
_PSTORE = re.compile(r"^\s*(?:@!?%p\d+\s+)?st\.global\b")
_PBARRIER = re.compile(r"^\s*(@!?%p\d+\s+)?(?:bar|barrier)(?:\.cta)?\.sync(?:\.aligned)?\s+([^;]*);")
_PFLOW = re.compile(r"\b(?:call(?:\.uni)?|ret|exit)\b")
_PSYNC = re.compile(r"\b(?:bar\.warp\.sync|mbarrier\.\w+|(?:bar|barrier)(?:\.cta)?\.(?:arrive|red)\w*)\b")
_PWARP_ALL = re.compile(r"^\s*bar\.warp\.sync\s+(?:-1|0xffffffff|0xFFFFFFFF)\s*;")


def _innermost(text: str, locs: dict[str, str], depth: int = 0) -> tuple[str, int, int] | None:
    """A location → the innermost (file, line, col): for ``callsite(callee at caller)`` the callee's."""
    if depth > 64:
        return None
    text = text.strip()
    if text.startswith("#loc"):
        inner = locs.get(text)
        return None if inner is None else _innermost(inner, locs, depth + 1)
    m = _FILELOC.match(text)
    if m:
        return m.group(1), int(m.group(2)), int(m.group(3))
    m = _CALLSITE.match(text)
    if m:
        return _innermost(m.group(1), locs, depth + 1) or _innermost(m.group(2), locs, depth + 1)
    m = _NAMED.match(text)
    if m:
        return _innermost(m.group(1), locs, depth + 1)
    return None


def _ptx(ptx: str) -> tuple[dict[tuple[str, int, int], list[int]], dict[str, list[int]], list[int]]:
    """The PTX's ``st.global`` lines by raw position, its ``barriers`` / ``flow`` / ``syncs`` / ``warp_syncs``
    lines (:class:`StoreFacts`), and the lines inside a loop (between a label and a later branch back to it)."""
    lines = ptx.splitlines()
    files = {m.group(1): (m.group(2) + "/" + m.group(3) if m.group(3) else m.group(2))
             for ln in lines for m in [_PFILE.match(ln)] if m}
    stores: dict[tuple[str, int, int], list[int]] = {}
    kinds: dict[str, list[int]] = {"barriers": [], "flow": [], "syncs": [], "warp_syncs": []}
    labels: dict[str, int] = {}
    back: list[tuple[int, int]] = []  # (label line, branch line) of each backward branch
    loc: tuple[str, int, int] | None = None
    for i, ln in enumerate(lines):
        s = ln.split("//", 1)[0]
        m = _PLOC.match(s)
        if m:
            loc = (files.get(m.group(1), "?"), int(m.group(2)), int(m.group(3)))
            continue
        m = _PLABEL.match(s)
        if m:
            labels[m.group(1)] = i
            kinds["flow"].append(i)
            continue
        m = _PBRA.search(s)
        if m:
            kinds["flow"].append(i)
            if m.group(1) in labels:
                back.append((labels[m.group(1)], i))
            continue
        if _PSTORE.match(s):
            if loc is not None:
                stores.setdefault(loc, []).append(i)
            continue
        m = _PBARRIER.match(s)
        if m:
            whole = m.group(1) is None and "," not in m.group(2)
            kinds["barriers" if whole else "syncs"].append(i)
            continue
        if _PFLOW.search(s):
            kinds["flow"].append(i)
        elif _PSYNC.search(s):
            kinds["syncs"].append(i)
            if _PWARP_ALL.match(s):
                kinds["warp_syncs"].append(i)
    looped = [i for lo, hi in back for i in range(lo, hi + 1)]
    return stores, kinds, looped


def facts_from_asm(asm: Any, version: str, arch: str, num_warps: int, source: str = "") -> StoreFacts:
    """The :class:`StoreFacts` of one compiled kernel (``asm``: its stages by name; ``ttgir`` and ``ptx`` are
    read). ``source``: the kernel's file, where positions are moved (:func:`harness.lowering.compiled.relocator`)
    when the compiled kernel names another checkout's."""
    move = relocator(source) if source else (lambda p: p)
    text = asm["ttgir"]
    mod = ttgir.parse(text)
    ptx_stores, kinds, looped_lines = _ptx(asm["ptx"])
    looped = set(looped_lines)
    raw_sites: list[tuple[tuple[str, int, int] | None, tuple[int, ...], dict[str, list[list[int]]] | None, str]] = []
    for ln in text.splitlines():
        m = _STORE.match(ln)
        if m is None:
            continue
        raw = _innermost(m.group(2), mod.locs)
        ty = m.group(1).strip()
        t, sc = _PTR_TENSOR.match(ty), _PTR_SCALAR.match(ty)
        shape: tuple[int, ...] = ()
        b, err = None, ""
        if t is not None:
            shape = tuple(int(x) for x in t.group(1).rstrip("x").split("x"))
            try:
                b = layout_bases(t.group(2), shape, mod.layouts)
            except ValueError as e:
                err = str(e)
        elif sc is not None:
            b = {"register": [], "lane": [], "warp": []}
        else:
            err = f"a store through {ty} (a block pointer, or a layout written inline) is not modelled"
        raw_sites.append((raw, shape, b, err))
    counts: dict[Any, int] = {}
    for raw, *_ in raw_sites:
        counts[raw] = counts.get(raw, 0) + 1
    sites = []
    for raw, shape, b, err in raw_sites:
        where = None
        ins: list[int] = []
        if raw is not None:
            ins = ptx_stores.get(raw, [])
            k = node_key(move(raw[0]), raw[1], raw[2], "call", version)
            where = None if k is None else (move(raw[0]), k[0], k[1])
        sites.append(StoreSite(where, shape, b, err, min(ins, default=-1), max(ins, default=-1),
                               any(i in looped for i in ins), counts[raw]))
    return StoreFacts(version, arch, num_warps, mod.threads_per_warp, tuple(sites),
                      **{k: tuple(v) for k, v in kinds.items()})


def _dump(f: StoreFacts) -> dict[str, Any]:
    d = asdict(f)
    d.pop("_by_where", None)
    d.pop("_tables", None)
    return {"format": FORMAT, **d}


def _load(d: dict[str, Any], move: Callable[[str], str]) -> StoreFacts | None:
    """The facts :func:`_dump` wrote, each site's file passed through ``move``
    (:func:`harness.lowering.compiled.cached_facts`); ``None`` for an entry of another format."""
    try:
        d = dict(d)
        if d.pop("format", None) != FORMAT:
            return None
        sites = tuple(StoreSite(None if s["where"] is None else (move(str(s["where"][0])), int(s["where"][1]),
                                                                   int(s["where"][2])),
                                tuple(s["shape"]), s["bases"], s["error"], s["first"], s["last"], s["looped"],
                                s["count"]) for s in d["sites"])
        return StoreFacts(d["triton"], d["arch"], d["num_warps"], d["threads_per_warp"], sites,
                          tuple(d["barriers"]), tuple(d["flow"]), tuple(d["syncs"]), tuple(d["warp_syncs"]),
                          d["error"])
    except (ValueError, KeyError, TypeError):
        return None


def stores_for(fn: Any, signature: dict[str, str], constexprs: dict[str, Any] | None = None, *,
               num_warps: int = 4, arch: str = "sm90", fp_fusion: bool | None = None,
               divisible: frozenset[str] | set[str] | tuple[str, ...] = (),
               directory: Path | None = None, options: Mapping[str, int] | None = None) -> StoreFacts:
    """The :class:`StoreFacts` of ``fn`` for one launch configuration (the arguments of
    :func:`harness.lowering.compiled.lowering_for`, whose compile of the launch this reads too), from memory, else
    the disk cache (``<cache_dir>/stores/``), else compiled; ``error`` set when it does not compile or its code is
    not read."""
    return cached_facts(fn, signature, constexprs, num_warps=num_warps, arch=arch, fp_fusion=fp_fusion,
                        divisible=divisible, directory=directory, kind="stores",
                        read=lambda asm, version, source, fused_on: facts_from_asm(asm, version, arch, num_warps,
                                                                                   source=source),
                        failed=lambda version, why: StoreFacts(version, arch, num_warps, error=why),
                        dump=_dump, load=_load, keep_errors=False, options=options)
