"""The smoke test (`python -m cudatorchext.smoke`): on a GPU, runs the kernel and checks its
result against torch's (exit 1 on a mismatch); without one, says it skipped the kernel and
exits 0 (the import and op registration, which need no GPU, are checked either way)."""
import sys

import torch

import cudatorchext


def main() -> int:
    assert hasattr(torch.ops.cudatorchext, "axpy"), "the op is not registered"
    if not torch.cuda.is_available():
        print(f"cudatorchext smoke: imported (torch {torch.__version__}, CUDA {torch.version.cuda}); "
              "no GPU: kernel skipped")
        return 0
    x = torch.arange(1 << 20, device="cuda", dtype=torch.float32)
    y = torch.full_like(x, 3.0)
    got = cudatorchext.axpy(2.0, x, y)
    torch.cuda.synchronize()
    want = 2.0 * x + y
    if not torch.equal(got, want):
        print(f"cudatorchext smoke: FAILED on {torch.cuda.get_device_name()}: "
              f"max error {(got - want).abs().max().item()}")
        return 1
    print(f"cudatorchext smoke: kernel ok on {torch.cuda.get_device_name()} "
          f"(sm_{''.join(map(str, torch.cuda.get_device_capability()))}, {x.numel()} elements)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
