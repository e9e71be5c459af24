"""Noise and private selection (MATH.md §3, §4.5, §5, §10).

The ICLP Laplace mechanism (:mod:`~fdpcore.noise.iclp`), Gaussian noise, the Bernstein mechanism,
the Bingham samplers of the FPCA exponential mechanism, private selection (exponential mechanism)
and private quantiles for public parameters bought with budget. Published noise comes from
OpenDP's floating-point-safe samplers.
"""
