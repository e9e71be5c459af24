"""Core of the mean-function simulation of [ICLP-v2] §6.1 (MATH.md §13.1): data, plans, exact errors.

Everything here calls the library for the mathematics (eigenbases, estimators, sensitivities, PSS/PCV
tuning, calibrations, expected noise energies); this module only generates data and evaluates

    E_noise ||mu~ - mu_0||_W^2 = ||mu^ - mu_0||_W^2 + E||noise||_W^2

(the cross term has mean zero because the noise is centred and independent of the data), with
``mu^`` the mechanism's noise-free release (the whitened summary of ``summarise_mean`` recoloured by
the plan) and ``E||noise||^2`` the plan's ``noise.whitened.expected_sq_l2@1``. Noise is never drawn
except in the Monte-Carlo check of that identity (NumPy, ``secure=False``: simulation only).

Scaling (MATH.md §2.4, constant-1 convention): each replicate's curves are divided by the public
``tau = ||mu_0||_W + TAU_MARGIN`` (set from the simulation design, never from the sample) and clipped
to ``||Y_i||_W <= 1``; mechanisms run with ``tau = 1``; errors are reported in the original units
(multiplied by ``tau^2``).
"""

from __future__ import annotations

import dataclasses
import functools
from dataclasses import dataclass

import numpy as np

from experiments._util import PAPER_AR_RULE, paper_ar_tuning
from experiments.reference import MEAN_SIMULATION_SCENARIOS, MEAN_SIMULATION_SETTINGS
from fdpcore.basis.eigen import Eigenbasis, weighted_eigenbasis
from fdpcore.basis.grids import Grid, midpoint_grid
from fdpcore.data.preprocess import clip_l2
from fdpcore.noise.bernstein import bernstein_interpolation_matrix, clip_sup
from fdpcore.noise.gaussian import calibrate_gaussian
from fdpcore.noise.iclp import calibrate_iclp
from fdpcore.summaries.mean import (
    MeanPlan,
    frl_mean_coefficients,
    iclp_ar_mean_coefficients,
    iclp_qr_mean_coefficients,
    plan_mean_release,
    select_mean_parameters,
)

NDArray = np.ndarray
PAPER = MEAN_SIMULATION_SETTINGS.rows

#: Grid size K: not stated in the paper; MATH.md §13.1 suggests 100 equispaced points (midpoint rule on [0, 1]).
GRID_SIZE = 100
#: Sample sizes: not stated in the paper (log-scaled axis); MATH.md §13.1's suggestion.
N_VALUES = (100, 200, 500, 1000, 2000, 5000)
#: Length-scale of the RBF error process: not stated in the paper; we use 0.1 (the ICLP kernel's rho).
RBF_LENGTH_SCALE = 0.1
#: Range of the exponential error kernel exp(-r/rho) (App. D.1): not stated; we use 0.1.
EXPONENTIAL_RHO = 0.1
#: Basis of the t_5 error expansion: not stated; the eigenbasis of the Matérn(nu, rho = 0.1) ICLP kernel with
#: this nu, score j multiplied by sqrt(lambda_j (df - 2)/df) so that the covariance is that kernel (E||e||^2 = 1).
T5_BASIS_NU = 1.5
#: tau = ||mu_0||_W + TAU_MARGIN (the errors have E||e||_W^2 = 1): not stated ("normalizing"); our choice.
TAU_MARGIN = 2.0
#: Bernstein sup-norm clip B = max_t |mu_0(t)| + SUP_MARGIN (the errors have unit pointwise variance); not stated.
SUP_MARGIN = 3.0

#: The paper's S-1..S-4 and S-4F: S-4 with a Fourier basis instead of the ICLP eigenbasis (issue 20: with
#: phi_j = the ICLP eigenbasis, mu_0 lies in the span that FRL truncates, so FRL with M >= 25 has no bias;
#: the paper does not say which phi_j it used).
SCENARIOS = (*tuple(MEAN_SIMULATION_SCENARIOS.rows), "S-4F")
#: Mechanisms in the order of the paper's legend.
MECHANISMS = ("frl", "iclp_ar", "iclp_qr", "bernstein", "gp")
LABELS = {"frl": "FRL", "iclp_ar": "ICLP-AR", "iclp_qr": "ICLP-QR", "bernstein": "Bernstein", "gp": "GP-ADP",
          "pcv": "ICLP-QR (PCV)", "pcv_frl": "FRL (PCV)"}
#: Pure-DP mechanisms (GP-ADP is (eps, delta)-DP).
PURE_DP = ("frl", "iclp_ar", "iclp_qr", "bernstein")

