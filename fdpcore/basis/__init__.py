"""Grids, kernels, eigenbases, tensor products and norms (MATH.md §1-§2).

Everything here depends on public inputs only (grid, kernel, domain); eigenbases are cached on
disk by :mod:`fdpcore.io.eigencache`.
"""
