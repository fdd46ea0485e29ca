"""demo: a tiny PyTorch-shaped package (core lib, ops lib, CPython extension)."""
from demo._C import add as _add, build_type as _build_type


def add(a, b, alpha=1.0):
    """a + alpha * b, elementwise, computed by demo::native::add_kernel."""
    return _add(list(a), list(b), float(alpha))


def build_type() -> str:
    """The CMAKE_BUILD_TYPE this build was compiled as (RelWithDebInfo, Release, Debug)."""
    return _build_type()