#: Tuning rule, sensitivity and GP calibration of the two pipelines (MATH.md §4.6, §5.1).
#: ``exact``: the library's defaults (tightened PSS rules, exact sensitivities, analytic Gaussian).
#: ``paper``: the papers' rules and printed bounds ([ICLP-v2] Cor. 1 / Thm 6, [MRS] with the classical
#: Gaussian constant). ICLP-AR: the paper states no tuning; ``paper_thm7`` balances its own Thm 7 rate with
#: its own bound (``experiments._util.paper_ar_tuning``).
VARIANTS: dict[str, dict[str, str | None]] = {
    "exact": {"iclp_qr": "exact_balanced", "gp": "exact_balanced", "iclp_ar": "tightened_l2", "frl": "exact",
              "bernstein": None, "calibration": "analytic"},
    "paper": {"iclp_qr": "paper_balanced", "gp": "paper_balanced", "iclp_ar": PAPER_AR_RULE, "frl": "paper",
              "bernstein": None, "calibration": "classical"},
}


@dataclass(frozen=True)
class SimConfig:
    """One simulation configuration: the ICLP kernel's smoothness and the error process."""

    name: str
    nu: float
    errors: str  # "rbf" | "exponential" | "t5"

    @property
    def label(self) -> str:
        """Human-readable name."""
        err = {"rbf": f"GP(0, RBF l={RBF_LENGTH_SCALE:g})", "exponential": f"GP(0, exp rho={EXPONENTIAL_RHO:g})",
               "t5": f"t_{PAPER['t5_df']} expansion"}[self.errors]
        return f"Matérn nu={self.nu:g} ICLP kernel, {err} errors"


#: The main configuration (paper main text) and the appendix variants (App. D.1-D.2).
CONFIGS = (
    SimConfig("m15_rbf", PAPER["matern_nu"][0], "rbf"),
    SimConfig("m15_exp", PAPER["matern_nu"][0], "exponential"),
    SimConfig("m15_t5", PAPER["matern_nu"][0], "t5"),
    SimConfig("m25_rbf", PAPER["matern_nu"][1], "rbf"),
)
MAIN = CONFIGS[0].name


@functools.cache
def grid(size: int = GRID_SIZE) -> Grid:
    """The public grid: ``size`` equispaced midpoints on [0, 1] with equal weights."""
    return midpoint_grid(size)


def iclp_kernel(nu: float) -> dict[str, object]:
    """The ICLP noise kernel Matérn(nu, rho = 0.1) of the paper."""
    return {"name": "matern", "nu": float(nu), "rho": PAPER["matern_rho"]}


@functools.cache
def iclp_basis(nu: float, size: int = GRID_SIZE) -> Eigenbasis:
    """Trace-normalised eigenbasis of the ICLP kernel (data-independent; computed once)."""
    return weighted_eigenbasis(iclp_kernel(nu), grid(size))


@functools.cache
def error_basis(errors: str, size: int = GRID_SIZE) -> tuple[NDArray, NDArray]:
    """``(sqrt(lambda), Phi^T)`` of the error process: ``e = (xi * sqrt(lambda)) @ Phi^T``."""
    spec: dict[str, object]
    if errors == "rbf":
        spec = {"name": "gaussian", "length_scale": RBF_LENGTH_SCALE}
    elif errors == "exponential":
        spec = {"name": "exponential", "rho": EXPONENTIAL_RHO}
    elif errors == "t5":
        spec = iclp_kernel(T5_BASIS_NU)
    else:
        raise ValueError(f"errors ({errors!r}) must be 'rbf', 'exponential' or 't5'")
    b = weighted_eigenbasis(spec, grid(size))
    m = b.n_basis if errors != "t5" else min(PAPER["t5_terms"], b.n_basis)
    return np.sqrt(b.eigenvalues[:m]), b.eigenfunctions[:, :m].T.copy()



def sample_errors(errors: str, n: int, rng: np.random.Generator, size: int = GRID_SIZE) -> NDArray:
    """``n x K`` error curves with covariance kernel of unit variance (E||e||_W^2 = trace = 1).

    GP errors are ``sum_j sqrt(lambda_j) xi_j phi_j`` with ``xi ~ N(0, 1)`` (the kernel's weighted KL
    expansion); t_5 errors use i.i.d. t_5 scores rescaled to unit variance.
    """
    root, phi_t = error_basis(errors, size)
    if errors == "t5":
        df = float(PAPER["t5_df"])
        xi = rng.standard_t(df, size=(n, root.shape[0])) * np.sqrt((df - 2.0) / df)
    else:
        xi = rng.standard_normal((n, root.shape[0]))
    return np.asarray((xi * root) @ phi_t)


