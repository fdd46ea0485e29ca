"""Realise a plan: already in the store, substituted from a cache, or built -> verified ->
committed (pipeline); the one place a builder runs (build_step); verify again under new rules
(reverify); rebuild=1/check=1 (rebuild_check); and what `doit plan`/`doit why` say would
happen (explain)."""
