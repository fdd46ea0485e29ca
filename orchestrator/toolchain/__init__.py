"""Locked toolchains: a lock materialized into <store>/toolchains/<hash>/ (materialize), the
machine checked against the lock (machine_check), the locked CUDA toolkit (cuda_toolkit) and
the pinned lldb's environment (debugger_env)."""
