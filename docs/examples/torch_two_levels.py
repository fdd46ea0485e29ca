"""docs/debugging.md's example: torchext::scaled_add (C++) from two Python functions."""
import torch
import torchext  # noqa: F401 - loads the extension: torch.ops.torchext.scaled_add below


def inner(a, b):
    return torch.ops.torchext.scaled_add(a, b, 2.5)


def outer():
    return inner(torch.arange(6, dtype=torch.float32).reshape(2, 3), torch.ones(2, 3))


print("result", outer().tolist())
