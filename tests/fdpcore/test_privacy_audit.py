"""Empirical privacy audit (fast sampler): Clopper-Pearson lower bounds on epsilon from many draws.

For each mechanism a worst-case neighbouring pair (D, D') is run through the real summary
(``summarise_mean``) and the plan's own calibration; the noise is drawn with the plan's sampler on the
few whitened coordinates that carry the shift (>= 95% of its norm; the rest is post-processing-free
noise that only dilutes the test). For Laplace plans the test event is "every such coordinate lands on
the far side of D's value", whose likelihood ratio is exactly ``exp(sum |h_j| / b)``; for the Gaussian
plan it is a threshold on the single shifted coordinate, and the bound is ``log((p - delta) / q)``.
The claimed mechanism must give a lower bound <= epsilon (and close to it: the audit has power), and
the same mechanism with half the noise scale must be caught (lower bound > epsilon).
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest
from scipy import stats

from fdpcore.basis.grids import midpoint_grid
from fdpcore.noise.gaussian import sample_gaussian_whitened
from fdpcore.noise.iclp import sample_laplace_whitened
from fdpcore.summaries.mean import MeanPlan, iclp_ar_attaining_pair, iclp_qr_weights, plan_mean_release, summarise_mean

ALPHA = 1e-4  # per Clopper-Pearson bound
N_LAPLACE = 200_000
N_GAUSS = 1_000_000
EPS = 1.0


def _cp_lower(k: int, n: int) -> float:
    return float(stats.beta.ppf(ALPHA, k, n - k + 1)) if k > 0 else 0.0


def _cp_upper(k: int, n: int) -> float:
    return float(stats.beta.ppf(1 - ALPHA, k + 1, n - k)) if k < n else 1.0


def _pair(estimator: str) -> tuple[MeanPlan, np.ndarray, np.ndarray]:
    """A plan and the whitened summaries of a worst-case neighbouring pair."""
    grid = midpoint_grid(16)
    n, tau = 50, 1.0
    if estimator == "iclp_qr":
        plan = plan_mean_release(grid, {"name": "gaussian", "length_scale": 1.0}, n=n, tau=tau, epsilon=EPS,
                                 eta=1.0, psi=1.0, secure=False)
        a = iclp_qr_weights(plan.basis.eigenvalues, 1.0, 1.0)
        x1 = tau * plan.basis.reconstruct(a / np.linalg.norm(a))
        base = np.zeros((n, grid.size))
    elif estimator == "iclp_ar":
        plan = plan_mean_release(grid, {"name": "gaussian", "length_scale": 0.5}, n=n, tau=tau, epsilon=EPS,
                                 estimator="iclp_ar", eta=1.0, psi=0.05, secure=False)
        pair = iclp_ar_attaining_pair(plan.basis.eigenvalues, eta=1.0, psi=0.05, tau=tau, n=n)
        assert pair is not None
        x1 = plan.basis.reconstruct(pair[0])
        base = np.tile(plan.basis.reconstruct(pair[2]), (n, 1))
    elif estimator == "frl":
        plan = plan_mean_release(grid, {"name": "matern", "nu": 1.5, "rho": 0.1}, n=n, tau=tau, epsilon=EPS,
                                 estimator="frl", n_basis=2, secure=False)
        x1 = plan.basis.reconstruct(np.r_[1.0, 1.0, np.zeros(plan.basis.n_basis - 2)] * tau / np.sqrt(2))
        base = np.zeros((n, grid.size))
    elif estimator == "bernstein":
        plan = plan_mean_release(grid, {"name": "matern", "nu": 1.5, "rho": 0.1}, n=n, tau=100.0, epsilon=EPS,
                                 estimator="bernstein", sup_clip=1.0, lattice_k=1, secure=False)
        x1 = np.ones(grid.size)
        base = np.zeros((n, grid.size))
    else:  # gp
        plan = plan_mean_release(grid, {"name": "matern", "nu": 1.5, "rho": 0.1}, n=n, tau=tau, epsilon=EPS,
                                 delta=1e-2, estimator="gp", eta=1.0, psi=1e-3, secure=False)
        a = iclp_qr_weights(plan.basis.eigenvalues, 1.0, 1e-3)
        x1 = tau * plan.basis.eigenfunctions[:, int(np.argmax(a))]
        base = np.zeros((n, grid.size))
    d, d_prime = base.copy(), base.copy()
    d[0], d_prime[0] = x1, -x1
    return plan, summarise_mean(d, plan), summarise_mean(d_prime, plan)


def _laplace_lower_bound(plan: MeanPlan, z: np.ndarray, z_prime: np.ndarray, scale: float, seed: int) -> float:
    h = z - z_prime
    order = np.argsort(-np.abs(h))
    cover = np.cumsum(np.abs(h[order])) / np.sum(np.abs(h))
    s = order[: int(np.searchsorted(cover, 0.95)) + 1]
    assert s.size <= 3, "the audit pair must concentrate on few coordinates"
    assert plan.calibration is not None
    cal = dataclasses.replace(plan.calibration, scale=scale)
    rng = np.random.default_rng(seed)
    y = sample_laplace_whitened(z[s], cal, draws=N_LAPLACE, rng=rng)
    y_prime = sample_laplace_whitened(z_prime[s], cal, draws=N_LAPLACE, rng=rng)
    far = lambda draws: np.all(np.sign(h[s]) * (draws - z[s]) >= 0, axis=1)  # noqa: E731
    k, k_prime = int(far(y).sum()), int(far(y_prime).sum())
    return math.log(_cp_lower(k, N_LAPLACE) / _cp_upper(k_prime, N_LAPLACE))


def _gaussian_lower_bound(plan: MeanPlan, z: np.ndarray, z_prime: np.ndarray, sigma: float, seed: int) -> float:
    assert plan.calibration is not None
    h = z - z_prime
    j = int(np.argmax(np.abs(h)))
    assert abs(h[j]) == pytest.approx(np.linalg.norm(h), rel=1e-9)  # the pair moves one coordinate only
    shift, sign = abs(h[j]), np.sign(h[j])
    cal = dataclasses.replace(plan.calibration, scale=sigma)
    rng = np.random.default_rng(seed)
    y = sign * (sample_gaussian_whitened(z[j : j + 1], cal, draws=N_GAUSS, rng=rng)[:, 0] - z_prime[j])
    y_prime = sign * (sample_gaussian_whitened(z_prime[j : j + 1], cal, draws=N_GAUSS, rng=rng)[:, 0] - z_prime[j])
    best = -math.inf
    s0 = plan.calibration.scale
    for s in (s0, s0 / 2):  # thresholds fixed in advance: the optimal ones for sigma and sigma / 2 (Bonferroni)
        c = s * s * EPS / shift + shift / 2
        p = _cp_lower(int((y > c).sum()), N_GAUSS) - plan.delta
        q = _cp_upper(int((y_prime > c).sum()), N_GAUSS)
        if p > 0:
            best = max(best, math.log(p / q))
    return best


@pytest.mark.parametrize("estimator", ["iclp_qr", "iclp_ar", "frl", "bernstein"])
def test_laplace_mechanisms_pass_the_audit_and_half_noise_is_caught(estimator: str) -> None:
    plan, z, z_prime = _pair(estimator)
    h = z - z_prime
    assert np.sum(np.abs(h)) == pytest.approx(plan.sensitivity, rel=0.05)  # (near-)worst-case pair
    assert plan.calibration is not None
    scale = plan.calibration.scale
    claimed = _laplace_lower_bound(plan, z, z_prime, scale, seed=1)
    assert 0.8 * EPS < claimed <= EPS
    under = _laplace_lower_bound(plan, z, z_prime, scale / 2, seed=2)
    assert under > EPS


def test_gaussian_mechanism_passes_the_audit_and_half_noise_is_caught() -> None:
    plan, z, z_prime = _pair("gp")
    assert np.linalg.norm(z - z_prime) == pytest.approx(plan.sensitivity, rel=1e-9)  # exact worst case
    assert plan.calibration is not None
    sigma = plan.calibration.scale
    claimed = _gaussian_lower_bound(plan, z, z_prime, sigma, seed=3)
    assert 0.8 * EPS < claimed <= EPS
    assert _gaussian_lower_bound(plan, z, z_prime, sigma / 2, seed=4) > EPS


# ----------------------------------------------------------------------------- every other summary (issue 17)
#
# Generic audit of a Laplace mechanism on whitened coordinates: the privacy-loss statistic
# L(y) = sum_j (|y_j - z'_j| - |y_j - z_j|) / b is the log-likelihood ratio, so {L >= t} is the most powerful
# event; thresholds are fixed in advance (fractions of the pair's maximal loss, Bonferroni over them). The
# pair (z, z') comes from the summary's real pre-noise code on a worst-case (or near-worst) neighbouring pair,
# b from the summary's real plan. FPCA (the exponential mechanism) is audited with its own sampler on the
# event {released direction close to D's record}. Reported numbers: `pytest tests/fdpcore/test_privacy_audit.py
# -q -s -k summary --runslow` prints "audit <summary>: claimed eps -> lower bound (full noise), (half noise)".

N_SUMMARY = 200_000
FRACTIONS = (0.3, 0.5, 0.7, 0.9)


def _laplace_loss_audit(z: np.ndarray, z_prime: np.ndarray, b: float, seed: int, n: int = N_SUMMARY) -> float:
    """Best Clopper-Pearson lower bound on epsilon over the fixed thresholds (Bonferroni: ALPHA each)."""
    h = z - z_prime
    keep = np.abs(h) > 1e-12 * np.abs(h).max()
    z, z_prime = z[keep], z_prime[keep]
    rng = np.random.default_rng(seed)
    loss_max = float(np.sum(np.abs(z - z_prime)) / b)
    best = -math.inf
    y = z + rng.laplace(0.0, b, size=(n, z.size))
    y_prime = z_prime + rng.laplace(0.0, b, size=(n, z.size))
    loss = lambda d: (np.abs(d - z_prime) - np.abs(d - z)).sum(axis=1) / b  # noqa: E731
    l1, l2 = loss(y), loss(y_prime)
    for f in FRACTIONS:
        t = f * loss_max
        p, q = _cp_lower(int((l1 >= t).sum()), n), _cp_upper(int((l2 >= t).sum()), n)
        if p > 0:
            best = max(best, math.log(p / q))
    return best


def _covariance_pair() -> tuple[np.ndarray, np.ndarray, float, float, float]:
    from fdpcore.summaries.covariance import plan_covariance_release, summarise_covariance

    grid, n, tau = midpoint_grid(16), 40, 1.0
    plan = plan_covariance_release(grid, {"name": "gaussian", "length_scale": 0.5}, n=n, tau=tau, epsilon=EPS,
                                   eta=1.0, psi=0.01, secure=False)
    phi = plan.basis.eigenfunctions
    d, d_prime = np.zeros((n, grid.size)), np.zeros((n, grid.size))
    d[0] = tau * phi[:, 0] / grid.norm(phi[:, :1].T)[0]
    d_prime[0] = tau * phi[:, 1] / grid.norm(phi[:, 1:2].T)[0]
    return (summarise_covariance(d, plan), summarise_covariance(d_prime, plan), plan.calibration.scale,
            plan.sensitivity, plan.epsilon)


def _kde_pair(dim: int) -> tuple[np.ndarray, np.ndarray, float, float, float]:
    from fdpcore.summaries.kde import kde_iclp_sensitivity, plan_kde_release, summarise_kde

    axes = midpoint_grid(20) if dim == 1 else [midpoint_grid(8), midpoint_grid(8)]
    n = 30
    plan = plan_kde_release(axes, n=n, epsilon=EPS, eta=1.25, secure=False)
    _, (k, l) = kde_iclp_sensitivity(plan.space, eta=plan.parameters["eta"], kappa=plan.parameters["kappa"], n=n)
    nodes = plan.space.nodes
    others = np.tile(nodes[0], (n - 1, 1))
    d = np.vstack([nodes[k], others])
    d_prime = np.vstack([nodes[l], others])
    codes = np.arange(n)
    return (summarise_kde(d, codes, plan), summarise_kde(d_prime, codes, plan), plan.calibration.scale,
            plan.sensitivity, plan.epsilon)


def _fosr_pair(part: str) -> tuple[np.ndarray, np.ndarray, float, float, float]:
    from fdpcore.summaries.fosr import plan_fosr_release, summarise_fosr

    grid, n = midpoint_grid(16), 30
    plan = plan_fosr_release(grid, {"name": "matern", "nu": 1.5, "rho": 0.1}, n=n, n_covariates=1, intercept=True,
                             bound=1.0, tau_y=1.0, epsilon=EPS, gamma=0.5, eta=1.0, psi=0.01, secure=False)
    z, z_prime = np.zeros((n, 1)), np.zeros((n, 1))
    y, y_prime = np.zeros((n, grid.size)), np.zeros((n, grid.size))
    if part == "T1":
        z[0], z_prime[0] = 1.0, -1.0  # the design moments move most when the covariate flips sign
        t1, _ = summarise_fosr(z, y, plan)
        t1p, _ = summarise_fosr(z_prime, y_prime, plan)
        return t1, t1p, plan.calibration1.scale, plan.delta1, plan.epsilon1
    z[0], z_prime[0] = 1.0, 1.0
    a = iclp_qr_weights(plan.basis.eigenvalues, plan.eta, plan.psi)
    j = int(np.argmax(a))  # one eigenfunction: the shift sits on the T2 coordinates (intercept, z) of index j
    y[0] = plan.basis.eigenfunctions[:, j] / grid.norm(plan.basis.eigenfunctions[:, j:j + 1].T)[0]
    y_prime[0] = -y[0]
    _, g = summarise_fosr(z, y, plan)
    _, gp = summarise_fosr(z_prime, y_prime, plan)
    return g, gp, plan.calibration2.scale, plan.delta2, plan.epsilon2


def _fosr_given_t1_pair() -> tuple[np.ndarray, np.ndarray, float, float, float]:
    """T2 of the default rule after a near-singular released T1~ (tuning.fosr.t2_given_t1@1): the pair it chooses."""
    from fdpcore.summaries.fosr import _reshrink, given_t1, plan_fosr_release, summarise_fosr
    from fdpcore.summaries.mean import iclp_qr_shrinkage

    grid, n = midpoint_grid(16), 200
    plan = plan_fosr_release(grid, {"name": "matern", "nu": 1.5, "rho": 0.1}, n=n, n_covariates=2, intercept=True,
                             bound=1.0, tau_y=1.0, epsilon=4 * EPS, secure=False)
    drawn = given_t1(plan, [[1.0, 0.5, 0.5], [0.5, 0.5, 0.45], [0.5, 0.45, 0.5]])
    assert drawn.t2_amplification is not None and drawn.t2_amplification > 5 and drawn.psi != plan.psi
    lam = plan.basis.eigenvalues
    a = iclp_qr_weights(lam, drawn.eta, drawn.psi)
    z, y = np.zeros((n, 2)), np.zeros((n, grid.size))
    z[0] = 1.0 / np.sqrt(2.0)  # the largest l1 norm at ||z|| = B = 1
    y[0] = plan.basis.reconstruct(a / np.linalg.norm(a))  # the direction attaining the exact T2 bound
    y_prime = y.copy()
    y_prime[0] = -y[0]
    factor = _reshrink(lam, iclp_qr_shrinkage(lam, plan.eta, plan.psi), drawn)
    g, gp = (((summarise_fosr(z, v, plan)[1].reshape(plan.p, -1)) * factor).ravel() for v in (y, y_prime))
    return g, gp, drawn.calibration2.scale, drawn.delta2, drawn.epsilon2


PAIRS = {"covariance": _covariance_pair, "kde_1d": lambda: _kde_pair(1), "kde_2d": lambda: _kde_pair(2),
         "fosr_T1": lambda: _fosr_pair("T1"), "fosr_T2": lambda: _fosr_pair("T2"),
         "fosr_T2_given_t1": _fosr_given_t1_pair}


@pytest.mark.parametrize("summary", ["covariance", "erm_iclp", "fosr_T1", "fosr_T2", "fosr_T2_given_t1", "kde_1d",
                                     "kde_2d"])
def test_summary_audit_stays_below_the_claim_and_half_noise_is_caught(summary: str) -> None:
    """The lower bound at the calibrated noise stays <= epsilon; with half the noise it exceeds epsilon.

    Where the stated sensitivity is an UPPER bound that the pair does not attain (ratio r < 1), "half the
    noise" is taken relative to the pair's own sensitivity (scale r / 2): the audit can only detect what
    the pair can show; both numbers are printed.
    """
    z, z_prime, scale, sensitivity, claim = PAIRS[summary]()  # claim: epsilon of this part
    r = float(np.sum(np.abs(z - z_prime))) / sensitivity
    assert r <= 1 + 1e-9  # the pair never beats the stated sensitivity
    full = _laplace_loss_audit(z, z_prime, scale, seed=11)
    half = _laplace_loss_audit(z, z_prime, scale / 2, seed=12)
    half_r = _laplace_loss_audit(z, z_prime, scale * min(r, 1.0) / 2, seed=13)
    print(f"audit {summary}: claimed eps {claim:g} -> lower bound {full:.3f} (full noise), {half:.3f} (half noise), "
          f"{half_r:.3f} (half of the noise the pair needs); pair attains {r:.3f} of the sensitivity")
    assert full <= claim
    assert half_r > claim
    if r > 0.95:  # (near-)exact pairs: the plain halved noise is caught
        assert half > claim


def _erm_pair(mechanism: str) -> tuple[np.ndarray, np.ndarray, float, float, float]:
    from fdpcore.summaries.erm import plan_erm_release, summarise_erm

    n = 20
    kw = {"delta": 1e-3} if mechanism == "gp" else {}
    plan = plan_erm_release(midpoint_grid(20), {"name": "matern", "nu": 1.5, "rho": 0.2}, n=n, epsilon=EPS,
                            loss="logistic", psi=0.05, mechanism=mechanism, secure=False, **kw)
    x = np.r_[0.0, np.linspace(0.2, 0.8, n - 1)][:, None]
    y = np.r_[1.0, np.where(np.arange(n - 1) % 2 == 0, 1.0, -1.0)]
    x2, y2 = x.copy(), y.copy()
    x2[0], y2[0] = 1.0, -1.0  # the replaced unit moves to the other end with the other label
    codes = np.arange(n)
    return (summarise_erm(x, y, codes, plan), summarise_erm(x2, y2, codes, plan), plan.calibration.scale,
            plan.sensitivity, plan.epsilon)


PAIRS["erm_iclp"] = lambda: _erm_pair("iclp")


def _gaussian_loss_audit(z: np.ndarray, z_prime: np.ndarray, sigma: float, delta: float, seed: int,
                         n: int = N_GAUSS) -> float:
    """The loss of a Gaussian pair is one-dimensional: L = <y - m, h>/sigma^2 along h = z - z'; thresholds fixed."""
    h = z - z_prime
    mu = float(np.linalg.norm(h)) / sigma  # L ~ N(mu^2/2, mu^2) under D and N(-mu^2/2, mu^2) under D'
    rng = np.random.default_rng(seed)
    u = rng.standard_normal(n) * mu + mu * mu / 2  # the loss under D, drawn via its exact one-dimensional law
    u_prime = rng.standard_normal(n) * mu - mu * mu / 2
    best = -math.inf
    for f in FRACTIONS:
        t = f * (mu * mu / 2 + 2 * mu)
        p = _cp_lower(int((u >= t).sum()), n) - delta
        q = _cp_upper(int((u_prime >= t).sum()), n)
        if p > 0:
            best = max(best, math.log(p / q))
    return best


