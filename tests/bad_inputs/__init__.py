"""The bad-input tables: one row per bad input we know of, by area."""
