"""skbext: a C extension built by scikit-build-core."""
from skbext._core import triple

__all__ = ["triple"]
