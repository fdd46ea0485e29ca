"""Miniature of torch's package layout: _C next to this file, its libraries in lib/."""
from torch import _C, __config__  # noqa: F401
import torchgen  # noqa: E402,F401  (2.x: torch.utils._python_dispatch imports it)