def _hall_pair() -> tuple[np.ndarray, np.ndarray, float, float, float, float]:
    from fdpcore.summaries.kde import plan_kde_release, summarise_kde

    n = 30
    plan = plan_kde_release(midpoint_grid(30), n=n, epsilon=EPS, mechanism="hall_gp", delta=1e-3, secure=False)
    others = np.full((n - 1, 1), 0.5)
    d, d_prime = np.vstack([[0.0], others]), np.vstack([[1.0], others])  # the two ends of the domain
    codes = np.arange(n)
    return (summarise_kde(d, codes, plan), summarise_kde(d_prime, codes, plan), plan.calibration.scale,
            plan.sensitivity, plan.epsilon, plan.delta)


def _erm_gp_pair() -> tuple[np.ndarray, np.ndarray, float, float, float, float]:
    z, zp, s, sens, eps = _erm_pair("gp")
    return z, zp, s, sens, eps, 1e-3


GAUSS_PAIRS = {"kde_hall": _hall_pair, "erm_gp": _erm_gp_pair}


@pytest.mark.parametrize("summary", sorted(GAUSS_PAIRS))
def test_gaussian_summary_audit_stays_below_the_claim_and_half_noise_is_caught(summary: str) -> None:
    z, z_prime, sigma, sensitivity, claim, delta = GAUSS_PAIRS[summary]()
    r = float(np.linalg.norm(z - z_prime)) / sensitivity
    assert r <= 1 + 1e-9
    full = _gaussian_loss_audit(z, z_prime, sigma, delta, seed=21)
    half = _gaussian_loss_audit(z, z_prime, sigma / 2, delta, seed=22)
    half_r = _gaussian_loss_audit(z, z_prime, sigma * min(r, 1.0) / 2, delta, seed=23)
    print(f"audit {summary}: claimed ({claim:g}, {delta:g}) -> lower bound {full:.3f} (full noise), {half:.3f} "
          f"(half noise), {half_r:.3f} (half of the noise the pair needs); pair attains {r:.3f} of the sensitivity")
    assert full <= claim
    assert half_r > claim
    if r > 0.95:
        assert half > claim


