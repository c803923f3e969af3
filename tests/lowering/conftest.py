"""Declarations for launch capture's compile matrix about the pattern kernels, by name: ``kernels.py`` imports
nothing of the harness (the capture script runs it on a bare GPU image), and a conftest may not import kernels
before the plugin picks the lane."""

from __future__ import annotations

from harness.compile.launches import expect_compile_failure

expect_compile_failure("scaled_loop", match="Loop-carried variable acc has initial type",
                       reason="an fp32 pattern: with a 16-bit y the loop-carried acc would change type (fp32 after "
                              "`acc + p`), which Triton refuses")
