"""Locks: resolve a spec into pinned entries (resolve), read/write them (files), check drift."""
