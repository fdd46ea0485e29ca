"""torchext: loads libtorchext.so so that torch.ops.torchext.scaled_add exists."""
from pathlib import Path

import torch

_LIB = Path(__file__).resolve().parents[2] / "lib" / "libtorchext.so"
torch.ops.load_library(str(_LIB))


def scaled_add(a: torch.Tensor, b: torch.Tensor, alpha: float = 1.0) -> torch.Tensor:
    """a + alpha * b, computed by the C++ op."""
    return torch.ops.torchext.scaled_add(a, b, alpha)