def normal_density(t: NDArray, a: float, b: float) -> NDArray:
    """The N(a, b^2) density ``f_{a,b}``."""
    return np.exp(-0.5 * ((t - a) / b) ** 2) / (b * np.sqrt(2.0 * np.pi))


def true_mean(scenario: str, nu: float, rng: np.random.Generator, size: int = GRID_SIZE) -> NDArray:
    """``mu_0`` of scenario S-1..S-4 on the grid (S-4 draws its ``R_j ~ U[-1, 1]`` from ``rng``)."""
    t = grid(size).grid_points
    if scenario == "S-4F":
        par = MEAN_SIMULATION_SCENARIOS.rows["S-4"][1]
        return np.asarray(fourier_basis(t, par["terms"]) @ rng.uniform(par["lo"], par["hi"], size=par["terms"]))
    form, par = MEAN_SIMULATION_SCENARIOS.rows[scenario]
    if form == "c t exp(-t)":
        return np.asarray(par["c"] * t * np.exp(-t))
    if form == "mixture":
        return np.asarray(sum(wt * normal_density(t, a, b) for wt, a, b in par))
    phi = iclp_basis(nu, size).eigenfunctions[:, : par["terms"]]
    return np.asarray(phi @ rng.uniform(par["lo"], par["hi"], size=par["terms"]))


def fourier_basis(t: NDArray, terms: int) -> NDArray:
    """``len(t) x terms`` orthonormal Fourier basis of L2[0, 1]: 1, sqrt2 cos(2 pi k t), sqrt2 sin(2 pi k t), ..."""
    cols = [np.ones_like(t)]
    k = 1
    while len(cols) < terms:
        cols.append(np.sqrt(2.0) * np.cos(2.0 * np.pi * k * t))
        if len(cols) < terms:
            cols.append(np.sqrt(2.0) * np.sin(2.0 * np.pi * k * t))
        k += 1
    return np.stack(cols, axis=1)


def scales(mu0: NDArray, size: int = GRID_SIZE) -> tuple[float, float]:
    """``(tau, B)``: the L2 normalisation and the Bernstein sup clip, both from the design ``mu_0``."""
    tau = float(grid(size).norm(mu0)[0]) + TAU_MARGIN
    return tau, float(np.max(np.abs(mu0))) + SUP_MARGIN


@functools.lru_cache(maxsize=4096)
def plan(estimator: str, variant: str, nu: float, n: int, sup_clip: float = 1.0, epsilon: float | None = None,
         size: int = GRID_SIZE, bound: str | None = None) -> MeanPlan:
    """The library's plan of ``estimator`` with ``variant``'s tuning (tau = 1) and noise set by ``bound``.

    ``bound`` (default: ``variant``) is ``"exact"`` (the library's sensitivity) or ``"paper"``: the noise
    is then recalibrated from the plan's recorded paper bound (``plan.paper_sensitivity``, e.g.
    ``sensitivity.mean.iclp_qr.paper_l1@1``) with the same tuning and calibration rule.
    """
    eps = float(PAPER["epsilon"]) if epsilon is None else epsilon
    rules = VARIANTS[variant]
    kw: dict[str, object] = {}
    if estimator == "gp":
        kw = {"delta": PAPER["gp_delta"], "calibration": rules["calibration"]}
    if estimator == "bernstein":
        kw = {"lattice_k": PAPER["bernstein_lattice_k"], "sup_clip": sup_clip}
    elif rules[estimator] == PAPER_AR_RULE:
        beta = plan_mean_release(grid(size), iclp_kernel(nu), n=n, tau=1.0, epsilon=eps, estimator=estimator,
                                 secure=False).beta
        kw["eta"], kw["psi"] = paper_ar_tuning(beta, n, eps)
    else:
        kw["tuning"] = rules[estimator]
    p = plan_mean_release(grid(size), iclp_kernel(nu), n=n, tau=1.0, epsilon=eps, estimator=estimator, secure=False,
                          **kw)
    if (bound or variant) == "paper" and p.paper_sensitivity is not None and p.paper_sensitivity != p.sensitivity:
        p = with_sensitivity(p, p.paper_sensitivity)
    return p


