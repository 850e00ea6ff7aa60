"""flashinfer/jit/cpp_ext.py as patch 0001 leaves it: upstream's lookups replaced by the overlay's."""

from packaging.version import Version

from .._nvfp4_overlay import cuda as _nvfp4_cuda


@_nvfp4_cuda.replaces
def get_cuda_version() -> Version:
    raise AssertionError("replaced by flashinfer/_nvfp4_overlay/cuda.py")


@_nvfp4_cuda.replaces
def is_cuda_version_at_least(version_str: str) -> bool:
    return get_cuda_version() >= Version(version_str)
