"""cudatorchext: importing it registers torch.ops.cudatorchext.axpy (a CUDA kernel). Import
needs no GPU; calling the op needs one."""
import torch

from cudatorchext import _C  # noqa: F401  (TORCH_LIBRARY runs at load)


def axpy(a: float, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """a * x + y, computed by the CUDA kernel."""
    return torch.ops.cudatorchext.axpy(a, x, y)
