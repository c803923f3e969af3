"""QSA tests' launch-capture declaration. The logits kernels take q and the cache in one dtype (``tl.dot`` of
q and the keys; ``IndexerKVCache.check_query`` refuses any other q), so the variants launch capture makes by
widening q or the cache alone to another float type are launches no caller can make, and Triton refuses them.
Kernels are named, not imported: a conftest imports no kernel module (DESIGN.md, "Lanes and arches")."""

from harness.compile.launches import expect_compile_failure

for _kernel in ("_paged_logits_kernel", "_decode_logits_kernel"):
    expect_compile_failure(_kernel, match=r"Both operands must be same dtype",
                           reason="q and the cache share one dtype (IndexerKVCache.check_query); a widened q or "
                                  "cache alone is a mixed-dtype tl.dot no caller can launch")
