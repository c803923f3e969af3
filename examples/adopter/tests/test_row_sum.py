import torch
from adopter_kernels import row_sum


def test_row_sum_fp16(device, rng, tolerance):
    x = torch.randn(33, 700, generator=rng).to(torch.float16)
    want = x.double().sum(dim=1).float()
    tol = tolerance(dtype="fp32")
    torch.testing.assert_close(row_sum(x.to(device)).cpu(), want, rtol=tol.rtol, atol=tol.atol)
