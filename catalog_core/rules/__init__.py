"""Pure decision rules: each module one concern, each a function of values."""