# ----------------------------------------------------------------------------- FPCA (exponential mechanism)


def _fpca_plan(k: int, exponent_scale: float):  # noqa: ANN202
    """A plan on m = 3 coefficients with Sigma = I and c = 0 (any public c >= 0 is allowed; here it cancels).

    ``exponent_scale`` multiplies epsilon inside the mechanism only: 2 is "half the noise" of an exponential
    mechanism (its temperature halved), 4 a quarter.
    """
    import dataclasses as dc

    from fdpcore.summaries.fpca import fpca_basis, plan_fpca_release

    basis = fpca_basis(midpoint_grid(20), {"name": "gaussian", "length_scale": 0.3}, 3)
    basis = dc.replace(basis, sigma=np.ones(3))
    return plan_fpca_release(basis, n_components=k, epsilon=EPS * exponent_scale, tau=1.0, prior_strength=0.0)


def _fpca_draws(k: int, gram: np.ndarray, exponent_scale: float, n: int, seed: int) -> np.ndarray:
    from fdpcore.noise.bingham import sample_vector_bingham
    from fdpcore.summaries.fpca import draw_fpca_components, fpca_deflation_parameter

    plan = _fpca_plan(k, exponent_scale)
    rng = np.random.default_rng(seed)
    if k == 1:  # the release's one step (draw_fpca_components, k = 1), all draws at once
        q, a = fpca_deflation_parameter(gram, plan.basis.sigma, np.zeros((3, 0)), epsilon=plan.epsilon_step,
                                        tau=plan.tau, prior_strength=plan.prior_strength)
        return (sample_vector_bingham(a, rng, size=n) @ q.T)[:, :, None]
    return np.stack([draw_fpca_components(plan, gram, rng) for _ in range(n)])


