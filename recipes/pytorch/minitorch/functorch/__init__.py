"""Miniature of functorch: the package over functorch._C, which CMake installs into the
source tree as functorch.so (as 2.x does) and setup.py copies to _C."""
from functorch import _C  # noqa: F401
