# Marks this tree as driven by setup.py (as PyTorch 1.13 is); the orchestrator runs CMake itself.
