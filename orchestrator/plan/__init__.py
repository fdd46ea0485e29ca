"""Plan: recipe + variant + lock + source -> derivation -> artifact id (derivation), and the
names the command line gives an artifact (artifact_ref: id=; selection: recipe/variant/targets)."""
