"""Miniature of torchgen: torch 2.x imports it at start-up (torch.utils._python_dispatch)."""
