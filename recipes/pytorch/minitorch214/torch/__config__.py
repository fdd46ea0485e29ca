import torch


def show() -> str:
    return torch._C._show_config()
