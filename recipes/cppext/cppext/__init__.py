"""cppext: importing it registers torch.ops.cppext.scale (a C++ op)."""
import torch

from cppext import _C  # noqa: F401  (TORCH_LIBRARY runs at load)


def scale(x: torch.Tensor, alpha: float) -> torch.Tensor:
    """alpha * x, computed by the C++ op."""
    return torch.ops.cppext.scale(x, alpha)
