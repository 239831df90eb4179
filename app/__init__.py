"""The shell: composition root, CLI, service loop, library API."""
