"""The turboquant store and load beyond numerics: replayed from a CUDA graph on fresh keys, values and slots (the
store's docstring says it is capturable), the same bits on every call, and each token's cache bytes and loaded
rows independent of the tokens stored with it. Small shapes on the interpreter lane, the GPU tests' on a GPU."""

from __future__ import annotations

import pytest
import torch

from harness.replay import assert_batch_invariant, assert_deterministic
from kernels.turboquant import slot_bytes, tq_load_k8v4, tq_store_k8v4

#: (tokens, kv heads, head_dim, blocks, block size): the GPU tests' shape, and one the interpreter runs in seconds
SHAPES = {"cuda": (1024, 8, 128, 128, 16), "cpu": (6, 2, 16, 4, 4)}

#: GPU splits of the 1024 tokens: launches of 1 token, multiples of 16 and neither (the word kernels' classes)
SPLITS_GPU = [1, 15, 16, 17, 63, 64, 100, 256, 492]

DTYPES = {"bf16": torch.bfloat16, "fp32": torch.float32}


def _data(rng: torch.Generator, device: str, dtype: torch.dtype):
    t, h, d, nb, bs = SHAPES[device]
    key = (torch.randn(t, h, d, generator=rng) * 32).to(dtype).to(device)
    value = (torch.randn(t, h, d, generator=rng) * 3 + torch.randn(t, h, 1, generator=rng)).to(dtype).to(device)
    slots = torch.randperm(nb * bs, generator=rng)[:t].to(device)
    return key, value, slots


def _cache(device: str) -> torch.Tensor:
    t, h, d, nb, bs = SHAPES[device]
    return torch.zeros(nb, bs, h, slot_bytes(d), dtype=torch.uint8, device=device)


@pytest.mark.graph_replay
@pytest.mark.parametrize("src", list(DTYPES))
def test_store_and_load_replay_from_a_graph(src, rng, device, graph_replay):
    d = SHAPES[device][2]
    key, value, slots = _data(rng, device, DTYPES[src])
    key2, value2, slots2 = _data(rng, device, DTYPES[src])

    def store_load(key, value, slot_mapping, kv_cache):
        tq_store_k8v4(key, value, kv_cache, slot_mapping)
        return tq_load_k8v4(kv_cache, slot_mapping, head_dim=d)

    k, v = graph_replay(store_load, inputs=dict(key=key, value=value, slot_mapping=slots),
                        fresh=dict(key=key2, value=value2, slot_mapping=slots2), outputs=dict(kv_cache=_cache(device)))
    assert k.shape == v.shape == key.shape and not v.isnan().any()


@pytest.mark.parametrize("src", list(DTYPES))
def test_store_and_load_are_deterministic_and_batch_invariant(src, rng, device):
    t, h, d, nb, bs = SHAPES[device]
    key, value, slots = _data(rng, device, DTYPES[src])

    def per_token(key, value, slot_mapping):
        """Each token's slot bytes after the store, and its loaded key and value rows."""
        cache = _cache(device)
        tq_store_k8v4(key, value, cache, slot_mapping)
        k, v = tq_load_k8v4(cache, slot_mapping, head_dim=d)
        return cache.view(nb * bs, h, -1)[slot_mapping], k, v

    assert_deterministic(per_token, key, value, slots, repeats=20 if device == "cuda" else 2)
    assert_batch_invariant(per_token, (key, value, slots), splits=SPLITS_GPU if device == "cuda" else None)
