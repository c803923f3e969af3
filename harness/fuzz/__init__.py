"""Generated kernels against the plugin: no false failures, and what the GPU models still miss.

- :mod:`.kernelgen`: small ``@triton.jit`` kernels from a grammar of what kernels do, one per seed;
- :mod:`.differential`: the CPU rule, plugin against Triton's own interpreter;
- :mod:`.gpu`: a capture of the kernels' GPU outputs, and its bit-for-bit comparison with the interpreter;
- :mod:`.cli`: ``python -m harness fuzz``.

Why in the harness and not only in its tests: a kernel author's box is where a shim meets kernels nobody here
wrote, and the GPU comparison runs wherever a GPU is lent. Nothing here imports pytest.
"""
