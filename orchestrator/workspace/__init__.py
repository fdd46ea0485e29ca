"""A workspace's profiles: generations of links into the store switched by one rename
(profiles), links an artifact asks for inside the workspace (links), and making a realised
artifact the active profile (activate)."""
