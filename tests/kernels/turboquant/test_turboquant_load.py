"""The load kernels of issue 25 against the load that shipped before it (``tq_load_v1``), bit for bit.

Caches here are random bytes, so every key code of both formats, every nibble and fp16 scale/zero patterns of
every kind (NaN, ±inf, subnormal, -0) reach the decoder; slots are negative, past the cache, repeated and
ordinary; caches are contiguous, strided, heads-major, misaligned; head_dims run 1..256 with odd ones. The new
call must return the old kernel's fp32 bits exactly (NaN payloads included), through the word kernel where the
cache allows it and through the general kernel elsewhere. The old kernel decodes FP8 through Triton's casts
(on the interpreter: the harness's GPU-exact shims); the new ones through bit arithmetic.
"""

from __future__ import annotations

import pytest
import torch
from tq_load_v1 import builds_on_gpu, load_v1

import kernels.turboquant.load as load_mod
from harness.compile.launches import capture
from kernels.turboquant import reference as ref
from kernels.turboquant import slot_bytes, tq_load_k8v4

pytestmark = pytest.mark.harness_op("turboquant")

FMTS = ["e4nv", "e4b15"]
#: word kernel (multiples of 8) and general kernel (the rest), odd sizes and the benchmark's head_dims
HEAD_DIMS = [1, 2, 3, 7, 8, 13, 16, 24, 33, 80, 96, 128, 256]
#: (num_tokens, num_kv_heads): heads that do and do not divide a program's rows; token counts that end a
#: program's tile mid-way
BATCHES = [(5, 3), (9, 8), (3, 16)]


def _random_cache(rng, nb, bs, h, d, *, pad=0, offset=0):
    """A cache of random bytes ``[nb, bs, h, slot_bytes(d)]``; ``pad`` extra bytes after each slot (a strided
    view), ``offset`` bytes before the first (a misaligned view)."""
    sb = slot_bytes(d)
    flat = torch.randint(0, 256, (offset + nb * bs * h * (sb + pad),), generator=rng, dtype=torch.int32)
    flat = flat.to(torch.uint8)
    return flat[offset:].reshape(nb, bs, h, sb + pad)[..., :sb]


def _on(device, cache, offset=0):
    """``cache`` on ``device``, its first byte still ``offset`` bytes past an aligned allocation."""
    if device == "cpu":
        return cache
    if offset == 0:
        return cache.to(device)
    buf = torch.empty(offset + cache.numel(), dtype=torch.uint8, device=device)
    return buf[offset:].view(cache.shape).copy_(cache)


def _slots(rng, n, num_slots, dtype=torch.int64):
    """``n`` slots: mostly in range (repeats allowed), one negative, one just past the cache, one far past."""
    s = torch.randint(0, num_slots, (n,), generator=rng)
    specials = [-1, num_slots, num_slots + 1000]
    for i, v in enumerate(specials[: max(0, n - 1)]):
        s[(i * 7 + 1) % n] = v
    return s.to(dtype)


def _bits(x: torch.Tensor) -> torch.Tensor:
    return x.detach().cpu().contiguous().view(torch.int32)


def _assert_same_bits(got, want, what):
    __tracebackhide__ = True
    g, w = _bits(got), _bits(want)
    bad = (g != w).nonzero()
    assert bad.numel() == 0, (
        f"{what}: {bad.shape[0]} / {g.numel()} elements differ from the old kernel's bits; first at "
        f"{tuple(bad[0].tolist())}: got {g[tuple(bad[0])].item():#010x}, old {w[tuple(bad[0])].item():#010x}"
    )


def _check(cache, slots, d, fmt, device, calls=1):
    """``calls`` calls of the new load, each held to one run of the old kernel (the yardstick is what costs on
    the interpreter: one program per (token, head))."""
    got = [tq_load_k8v4(cache, slots, head_dim=d, fp8_format=fmt) for _ in range(calls)]
    if device != "cpu" and not builds_on_gpu(d, fmt):  # the old kernel cannot run: the torch reference
        s = slots.cpu().clone()
        s[s >= cache.shape[0] * cache.shape[1]] = -1  # past the cache reads as NaN, as a negative slot does
        k_ref, v_ref = ref.load(cache, s, d, fmt)
        for key, value in got:
            for out, want in ((key.cpu(), k_ref), (value.cpu(), v_ref)):
                assert torch.equal(out.isnan(), want.isnan()) and torch.equal(out.nan_to_num(), want.nan_to_num())
        return got[-1]
    with capture():  # the yardstick's launches stay out of the session's compile matrix (it is no kernel of ours)
        k_old, v_old = load_v1(cache, slots, d, fmt)
    for i, (key, value) in enumerate(got):
        call = f", call {i + 1} of {calls}" if calls > 1 else ""
        _assert_same_bits(key, k_old, f"keys (d{d} {fmt}{call})")
        _assert_same_bits(value, v_old, f"values (d{d} {fmt}{call})")
    return got[-1]


