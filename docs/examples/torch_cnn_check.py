"""A whole PyTorch build's smoke check: a small CNN (conv2d, batchnorm, relu, linear), forward
and backward, on fixed inputs in one thread, then which backends the build has.

    python docs/examples/torch_cnn_check.py [--out FILE.json] [--compare OTHER.json] [--config]

--out writes the loss and a fingerprint of the output and of every gradient; --compare checks
them against another build's file (RelWithDebInfo against Release: equal within rtol 1e-4,
atol 1e-5; exit 1 naming the first that differs). --config prints torch.__config__.show().
"""
from __future__ import annotations

import argparse
import json
import sys

import torch
from torch import nn

RTOL, ATOL = 1e-4, 1e-5


def model() -> nn.Module:
    return nn.Sequential(
        nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(),
        nn.Conv2d(8, 16, 3, stride=2, padding=1), nn.BatchNorm2d(16), nn.ReLU(),
        nn.Flatten(), nn.Linear(16 * 8 * 8, 10))


def run() -> dict[str, list[float]]:
    torch.manual_seed(0)
    torch.set_num_threads(1)   # the same summation order in every build
    net = model()
    x = torch.randn(4, 3, 16, 16)
    target = torch.tensor([1, 3, 5, 7])
    out = net(x)
    loss = nn.functional.cross_entropy(out, target)
    loss.backward()
    numbers = {"loss": [loss.item()], "output": out.detach().flatten()[:16].tolist()}
    for name, p in net.named_parameters():
        assert p.grad is not None, name
        numbers[f"grad {name}"] = [p.grad.norm().item(), p.grad.flatten()[0].item()]
    return numbers


def backends() -> dict[str, bool]:
    import torch.distributed as dist
    return {"mkldnn": torch.backends.mkldnn.is_available(),
            "xnnpack": bool(getattr(torch.backends, "xnnpack", None)
                            and torch.backends.xnnpack.enabled),
            "kineto": torch.autograd.kineto_available(),
            "distributed": dist.is_available(),
            "gloo": dist.is_available() and dist.is_gloo_available()}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out")
    ap.add_argument("--compare")
    ap.add_argument("--config", action="store_true")
    args = ap.parse_args()
    numbers = run()
    print(f"torch {torch.__version__} from {torch.__file__}")
    print(f"loss {numbers['loss'][0]:.6f}; backends {json.dumps(backends())}")
    if args.config:
        print(torch.__config__.show())
    if args.out:
        with open(args.out, "w") as f:
            json.dump(numbers, f)
    if args.compare:
        with open(args.compare) as f:
            other = json.load(f)
        for key, values in numbers.items():
            if not torch.allclose(torch.tensor(values), torch.tensor(other[key]), rtol=RTOL, atol=ATOL):
                print(f"{key} differs from {args.compare}: {values[:4]} vs {other[key][:4]}")
                return 1
        print(f"equal to {args.compare} within rtol {RTOL}, atol {ATOL} ({len(numbers)} values)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
