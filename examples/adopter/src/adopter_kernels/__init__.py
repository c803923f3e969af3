"""Three Triton kernels as an adopter's repo has them: an FP8 cache store whose launcher picks the format on the
host, a bf16 elementwise op, and an autotuned row reduction."""

from adopter_kernels.bf16_ops import relu_mul
from adopter_kernels.fp8_store import store_fp8
from adopter_kernels.row_sum import row_sum

__all__ = ["relu_mul", "row_sum", "store_fp8"]
