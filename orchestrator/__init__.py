"""orchestrator: locked toolchains, content-addressed builds, atomic variant switches."""