def _circle_log_z(b: np.ndarray) -> np.ndarray:
    """log of the mean of exp(z^T B z) over the unit circle, for a stack of symmetric 2 x 2 matrices."""
    from scipy import special

    lam = np.linalg.eigvalsh(b)
    half = (lam[:, 1] - lam[:, 0]) / 2
    return lam.sum(axis=1) / 2 + np.log(special.ive(0, half)) + half


def _fpca_loss(frames: np.ndarray, eps: float) -> np.ndarray:
    """Exact privacy loss log p_D(V) / p_D'(V) of the pair D = {e1, 0, ...}, D' = {e2, 0, ...} (tau = 1).

    Swapping e1 and e2 maps D to D', so every normaliser of the first step is equal; for k = 2 the second step's
    normalisers on the circle orthogonal to v_1 are computed in closed form.
    """
    k = frames.shape[2]
    e_step = eps / k
    v1 = frames[:, :, 0]
    loss = e_step / 2 * (v1[:, 0] ** 2 - v1[:, 1] ** 2)
    if k == 2:
        u, _, _ = np.linalg.svd(v1[:, :, None], full_matrices=True)
        q = u[:, :, 1:]  # orthonormal complement of v_1
        v2 = frames[:, :, 1]
        g_d, g_dp = np.diag([1.0, 0.0, 0.0]), np.diag([0.0, 1.0, 0.0])
        b_d = e_step / 2 * np.einsum("nia,ij,njb->nab", q, g_d, q)
        b_dp = e_step / 2 * np.einsum("nia,ij,njb->nab", q, g_dp, q)
        loss += e_step / 2 * (v2[:, 0] ** 2 - v2[:, 1] ** 2) - _circle_log_z(b_d) + _circle_log_z(b_dp)
    return loss


