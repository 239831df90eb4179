"""Adapters: the world in (watches, probes, observations) and commands out (writers). No decision logic."""
