"""Covariance kernels of the noise process (MATH.md §2).

A kernel is described by the same mapping the YAML configs use, e.g.
``{"name": "matern", "nu": 1.5, "rho": 0.1}``; :func:`kernel_spec` validates it
into a frozen :class:`KernelSpec`. All stationary kernels have variance 1 at r = 0.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
from scipy import special

from fdpcore._typing import ArrayLike, NDArrayFloat
from fdpcore.errors import DomainError

__all__ = ["KERNEL_PARAMETERS", "KernelSpec", "decay_rate", "kernel_matrix", "kernel_spec"]

#: Accepted kernel names and their parameters (required, optional with default).
KERNEL_PARAMETERS: dict[str, dict[str, float | None]] = {
    "matern": {"nu": None, "rho": None},
    "exponential": {"rho": None},
    "gaussian": {"length_scale": None},
    "brownian": {},
}
_ALIASES = {"rbf": "gaussian", "matern12": "exponential"}


@dataclass(frozen=True)
class KernelSpec:
    """A validated kernel: its family name and parameters (sorted, hashable)."""

    name: str
    params: tuple[tuple[str, float], ...]

    def param(self, key: str) -> float:
        """The value of parameter ``key``."""
        return dict(self.params)[key]

    def as_dict(self) -> dict[str, float | str]:
        """The mapping form used in configs and manifests."""
        return {"name": self.name, **dict(self.params)}


def kernel_spec(spec: Mapping[str, object] | KernelSpec) -> KernelSpec:
    """Validate a kernel mapping.

    Raises:
        DomainError: unknown name or parameter, or a parameter out of range.

    >>> kernel_spec({"name": "matern", "nu": 1.5, "rho": 0.1}).params
    (('nu', 1.5), ('rho', 0.1))
    """
    if isinstance(spec, KernelSpec):
        return spec
    if not isinstance(spec, Mapping) or "name" not in spec:
        raise DomainError(f"kernel ({spec!r}) must be a mapping with a 'name'")
    name = _ALIASES.get(str(spec["name"]).lower(), str(spec["name"]).lower())
    if name not in KERNEL_PARAMETERS:
        raise DomainError(f"kernel.name ({spec['name']!r}) must be one of {sorted(KERNEL_PARAMETERS)}")
    allowed = KERNEL_PARAMETERS[name]
    params: dict[str, float] = {}
    for key, value in spec.items():
        if key == "name":
            continue
        if key not in allowed:
            raise DomainError(f"kernel.{key} is not a parameter of the {name} kernel (allowed: {sorted(allowed)})")
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise DomainError(f"kernel.{key} ({value!r}) must be a number")
        v = float(value)
        if not (math.isfinite(v) and v > 0):
            raise DomainError(f"kernel.{key} ({value!r}) must be finite and > 0")
        params[key] = v
    for key, default in allowed.items():
        if key not in params:
            if default is None:
                raise DomainError(f"kernel.{key} is required for the {name} kernel")
            params[key] = default
    if name == "matern" and params["nu"] > 50:
        raise DomainError(f"kernel.nu ({params['nu']!r}) must be <= 50; use the gaussian kernel for nu -> infinity")
    return KernelSpec(name, tuple(sorted(params.items())))


def _matern(r: NDArrayFloat, nu: float, rho: float) -> NDArrayFloat:
    if nu == 0.5:
        return np.exp(-r / rho)
    if nu == 1.5:
        z = math.sqrt(3.0) * r / rho
        return (1.0 + z) * np.exp(-z)
    if nu == 2.5:
        z = math.sqrt(5.0) * r / rho
        return (1.0 + z + z * z / 3.0) * np.exp(-z)
    z = math.sqrt(2.0 * nu) * r / rho
    out = np.ones_like(z)
    pos = z > 0
    zp = z[pos]
    # kve(nu, z) = kv(nu, z) * exp(z): stable for large z
    log_pref = (1.0 - nu) * math.log(2.0) - special.gammaln(nu)
    out[pos] = np.exp(log_pref + nu * np.log(zp) - zp) * special.kve(nu, zp)
    return out


def kernel_matrix(spec: Mapping[str, object] | KernelSpec, s: ArrayLike, t: ArrayLike | None = None) -> NDArrayFloat:
    """The matrix ``[c(s_k, t_l)]`` of a 1-D kernel (MATH.md §2.1).

    >>> kernel_matrix({"name": "brownian"}, [0.5, 1.0]).tolist()
    [[0.5, 0.5], [0.5, 1.0]]
    """
    k = kernel_spec(spec)
    s_arr = np.asarray(s, dtype=np.float64)
    t_arr = s_arr if t is None else np.asarray(t, dtype=np.float64)
    if k.name == "brownian":
        if np.any(s_arr < 0) or np.any(t_arr < 0):
            raise DomainError("the brownian kernel min(s, t) requires non-negative grid points")
        return np.minimum.outer(s_arr, t_arr)
    r = np.abs(np.subtract.outer(s_arr, t_arr))
    if k.name == "gaussian":
        ell = k.param("length_scale")
        return np.exp(-(r * r) / (2.0 * ell * ell))
    if k.name == "exponential":
        return _matern(r, 0.5, k.param("rho"))
    return _matern(r, k.param("nu"), k.param("rho"))


def decay_rate(spec: Mapping[str, object] | KernelSpec, eigenvalues: ArrayLike | None = None) -> float:
    """Eigenvalue decay rate ``beta`` with ``lambda_j ~ j^-beta`` in 1-D (MATH.md §2.2).

    Matérn-nu gives ``2 nu + 1``; exponential and Brownian give 2. The Gaussian
    kernel has no finite rate; its *effective* beta is the negative log-log slope
    of the grid eigenvalues over the window ``lambda_j / lambda_1`` in
    ``[1e-8, 1e-2]`` (data-independent), so ``eigenvalues`` is required.

    >>> decay_rate({"name": "matern", "nu": 1.5, "rho": 0.1})
    4.0
    """
    k = kernel_spec(spec)
    if k.name == "matern":
        return 2.0 * k.param("nu") + 1.0
    if k.name in ("exponential", "brownian"):
        return 2.0
    if eigenvalues is None:
        raise DomainError("the gaussian kernel needs its grid eigenvalues to compute an effective decay rate")
    lam = np.asarray(eigenvalues, dtype=np.float64)
    ratio = lam / lam[0]
    j = np.arange(1, lam.shape[0] + 1, dtype=np.float64)
    window = (ratio >= 1e-8) & (ratio <= 1e-2)
    if int(window.sum()) < 2:
        raise DomainError(
            "the grid has too few eigenvalues with lambda_j/lambda_1 in [1e-8, 1e-2] to estimate an "
            "effective decay rate; use a finer grid or a smaller length_scale"
        )
    slope = np.polyfit(np.log(j[window]), np.log(lam[window]), 1)[0]
    return float(-slope)