def _fpca_audit(k: int, exponent_scale: float, n: int, seed: int) -> tuple[float, float]:
    """(lower bound on epsilon, the pair's exact largest loss) for the mechanism with ``exponent_scale``."""
    eps = EPS * exponent_scale
    g_d = np.zeros((3, 3))
    g_d[0, 0] = 1.0
    g_dp = np.zeros((3, 3))
    g_dp[1, 1] = 1.0
    ld = _fpca_loss(_fpca_draws(k, g_d, exponent_scale, n, seed), eps)
    ldp = _fpca_loss(_fpca_draws(k, g_dp, exponent_scale, n, seed + 1), eps)
    cap = eps / (2 * k) * (1.0 + (0.5 if k == 2 else 0.0))  # upper bound on the pair's loss used for thresholds
    best = -math.inf
    for f in FRACTIONS:
        t = f * cap
        p, q = _cp_lower(int((ld >= t).sum()), n), _cp_upper(int((ldp >= t).sum()), n)
        if p > 0:
            best = max(best, math.log(p / q))
    exact = float(max(ld.max(), -ldp.min()))
    return best, exact


@pytest.mark.parametrize("k", [1, pytest.param(2, marks=pytest.mark.slow)], ids=["k1-exact", "k2-deflation"])
def test_fpca_audit_stays_below_the_claim_and_less_noise_is_caught(k: int) -> None:
    """The exponential mechanism's eps bound is loose by about 2 for this utility (the pair's loss is eps/2 for
    k = 1): half the noise only reaches about eps, so a quarter of the noise is where a violation exists."""
    n = 200_000 if k == 1 else 20_000
    full, loss_full = _fpca_audit(k, 1.0, n, seed=31)
    half, _ = _fpca_audit(k, 2.0, n, seed=33)
    quarter, _ = _fpca_audit(k, 4.0, n, seed=35)
    print(f"audit fpca k={k}: claimed eps {EPS:g} -> lower bound {full:.3f} (full noise), {half:.3f} (half noise), "
          f"{quarter:.3f} (quarter noise); the pair's largest loss at full noise {loss_full:.3f}")
    assert full <= EPS and full <= loss_full + 1e-9
    assert half > full  # the audit sees the change
    assert quarter > EPS
