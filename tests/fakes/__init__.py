"""Test doubles of the controller's peers, each held to the real peer by a contract suite."""
