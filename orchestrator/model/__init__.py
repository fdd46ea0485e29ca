"""Pydantic schemas: lock, recipe, manifest, cache records."""
