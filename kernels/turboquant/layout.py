"""The K8V4 slot layout: where each (token, kv-head) lives inside one cache slot, and the format rules.

One slot = ``[ key: head_dim FP8 codes | value: ceil(head_dim/2) bytes of 4-bit codes (even index in the
low nibble) | value scale fp16 | value zero fp16 ]``, padded to an even size (head_dim 128 → 196 bytes).
The fp16 fields are stored little-endian byte by byte, so a slot needs no alignment.

Kept in one pure-Python module because the kernels, the host checks and the torch reference must agree on
these numbers and none of them should own them.
"""

from __future__ import annotations

__all__ = [
    "FORMATS",
    "KEY_MAX",
    "VALUE_MAX",
    "SCALE_EPS",
    "E4B15_NAN_CODE",
    "KEY_NAN_CODE",
    "FP16_NAN_BITS",
    "MAX_HEAD_DIM",
    "value_bytes",
    "slot_bytes",
    "next_pow2",
]

#: Key FP8 formats: ``e4nv`` (OCP e4m3fn, sm89+) and ``e4b15`` (Triton's bias-15 e4m3, every NVIDIA GPU).
FORMATS: tuple[str, ...] = ("e4nv", "e4b15")

#: Largest finite key code per format. Keys are clamped to ±this before the cast, so the interpreter (which
#: does not saturate) and hardware (which does) agree. e4b15 clips at ±1.75: keys beyond that are *lost*
#: on pre-Ada GPUs — a property of the format, stated here and pinned by a test, not hidden.
KEY_MAX: dict[str, float] = {"e4nv": 448.0, "e4b15": 1.75}

#: Values are clamped to the finite fp16 range first: scale and zero are stored as fp16, so a wider range
#: could only be written as inf. ±inf inputs saturate here too.
VALUE_MAX = 65504.0

#: Floor of the value scale. 2**-14 is the smallest *normal* fp16, so the stored scale never loses
#: precision to subnormals; a near-constant vector (range < 15 · 2**-14) still quantizes within half a step.
SCALE_EPS = 2.0**-14

#: e4b15 has no NaN, and the saturating cast never produces 0x7f (1.875). A NaN key is written as 0x7f in
#: both formats (e4nv's own NaN code), and ``tq_load_k8v4`` reads 0x7f / 0xff back as NaN.
E4B15_NAN_CODE = 0x7F
KEY_NAN_CODE = 0x7F

#: A value vector containing a NaN is poisoned as a whole: scale and zero become fp16 NaN (these bits) and
#: its codes 0, so every value read back from it is NaN — as attention over it would be anyway.
FP16_NAN_BITS = 0x7E00

#: Largest head_dim the one-program-per-(token, head) kernels accept (registers scale with it).
MAX_HEAD_DIM = 1024


def value_bytes(head_dim: int) -> int:
    """Bytes of packed 4-bit value codes: two per byte."""
    return (head_dim + 1) // 2


def slot_bytes(head_dim: int) -> int:
    """Bytes one (token, kv-head) occupies: keys + packed values + fp16 scale + fp16 zero, padded to even."""
    if not isinstance(head_dim, int) or isinstance(head_dim, bool) or not 1 <= head_dim <= MAX_HEAD_DIM:
        raise ValueError(f"head_dim must be an int in [1, {MAX_HEAD_DIM}], got {head_dim!r}")
    n = head_dim + value_bytes(head_dim) + 4
    return n + (n & 1)


def next_pow2(n: int) -> int:
    """Smallest power of two >= n (tl.arange needs one; lanes past n are masked)."""
    return 1 << max(0, (n - 1).bit_length())
