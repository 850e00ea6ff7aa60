"""A FlashInfer stand-in for tests/releases/test_cuda_scopes.py: the overlay's cuda.py behind jit/cpp_ext.py."""
