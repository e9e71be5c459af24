"""Shipped example configs and data (used by `fdp demo`)."""
