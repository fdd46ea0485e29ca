"""The content-addressed store: artifacts staged and committed atomically (artifacts), the gc/
command roots lock (roots_lock), a build tree's stage record (stage_record), and file
manifests that catch later changes (tree_manifest)."""