def with_sensitivity(p: MeanPlan, sensitivity: float) -> MeanPlan:
    """``p`` with its noise recalibrated to ``sensitivity`` (same tuning, calibration rule and epsilon)."""
    if p.recolour is None:
        raise ValueError("the plan has no recolouring (pending selection)")
    d = p.recolour.shape[0]
    if p.estimator == "gp":
        cal = calibrate_gaussian(sensitivity, p.epsilon_mean, p.delta, n_basis=d,
                                 calibration=p.gp_calibration or "analytic", secure=False)
    else:
        cal = calibrate_iclp(sensitivity, p.epsilon_mean, n_basis=d, secure=False)
    return dataclasses.replace(p, sensitivity=sensitivity, calibration=cal)


@functools.cache
def pcv_plan(nu: float, n: int, size: int = GRID_SIZE, estimator: str = "iclp_qr") -> MeanPlan:
    """The pending ICLP-QR (or FRL) plan with 10-fold PCV (not DP: simulation only, MATH.md §5.2)."""
    return plan_mean_release(grid(size), iclp_kernel(nu), n=n, tau=1.0, epsilon=float(PAPER["epsilon"]),
                             estimator=estimator, tuning="pcv", non_private=True, secure=False)


@functools.cache
def _lattice_matrix(k: int, size: int = GRID_SIZE) -> NDArray:
    g = grid(size)
    return bernstein_interpolation_matrix(g.grid_points, g.domain_range, k)


@dataclass(frozen=True)
class Summary:
    """The sufficient statistics of one normalised, clipped data set (never published)."""

    curves: NDArray  # n x K, ||Y_i||_W <= 1
    xbar: NDArray  # mean eigen-coefficients on the ICLP basis
    size: int

    @functools.cached_property
    def ybar(self) -> NDArray:
        """Mean curve."""
        return np.asarray(self.curves.mean(axis=0))

    def lattice_mean(self, sup_clip: float, k: int) -> NDArray:
        """Mean of the sup-clipped curves on the Bernstein lattice (as ``summarise_mean`` does)."""
        clipped, _ = clip_sup(self.curves, sup_clip)
        return np.asarray(clipped.mean(axis=0) @ _lattice_matrix(k, self.size).T)


def summarise(curves: NDArray, nu: float, size: int = GRID_SIZE) -> Summary:
    """Clip normalised curves to 1 (record-wise) and compute their mean coefficients."""
    g = grid(size)
    clipped, _ = clip_l2(curves, g.weights, 1.0)
    return Summary(clipped, iclp_basis(nu, size).coefficients(clipped.mean(axis=0)), size)


def whitened(p: MeanPlan, s: Summary) -> NDArray:
    """The plan's whitened summary ``z`` from the sufficient statistics (= ``summarise_mean(curves, p)``).

    Linear estimators are applied to the mean coefficients (the mean commutes with the projection);
    Bernstein sup-clips record by record first. ``tests/experiments`` checks equality with the library.
    """
    lam = p.basis.eigenvalues
    if p.estimator == "bernstein":
        return s.lattice_mean(float(p.sup_clip or 0.0), int(p.lattice_k or 0))
    if p.estimator == "frl":
        return frl_mean_coefficients(s.xbar, int(p.n_basis or 0))
    eta, psi = float(p.eta or 0.0), float(p.psi or 0.0)
    if p.estimator == "iclp_ar":
        d = p.recolour.shape[0] if p.recolour is not None else 0
        return iclp_ar_mean_coefficients(s.xbar, lam, eta=eta, psi=psi)[:d] / np.sqrt(lam[:d])
    return iclp_qr_mean_coefficients(s.xbar, lam, eta=eta, psi=psi) / np.sqrt(lam)


def noise_free(p: MeanPlan, s: Summary) -> NDArray:
    """The release without noise, on the grid: ``z R``."""
    if p.recolour is None:
        raise ValueError("the plan has no recolouring (pending selection)")
    return np.asarray(whitened(p, s) @ p.recolour)


def squared_error(p: MeanPlan, s: Summary, target: NDArray) -> tuple[float, float]:
    """``(||mu^ - target||_W^2, E||noise||_W^2)`` in normalised units."""
    diff = noise_free(p, s) - target
    w = grid(s.size).weights
    return float(np.sum(w * diff * diff)), p.expected_sq_l2_error


def pcv_select(nu: float, s: Summary, estimator: str = "iclp_qr") -> MeanPlan:
    """The finished ICLP-QR (psi) or FRL (M) plan that 10-fold PCV picked on the data (not DP)."""
    return select_mean_parameters(s.curves, pcv_plan(nu, s.curves.shape[0], s.size, estimator))
