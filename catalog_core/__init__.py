"""The pure domain core of model-catalog.

Standard library and attrs only: no I/O, no clock, no randomness, no logging,
no environment. Adapters turn the world into events; ``fold.step`` turns events
into state and commands; the same events always give the same state and
commands. See ARCHITECTURE.md for the data path.
"""