@pytest.mark.parametrize("fmt", FMTS)
@pytest.mark.parametrize("d", HEAD_DIMS)
def test_load_returns_the_old_kernels_bits(d, fmt, rng, device):
    t, h = BATCHES[d % len(BATCHES)]
    cache = _random_cache(rng, 3, 5, h, d).to(device)
    slots = _slots(rng, t, 15).to(device)
    assert load_mod.load_words_ok(d, cache) == (d % 8 == 0)
    key, _ = _check(cache, slots, d, fmt, device)
    assert bool(torch.isnan(key[1]).all()), "a negative slot's row must be NaN"


#: fp16 scale/zero patterns: NaN (two payloads), ±inf, the smallest and a large subnormal, ±0, 1, -5
FP16_PATTERNS = [0x7E00, 0xFE01, 0x7C00, 0xFC00, 0x0001, 0x83FF, 0x0000, 0x8000, 0x3C00, 0xC500]


def _every_code_cache(d):
    """64 slots of ``d`` key bytes where byte k of key word w in slot r holds code (64 w + r + 17 k) mod 256:
    each byte position of a word holds every code of 0..255 once over the 64 slots and the (up to) 4 words
    (position 3 at head_dim 15 only 192 of them; positions 0-2 every code, so every code is read). Scale and
    zero take every fp16 pattern, in different pairs; value nibbles are random."""
    n = 64
    r = torch.arange(n).view(n, 1)
    c = torch.arange(d).view(1, d)
    keys = (64 * (c // 4) + r + 17 * (c % 4)) % 256
    patterns = torch.tensor(FP16_PATTERNS, dtype=torch.int32)
    sz = torch.stack([patterns[torch.arange(n) % 10], patterns[(3 * torch.arange(n) + 1) % 10]], 1)
    return keys.to(torch.uint8), sz.to(torch.int16).view(torch.uint8).reshape(n, 4)


@pytest.mark.parametrize("fmt", FMTS)
def test_every_key_code_and_fp16_pattern_class(fmt, rng, device):
    """Every code in every byte position of a key word, and scale/zero words that are NaN, ±inf, subnormal and
    ±0, through the word kernel (d16) and the general kernel (d15)."""
    for d in (16, 15):
        keys, sz = _every_code_cache(d)
        n = keys.shape[0]
        for k in range(min(d, 4)):  # the claim above, for this d
            at_k = keys[:, k::4].flatten().unique()
            assert at_k.numel() == (192 if (d, k) == (15, 3) else 256), (d, k, at_k.numel())
        cache = torch.zeros(1, n, 1, slot_bytes(d), dtype=torch.uint8)
        cache[0, :, 0, :d] = keys
        vb = (d + 1) // 2
        cache[0, :, 0, d : d + vb] = torch.randint(0, 256, (n, vb), generator=rng, dtype=torch.int32).to(torch.uint8)
        cache[0, :, 0, d + vb : d + vb + 4] = sz
        _check(cache.to(device), torch.arange(n).to(device), d, fmt, device)


@pytest.mark.parametrize("layout", ["padded-slots", "heads-major", "offset-1", "offset-4", "block-33"])
@pytest.mark.parametrize("slot_dtype", [torch.int64, torch.int32])
def test_strided_and_misaligned_caches(layout, slot_dtype, rng, device):
    """Views the word kernel must refuse (a cache starting off a 4-byte boundary, slots 1 byte apart) and
    views it must take (slots padded by 4 bytes, heads outermost, a block size that is no power of two)."""
    d, h = 16, 2
    nb, bs = (2, 33) if layout == "block-33" else (3, 4)
    if layout == "padded-slots":
        cache, words = _random_cache(rng, nb, bs, h, d, pad=4), True
    elif layout == "heads-major":
        cache = _random_cache(rng, h, nb, bs, d).permute(1, 2, 0, 3)
        words = True
    elif layout.startswith("offset"):
        k = int(layout.split("-")[1])
        cache, words = _random_cache(rng, nb, bs, h, d, offset=k), k % 4 == 0
    else:
        cache, words = _random_cache(rng, nb, bs, h, d), True
    cache = _on(device, cache, int(layout.split("-")[1]) if layout.startswith("offset") else 0)
    assert load_mod.load_words_ok(d, cache) == words, layout
    wide = torch.stack([_slots(rng, 7, nb * bs, slot_dtype), torch.zeros(7, dtype=slot_dtype)], 1)
    _check(cache, wide[:, 0].to(device), d, "e4nv", device)


def test_many_heads_fall_back_to_the_general_kernel(rng, device, monkeypatch):
    """More head groups than CUDA's grid.y allows (65,535): the general kernel (a 1-D grid) takes the call.
    Emulated with a smaller limit, since a real one needs 2**16 heads."""
    d, h = 8, 6
    cache = _random_cache(rng, 2, 4, h, d).to(device)
    slots = _slots(rng, 5, 8).to(device)
    launched = []
    real = load_mod._plan

    def spy(config, words, *args):
        launched.append(words)
        return real(config, words, *args)

    monkeypatch.setattr(load_mod, "_plan", spy)
    monkeypatch.setattr(load_mod, "MAX_GRID_Y", 2)
    _check(cache, slots, d, "e4b15", device)
    assert launched == [True, False]


def test_launch_configs_stay_in_bounds():
    for d in range(1, 1025):
        rows, warps = load_mod.load_launch_config(d)
        assert rows >= 1 and rows & (rows - 1) == 0 and warps in (1, 2, 4), d
        assert rows * load_mod.next_pow2(d) <= 2048 or rows == 1, d
    for d in range(8, 1025, 8):
        rows, warps = load_mod.load_words_launch_config(d)
        assert rows >= 1 and rows & (rows - 1) == 0 and warps in (1, 2, 4), d


def test_the_launch_plan_is_cached():
    """A repeated call reuses its launch metadata (the host-overhead budget of issue 25)."""
    load_mod._plan.cache_clear()
    cfg = load_mod.load_words_launch_config
    a = load_mod._plan(cfg, True, 128, "e4nv", 8, 16)
    assert load_mod._plan(cfg, True, 128, "e4nv", 8, 16) is a
    assert load_mod._plan.cache_info().hits == 1


@pytest.mark.compile_targets("sm75", "sm80", "sm90", "sm100", "sm120")
@pytest.mark.parametrize("fmt", FMTS)
@pytest.mark.parametrize("kernel", ["words", "general"])
def test_load_kernels_compile_everywhere(compile_target, fmt, kernel):
    """The decode is integer and fp16 arithmetic, no FP8 instruction: both kernels build for every target in
    both formats (the old kernel's e4nv cast needed sm89)."""
    from harness.compile import matrix as cm

    if kernel == "words":
        sig, constexprs, _ = load_mod.load_words_compile_spec(fmt, head_dim=96)
        fn = load_mod._load_k8v4_words_kernel
    else:
        sig, constexprs = load_mod.load_compile_spec(fmt, head_dim=33)
        fn = load_mod._load_k8v4_kernel
    cm.assert_compiles(fn, signature=sig, constexprs=constexprs, target=compile_target)


def test_calls_with_other_specializations_keep_their_bits(rng, device):
    """Calls that differ only in what Triton specializes a compiled kernel on (a slot stride of 1 or 2, token
    counts that are and are not multiples of 16, int32 / int64 slots, a cache start off 16 bytes), each twice:
    every call returns the old kernel's bits."""
    d, h = 16, 2
    buf = _random_cache(rng, 5, 8, h, d, offset=4)
    base = _random_cache(rng, 5, 8, h, d)
    for cache in (_on(device, base), _on(device, buf, 4)):
        for n, step, dtype in ((16, 1, torch.int64), (16, 2, torch.int64), (13, 1, torch.int32), (32, 2, torch.int32)):
            wide = _slots(rng, n * step, 40, dtype).to(device)
            _check(cache, wide[::step], d, "e4nv", device, calls=2)


def test_a_checked_layout_is_replanned_when_anything_it_depends_on_changes(rng, device, monkeypatch):
    """After a call has left its plan, each call that differs from it in one thing the checks or the launch
    read (cache strides, alignment, blocks, block size, slot dtype and stride, head_dim with the same slot
    size, format, launch config) returns what a call with no plans returns, twice (the second after its own
    plan); one that differs only in its slot count reuses the plan and is right too."""
    d, h = 16, 2
    base = _on(device, _random_cache(rng, 3, 4, h, d))
    slots = _slots(rng, 7, 12).to(device)
    kernel, default = load_mod._load_k8v4_words_kernel, load_mod.load_words_launch_config
    launched = []

    class Recorded:  # the word kernel, recording each launch's rows per program
        def __getitem__(self, grid):
            def launch(*args, **kwargs):
                launched.append(kwargs["TOKS"] * kwargs["HEADS"])
                return kernel[grid](*args, **kwargs)
            return launch

    monkeypatch.setattr(load_mod, "_load_k8v4_words_kernel", Recorded())
    rows4 = lambda head_dim: (4, 1)  # noqa: E731
    variants = [
        ("base", base, slots, d, {}, None),
        ("fewer slots", base, slots[:3], d, {}, None),
        ("no slots", base, slots[:0], d, {}, None),
        ("cache of wider slots", _on(device, _random_cache(rng, 3, 4, h, d, pad=8)), slots, d, {}, None),
        ("cache off 4 bytes", _on(device, _random_cache(rng, 3, 4, h, d, offset=2), 2), slots, d, {}, None),
        ("cache of more blocks", _on(device, _random_cache(rng, 6, 4, h, d)), slots + 9, d, {}, None),
        ("cache of longer blocks", _on(device, _random_cache(rng, 2, 6, h, d)), slots, d, {}, None),
        ("slots int32", base, slots.int(), d, {}, None),
        ("slots strided", base, torch.stack([slots, slots], 1)[:, 0], d, {}, None),
        ("head_dim 15, the same slot size", base, slots, 15, {}, None),
        ("e4b15", base, slots, d, {"fp8_format": "e4b15"}, None),
        ("4 rows per program", base, slots, d, {}, rows4),
    ]
    assert slot_bytes(15) == slot_bytes(d)
    for name, cache, s, hd, kw, config in variants:
        load_mod._PLANS.clear()
        monkeypatch.setattr(load_mod, "load_words_launch_config", default)
        tq_load_k8v4(base, slots, head_dim=d)  # the base call leaves its plan
        monkeypatch.setattr(load_mod, "load_words_launch_config", config or default)
        launched.clear()
        got = [tq_load_k8v4(cache, s, head_dim=hd, **kw) for _ in range(2)]
        if config is not None:
            assert launched == [4, 4], f"{name}: launched {launched} rows per program, not the new config's 4"
        load_mod._PLANS.clear()
        want = tq_load_k8v4(cache, s, head_dim=hd, **kw)
        for i, (k, v) in enumerate(got):
            _assert_same_bits(k, want[0], f"{name}: keys of call {i + 1} after a plan")
            _assert_same_bits(v, want[1], f"{name}: values of call {i + 1} after a plan")


def test_a_planned_call_still_refuses_what_the_checks_refuse(rng, device):
    cache = _on(device, _random_cache(rng, 3, 4, 2, 16))
    slots = _slots(rng, 5, 12).to(device)
    load_mod._PLANS.clear()
    tq_load_k8v4(cache, slots, head_dim=16)
    assert load_mod._PLANS, "the call left no plan"
    with pytest.raises(TypeError, match="slot_mapping must have dtype"):
        tq_load_k8v4(cache, slots.float(), head_dim=16)
    with pytest.raises(TypeError, match="kv_cache must have dtype"):
        tq_load_k8v4(cache.view(torch.int8), slots, head_dim=16)
    with pytest.raises(ValueError, match="head_dim must be an int"):
        tq_load_k8v4(cache, slots, head_dim=16.0)
    with pytest.raises(ValueError, match="fp8_format must be"):
        tq_load_k8v4(cache, slots, head_dim=16, fp8_format="e5m2")
    with pytest.raises(ValueError, match="out of range"):
        tq_load_k8v4(cache, slots.clamp(0, 11) + 1, head_dim=16, validate=True)
    with pytest.raises(TypeError, match="validate must be a bool"):
        tq_load_k8v4(cache, slots, head_dim=16, validate=1)
