"""Closing-note numbers for the covariance and function-on-scalar regression releases (issue 6, items 1-2).

For each shipped example at epsilon = 1 it prints
* the expected privacy error of the mechanism, sqrt(E||noise||^2) (public: from the plan alone), and
* the measured L2 distance between private draws and the non-private estimate computed from the same
  clipped records (the same estimator without noise, and the raw unregularised one), mean +- sd over draws.

A methodologist script: it computes non-private estimates and prints them only as distances; it
publishes nothing. Draws use the NumPy sampler (secure=False) for speed; one OpenDP draw is added for
comparison. Run:  .venv/bin/python experiments/summaries_covariance_regression.py [--draws 200]
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
from fdp.flows.config import load_config
from fdp.tasks import load_curves
from fdp.tasks.fosr import load_covariates
from fdp.tasks.mean import release_grid

from fdpcore.data.preprocess import clip_l2
from fdpcore.summaries.covariance import (
    covariance_surface,
    draw_covariance_release,
    empirical_covariance_coefficients,
    iclp_qr_covariance_coefficients,
    plan_covariance_release,
    psd_projection,
    summarise_covariance,
)
from fdpcore.summaries.fosr import (
    clip_covariates,
    design_matrix,
    draw_fosr_release,
    fosr_moments,
    plan_fosr_release,
    summarise_fosr,
)
from fdpcore.summaries.fpca import reference_on_grid

REPO = Path(__file__).resolve().parents[1]


def _l2_surface(a: np.ndarray, w: np.ndarray) -> np.ndarray:
    return np.sqrt(np.einsum("...kl,k,l,...kl->...", a, w, w, a))


def covariance(draws: int, rng: np.random.Generator, tau: float | None = None, rule: str | None = None,
               centerings: tuple[str, ...] = ("public", "sample_mean")) -> None:
    path = REPO / "examples" / "electricity_covariance.yaml"
    config = load_config(path)
    tau = tau if tau is not None else config.clipping.tau
    rule = rule if rule is not None else config.tuning.rule
    scale2 = config.dataset.value_scale**2
    batch = load_curves.fn(config, str(path.parent))
    grid = release_grid(config)
    w = grid.weights
    print(f"== covariance surface: {path.name} (n = {batch.n_samples}, K = {grid.size}, epsilon = 1, tau_c = {tau:g}, "
          f"rule {rule}); units MW^2")
    for centering in centerings:
        center = np.zeros(grid.size) if centering == "public" else None
        x = batch.data_matrix - (center if center is not None else 0.0)
        plan = plan_covariance_release(grid, config.kernel, n=batch.n_samples, tau=tau, epsilon=1.0,
                                       centering=centering, tuning=rule, secure=False)
        clipped, _ = clip_l2(x, w, plan.tau)
        kbar = empirical_covariance_coefficients(plan.basis.coefficients(clipped), centering=centering)
        khat = iclp_qr_covariance_coefficients(kbar, plan.basis.eigenvalues, eta=plan.eta, psi=plan.psi)
        z = summarise_covariance(clipped, plan)
        m = draw_covariance_release(plan, z, draws=draws, rng=rng)
        raw = np.cov(clipped.T, bias=True) if centering == "sample_mean" else clipped.T @ clipped / clipped.shape[0]
        for label, rel in (("raw", m), ("psd", psd_projection(m))):
            surf = covariance_surface(rel, plan.basis)
            d_hat = _l2_surface(surf - covariance_surface(khat, plan.basis), w) * scale2
            d_raw = _l2_surface(surf - raw, w) * scale2
            print(f"  {centering:11s} {label}: expected privacy error {np.sqrt(plan.expected_sq_l2_error) * scale2:10.1f}; "
                  f"L2 to non-private ICLP-QR estimate {d_hat.mean():10.1f} +- {d_hat.std():8.1f}; "
                  f"L2 to raw empirical covariance {d_raw.mean():10.1f} +- {d_raw.std():8.1f}")
        print(f"  {centering:11s} scale: ||non-private ICLP-QR estimate|| = {_l2_surface(covariance_surface(khat, plan.basis), w) * scale2:.1f}, "
              f"||raw|| = {_l2_surface(raw, w) * scale2:.1f}; sensitivity {plan.sensitivity:.4g}, eta {plan.eta:g}, psi {plan.psi:.4g}")
        secure = plan_covariance_release(grid, config.kernel, n=batch.n_samples, tau=plan.tau, epsilon=1.0,
                                         centering=centering, tuning=rule, secure=True)
        one = covariance_surface(draw_covariance_release(secure, z, draws=1)[0], plan.basis)
        print(f"  {centering:11s} one OpenDP draw: L2 to non-private ICLP-QR estimate "
              f"{_l2_surface(one - covariance_surface(khat, plan.basis), w) * scale2:.1f}")


def fosr(draws: int, rng: np.random.Generator, kernel: dict | None = None, rule: str | None = None,
         gammas: tuple[float | None, ...] = (None, 0.05, 0.15, 0.3, 0.5)) -> None:
    path = REPO / "examples" / "growth_fosr.yaml"
    config = load_config(path)
    kernel = kernel if kernel is not None else config.kernel
    rule = rule if rule is not None else config.tuning.rule
    ds = config.dataset
    batch = load_curves.fn(config, str(path.parent))
    grid = release_grid(config)
    n = batch.n_samples
    ref = reference_on_grid(config.centering.time, config.centering.value, grid, time_domain=ds.time_domain,
                            value_offset=ds.value_offset, value_scale=ds.value_scale)
    y, _ = clip_l2(batch.data_matrix - ref, grid.weights, config.clipping.tau)
    zraw = load_covariates.fn(config, str(path.parent), n).data_matrix
    names = ["intercept"] + [c.name for c in config.covariates]
    print(f"\n== function-on-scalar regression: {path.name} (n = {n}, p = {len(names)}, epsilon = 1, kernel {kernel}, "
          f"rule {rule}); units cm, "
          "L2 over the age domain mapped to [0, 1] (RMS over ages)")
    for gamma in gammas:
        plan = plan_fosr_release(grid, kernel, n=n, n_covariates=len(config.covariates), intercept=True,
                                 bound=config.covariate_bound, tau_y=config.clipping.tau, epsilon=1.0, gamma=gamma,
                                 tuning=rule, secure=False)
        z, _ = clip_covariates(zraw, plan.bound)
        z1, z2 = summarise_fosr(z, y, plan)
        coef, _, _ = draw_fosr_release(plan, z1, z2, draws=draws, rng=rng)
        t1, g = fosr_moments(design_matrix(z, intercept=True), plan.basis.coefficients(y))
        ols = np.linalg.solve(t1, g) @ plan.basis.eigenfunctions.T
        d = np.sqrt(np.einsum("dpk,k,dpk->dp", coef - ols, grid.weights, coef - ols)) * ds.value_scale
        label = f"gamma {plan.gamma:.2f}" + (" (default rule)" if gamma is None else "")
        per = "; ".join(f"{nm}: {d[:, m].mean():6.2f} +- {d[:, m].std():5.2f}" for m, nm in enumerate(names))
        print(f"  {label:24s} expected T2 privacy error {np.sqrt(plan.expected_sq_l2_error_t2) * ds.value_scale:6.2f}; "
              f"L2 to non-private OLS: {per}")
        if gamma is None:
            norms = np.sqrt(np.einsum("pk,k,pk->p", ols, grid.weights, ols)) * ds.value_scale
            print("  scale: ||non-private OLS|| " + "; ".join(f"{nm}: {v:.2f}" for nm, v in zip(names, norms, strict=True))
                  + " (intercept relative to the public reference curve)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--draws", type=int, default=200)
    args = parser.parse_args()
    rng = np.random.default_rng(20261122)
    covariance(args.draws, rng)
    fosr(args.draws, rng)
    print("\n== methodologist scan (how the examples' tau_c, kernel and rule were chosen; uses the data, "
          "so it is outside the privacy guarantee)")
    for tau, rule in ((1.0, "exact_balanced"), (1.0, "exact_free"), (0.5, "exact_balanced")):
        covariance(max(args.draws // 4, 10), rng, tau=tau, rule=rule, centerings=("public",))
    for kernel, rule in (({"name": "matern", "nu": 1.5, "rho": 0.1}, "exact_balanced"),
                         ({"name": "matern", "nu": 2.5, "rho": 0.3}, "exact_balanced")):
        fosr(max(args.draws // 4, 10), rng, kernel=kernel, rule=rule, gammas=(None,))


if __name__ == "__main__":
    main()
