"""The checks `verify_tree` runs (the order and the registry are in verify/engine.py). Each
takes the run's `State` and returns findings naming a file and a cause:

- linkage.py: resolution, symbols, required_symbols
- cxx_abi.py: cxx_abi
- python_ext.py: python
- debug_info.py: debug_info (with meta/CMakeCache.txt)
- portability.py: portability
- cuda.py: cuda
"""
