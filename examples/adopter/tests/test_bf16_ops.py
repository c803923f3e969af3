import torch
from adopter_kernels import relu_mul


def test_relu_mul_bf16_is_exact(device, rng):
    x = torch.randn(3000, generator=rng).to(torch.bfloat16)
    y = torch.randn(3000, generator=rng).to(torch.bfloat16)
    got = relu_mul(x.to(device), y.to(device)).cpu()
    torch.testing.assert_close(got, torch.relu(x) * y, rtol=0, atol=0)  # one rounding per op, as torch's
