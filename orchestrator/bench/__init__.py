"""`doit bench` and `doit run`: run a command in one artifact's own environment, and compare
two artifacts' timings honestly (interleaved rounds, medians, bootstrap CI, a noise check)."""
