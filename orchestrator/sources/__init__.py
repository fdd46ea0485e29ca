"""A recipe's source: obtain the tree (path, pinned archive, git, developer checkout) and
compute its identity, the part of the derivation that stands for the source.

`prepare.prepare_source` is the entry point; each kind has its own module (`path`,
`archive`, `git`, `checkout`), sharing `prepared` (the result type and what identities
ignore), `archives` (obtaining archive files) and `patches` (overlays and patches).
"""
