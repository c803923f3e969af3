import pytest
import torch
from adopter_kernels import store_fp8
from adopter_kernels.fp8_store import _use_fp8_e4b15


def test_store_fp16_keys(device, rng):
    if _use_fp8_e4b15(torch.device(device)):
        pytest.skip("this GPU's cache is e4b15, which torch cannot decode")
    key = (torch.randn(1000, generator=rng) * 4).to(torch.float16)
    got = store_fp8(key.to(device)).cpu()
    want = key.to(torch.float8_e4m3fn).view(torch.uint8)  # in range: torch's RNE cast is the GPU's
    assert torch.equal(got, want)
