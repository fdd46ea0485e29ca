"""cext: a C extension built by setup.py."""
from cext._speed import dot

__all__ = ["dot"]
