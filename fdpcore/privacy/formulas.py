"""Registry of formula ids: one formula, one function, one proof note.

Manifests cite these ids (e.g. ``sensitivity.bound = "sensitivity.mean.iclp_qr.exact_l2@1"``)
so that an auditor can go from a release to the code (``function``), the
specification (``math``, a MATH.md section) and the proof note (``docs/proofs/<id>.md``).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from fdpcore.errors import DomainError

__all__ = ["FORMULAS", "HOMES", "Formula", "formula", "home", "resolve"]


@dataclass(frozen=True)
class Formula:
    """A registered formula: stable id, implementing function, MATH.md section, status."""

    id: str
    function: str
    math: str
    status: str  # EXACT | UPPER | PAPER | DEFINITION | RULE | APPROX (an accuracy figure, never a privacy bound)

    @property
    def proof_note(self) -> str:
        """Path of the proof note relative to the repository root."""
        return f"docs/proofs/{self.id}.md"


_ENTRIES = [
    Formula("grid.midpoint@1", "fdpcore.basis.grids.midpoint_grid", "§1.1", "DEFINITION"),
    Formula("grid.trapezoid@1", "fdpcore.basis.grids.trapezoid_weights", "§1.1", "DEFINITION"),
    Formula("eigen.weighted_kl@1", "fdpcore.basis.eigen.weighted_eigenbasis", "§1.3-1.4", "DEFINITION"),
    Formula("preprocess.align_linear@1", "fdpcore.data.preprocess.align_long", "§1.7", "RULE"),
    Formula("preprocess.align_linear@2", "fdpcore.data.preprocess.align_long", "§1.7", "RULE"),
    Formula("preprocess.clip_l2@1", "fdpcore.data.preprocess.clip_l2", "§1.7", "DEFINITION"),
    Formula("preprocess.quantise_lattice@1", "fdpcore.data.accumulate.quantise_records", "§1.7", "DEFINITION"),
    Formula("estimator.mean.iclp_qr@1", "fdpcore.summaries.mean.iclp_qr_mean_coefficients", "§4.3", "DEFINITION"),
    Formula("sensitivity.mean.iclp_qr.exact_l2@1", "fdpcore.summaries.mean.iclp_qr_sensitivity", "§4.3", "EXACT"),
    Formula("sensitivity.mean.iclp_qr.paper_l1@1", "fdpcore.summaries.mean.iclp_qr_paper_sensitivity", "§4.3", "PAPER"),
    Formula("calibration.iclp.laplace_whitened@1", "fdpcore.noise.iclp.calibrate_iclp", "§3.3", "EXACT"),
    Formula("noise.iclp.expected_sq_l2@1", "fdpcore.noise.iclp.iclp_expected_sq_error", "§3.5", "EXACT"),
    Formula("noise.whitened.expected_sq_l2@1", "fdpcore.noise.iclp.whitened_expected_sq_error", "§3.5, §4.4", "EXACT"),
    Formula("estimator.mean.frl@1", "fdpcore.summaries.mean.frl_mean_coefficients", "§4.1", "DEFINITION"),
    Formula("sensitivity.mean.frl.exact@1", "fdpcore.summaries.mean.frl_sensitivity", "§4.1", "EXACT"),
    Formula("sensitivity.mean.frl.paper@1", "fdpcore.summaries.mean.frl_paper_sensitivity", "§4.1", "PAPER"),
    Formula("estimator.mean.iclp_ar@1", "fdpcore.summaries.mean.iclp_ar_mean_coefficients", "§4.2", "DEFINITION"),
    Formula("sensitivity.mean.iclp_ar.l2@1", "fdpcore.summaries.mean.iclp_ar_sensitivity", "§4.2", "UPPER"),
    Formula("sensitivity.mean.iclp_ar.paper@1", "fdpcore.summaries.mean.iclp_ar_paper_sensitivity", "§4.2", "PAPER"),
    Formula("sensitivity.mean.gp.cm_exact@1", "fdpcore.summaries.mean.gp_cm_sensitivity", "§4.4", "EXACT"),
    Formula("sensitivity.mean.gp.cm_spectrum_free@1", "fdpcore.summaries.mean.gp_cm_spectrum_free_bound", "§4.4", "UPPER"),
    Formula("sensitivity.mean.gp.mrs_paper@1", "fdpcore.summaries.mean.gp_cm_paper_sensitivity", "§4.4", "PAPER"),
    Formula("calibration.gaussian.analytic@1", "fdpcore.noise.gaussian.analytic_gaussian_sigma", "§4.4", "EXACT"),
    Formula("calibration.gaussian.classical@1", "fdpcore.noise.gaussian.classical_gaussian_sigma", "§4.4", "UPPER"),
    Formula("preprocess.public_reference@1", "fdpcore.data.preprocess.centre_on_reference", "§1.7, §4 (derived here)",
            "DEFINITION"),
    Formula("estimator.mean.bernstein@1", "fdpcore.noise.bernstein.bernstein_basis", "§4.5", "DEFINITION"),
    # sup_exact@1 claimed attainment, which fails when the L2 clip cuts the constant curves +-B (issue 17);
    # kept resolvable for old manifests, superseded by sup_upper@1 (same value, honest status)
    Formula("sensitivity.mean.bernstein.sup_exact@1", "fdpcore.noise.bernstein.bernstein_sensitivity", "§4.5", "UPPER"),
    Formula("sensitivity.mean.bernstein.sup_upper@1", "fdpcore.noise.bernstein.bernstein_sensitivity", "§4.5", "UPPER"),
    Formula("noise.bernstein.expected_sq_l2@1", "fdpcore.noise.bernstein.bernstein_expected_sq_error", "§4.5", "EXACT"),
    Formula("preprocess.clip_sup@1", "fdpcore.noise.bernstein.clip_sup", "§1.7", "DEFINITION"),
    *(
        Formula(f"tuning.pss.frl.{rule}@1", "fdpcore.privacy.tuning.pss_frl", "§5.1", "RULE")
        for rule in ("exact", "paper")
    ),
    *(
        Formula(f"tuning.pss.iclp_ar.{rule}@1", "fdpcore.privacy.tuning.pss_iclp_ar", "§4.2, §5.1", "RULE")
        for rule in ("derived_l1", "tightened_l2")
    ),
    Formula("tuning.pss.bernstein.derived_c2@1", "fdpcore.privacy.tuning.pss_bernstein", "§4.5 (derived)", "RULE"),
    # @1 (positional split) is withdrawn: replacing one unit could shift the split (issue 17); kept resolvable
    Formula("selection.exp_mech.score_sensitivity@1", "fdpcore.noise.selection.selection_score_sensitivity", "§5.3", "UPPER"),
    Formula("selection.exp_mech.score_sensitivity@2", "fdpcore.noise.selection.selection_score_sensitivity", "§5.3", "UPPER"),
    Formula("selection.exp_mech.gumbel@1", "fdpcore.noise.selection.exponential_select", "§5.3", "EXACT"),
    Formula("tuning.risk.iclp_qr.prior@1", "fdpcore.privacy.tuning.risk_prior_iclp_qr", "§4.3, §5.1 (derived here)", "RULE"),
    Formula("tuning.risk.iclp_qr.prior@2", "fdpcore.privacy.tuning.risk_prior_iclp_qr", "§4.3, §5.1 (derived here)", "RULE"),
    Formula("tuning.risk.signal_default@1", "fdpcore.privacy.tuning.default_signal_fraction", "§5.1 (derived here)", "RULE"),
    Formula("tuning.risk.signal_stated@1", "fdpcore.privacy.tuning.stated_signal_fraction", "§5.1 (derived here)", "RULE"),
    Formula("tuning.tau.dp_norm_quantile@1", "fdpcore.noise.quantiles.dp_quantile", "§1.7, §12.3 (derived here)", "EXACT"),
    Formula("tuning.tau.dp_norm_quantile@2", "fdpcore.noise.quantiles.dither_norms", "§1.7, §12.3 (derived here)", "EXACT"),
    # @1 (fall back to the a-priori tau whenever the floor exceeds half of epsilon) is superseded by @2 (half of
    # epsilon buys the quantile down to half the floor); kept resolvable for old manifests
    Formula("tuning.tau.a_priori_fallback@1", "fdpcore.noise.quantiles.a_priori_tau_choice", "§1.7, §12.3 (derived here)", "RULE"),
    Formula("tuning.tau.a_priori_fallback@2", "fdpcore.noise.quantiles.a_priori_tau_choice", "§1.7, §12.3 (derived here)", "RULE"),
    Formula("tuning.tau.bound_pays@1", "fdpcore.noise.quantiles.bound_pays", "§1.7, §5.1 (derived here)", "RULE"),
    Formula("tuning.tau.quantile_level@1", "fdpcore.noise.quantiles.tau_quantile_level", "§1.7 (derived here)", "RULE"),
    Formula("tuning.tau.quantile_level@2", "fdpcore.noise.quantiles.tau_quantile_level", "§1.7 (derived here)", "RULE"),
    # @3: tau's split is also raised (up to a quarter of epsilon) so the level can reach 0.8 (the mean)
    Formula("tuning.tau.quantile_level@3", "fdpcore.noise.quantiles.tau_epsilon", "§1.7 (derived here)", "RULE"),
    Formula("tuning.tau.summary_level@1", "fdpcore.noise.quantiles.summary_tau_level", "§1.7, §6, §7, §10 (derived here)",
            "RULE"),
    Formula("preprocess.centre.dp_median@1", "fdpcore.noise.quantiles.draw_public_choice", "§1.7, §12.3 (derived here)",
            "EXACT"),
    *(
        Formula(f"tuning.pss.iclp_qr.{rule}@1", "fdpcore.privacy.tuning.pss_iclp_qr", "§5.1", "RULE")
        for rule in ("exact_balanced", "exact_free", "paper_balanced", "paper_free")
    ),
    Formula("accounting.pure.sequential@1", "fdpcore.privacy.accounting.compose_pure", "§12.1", "EXACT"),
    Formula("accounting.zcdp.from_pure@1", "fdpcore.privacy.accounting.pure_to_zcdp", "§12.1", "EXACT"),
    Formula("accounting.zcdp.to_approx@1", "fdpcore.privacy.accounting.zcdp_to_epsilon", "§12.1", "UPPER"),
    Formula("sensitivity.fpca.projection_energy@1", "fdpcore.summaries.fpca.fpca_sensitivity", "§10.2", "EXACT"),
    Formula("calibration.fpca.bingham_exponential@1", "fdpcore.summaries.fpca.fpca_bingham_parameter", "§10.1, §10.3", "EXACT"),
    Formula("sensitivity.fpca.deflated_energy@1", "fdpcore.summaries.fpca.fpca_deflated_sensitivity", "§10.2", "EXACT"),
    Formula("calibration.fpca.deflation@1", "fdpcore.summaries.fpca.fpca_deflation_parameter", "§10.3", "EXACT"),
    Formula("accuracy.fpca.energy_shortfall@1", "fdpcore.summaries.fpca.fpca_energy_shortfall", "§10.3-10.5", "APPROX"),
    Formula("accuracy.fosr.coefficient_noise@1", "fdpcore.summaries.fosr.fosr_coefficient_noise", "§7", "APPROX"),
    Formula("tuning.fpca.gaussian_basis@1", "fdpcore.summaries.fpca.gaussian_length_scale", "§10.3, §13.6", "RULE"),
    Formula("metric.fpca.variance_ratio@1", "fdpcore.summaries.fpca.variance_ratio", "§10.5", "DEFINITION"),
    Formula("metric.fpca.projection_distance@1", "fdpcore.summaries.fpca.projection_distance", "§10.5", "DEFINITION"),
    Formula("sampler.bingham.acg_rejection@1", "fdpcore.noise.bingham.sample_vector_bingham", "§10.4", "EXACT"),
    Formula("sampler.bingham.hoff_scan@1", "fdpcore.noise.bingham.hoff_scan", "§10.4", "EXACT"),
    Formula("sampler.bingham.matrix_gibbs@1", "fdpcore.noise.bingham.sample_matrix_bingham", "§10.4-10.5", "DEFINITION"),
    Formula("eigen.tensor_kron@1", "fdpcore.basis.tensor.tensor_eigenbasis", "§1.6", "DEFINITION"),
    Formula("kernel.power_spectral@1", "fdpcore.basis.norms.power_kernel", "§1.5, §2.3", "DEFINITION"),
    Formula("kernel.power_trace@1", "fdpcore.basis.norms.power_trace", "§1.5, §2.3", "DEFINITION"),
    Formula("norm.power@1", "fdpcore.basis.norms.power_norm", "§1.5", "DEFINITION"),
    Formula("norm.cameron_martin@1", "fdpcore.basis.norms.cameron_martin_norm", "§1.5", "DEFINITION"),
    Formula("norm.one_c@1", "fdpcore.basis.norms.one_c_norm", "§1.5", "DEFINITION"),
    Formula("release.hrw.batch@1", "fdpcore.summaries.hrw.release_hrw_batch", "§11", "EXACT"),
    Formula("release.hrw.online_conditional@1", "fdpcore.summaries.hrw.gaussian_conditional", "§11", "EXACT"),
    Formula("release.hrw.online_ou_bridge@1", "fdpcore.summaries.hrw.ou_bridge_conditional", "§11", "EXACT"),
    Formula("preprocess.points.unit_average@1", "fdpcore.summaries.kde.unit_point_weights", "§8, §9, §12.2", "RULE"),
    Formula("tuning.kde.bandwidth@1", "fdpcore.summaries.kde.kde_bandwidth", "§5.1, §8", "RULE"),
    Formula("tuning.kde.normal_reference@1", "fdpcore.summaries.kde.kde_reference_bandwidth", "§5.1, §8 (derived here)",
            "RULE"),
    Formula("tuning.kde.bandwidth_auto@1", "fdpcore.summaries.kde.choose_kde_bandwidth", "§5.1, §5.3, §8, §12.1 (derived here)",
            "EXACT"),
    Formula("estimator.kde.normaliser@1", "fdpcore.summaries.kde.kde_normaliser", "§8.1", "DEFINITION"),
    Formula("estimator.kde.iclp_qr@1", "fdpcore.summaries.kde.kde_iclp_coefficients", "§8.1", "DEFINITION"),
    Formula("sensitivity.kde.iclp_qr.exact_grid@1", "fdpcore.summaries.kde.kde_iclp_sensitivity", "§8.1", "EXACT"),
    Formula("sensitivity.kde.iclp_qr.cs_upper@1", "fdpcore.summaries.kde.kde_iclp_cs_sensitivity", "§8.1", "UPPER"),
    Formula("sensitivity.kde.iclp_qr.paper@1", "fdpcore.summaries.kde.kde_iclp_paper_sensitivity", "§8.1, §14 item 10", "PAPER"),
    Formula("estimator.kde.hall_gaussian@1", "fdpcore.summaries.kde.hall_kde_values", "§8.2", "DEFINITION"),
    Formula("sensitivity.kde.hall.compact_exact@1", "fdpcore.summaries.kde.hall_kde_sensitivity", "§8.2", "EXACT"),
    Formula("sensitivity.kde.hall.paper@1", "fdpcore.summaries.kde.hall_kde_paper_sensitivity", "§8.2", "PAPER"),
    Formula("estimator.erm.rkhs@1", "fdpcore.summaries.erm.solve_erm", "§9", "DEFINITION"),
    Formula("estimator.erm.fixed_iterations@1", "fdpcore.summaries.erm.erm_fallback_iterations", "§9", "UPPER"),
    Formula("sensitivity.erm.lipschitz@1", "fdpcore.summaries.erm.erm_lipschitz", "§9", "UPPER"),
    Formula("sensitivity.erm.rkhs@1", "fdpcore.summaries.erm.erm_rkhs_sensitivity", "§9", "UPPER"),
    Formula("sensitivity.erm.iclp_one_c@1", "fdpcore.summaries.erm.erm_iclp_sensitivity", "§9", "UPPER"),
    Formula("sensitivity.erm.gp_cm@1", "fdpcore.summaries.erm.erm_gp_sensitivity", "§9", "UPPER"),
    Formula("tuning.erm.psi.risk_prior@1", "fdpcore.summaries.erm.erm_psi_risk_prior", "§9 (derived here)", "RULE"),
    Formula("estimator.cov.iclp_qr@1", "fdpcore.summaries.covariance.iclp_qr_covariance_coefficients", "§6", "DEFINITION"),
    Formula("sensitivity.cov.public_center@1", "fdpcore.summaries.covariance.covariance_public_sensitivity", "§6 (a)", "UPPER"),
    Formula("sensitivity.cov.sample_mean_center@1", "fdpcore.summaries.covariance.covariance_sample_mean_sensitivity", "§6 (b)", "UPPER"),
    Formula("postprocess.cov.psd_projection@1", "fdpcore.summaries.covariance.psd_projection", "§6", "DEFINITION"),
    Formula("estimator.fosr.ols@1", "fdpcore.summaries.fosr.fosr_moments", "§7", "DEFINITION"),
    Formula("sensitivity.fosr.t1.l1@1", "fdpcore.summaries.fosr.fosr_t1_sensitivity", "§7", "UPPER"),
    Formula("sensitivity.fosr.t2.exact@1", "fdpcore.summaries.fosr.fosr_t2_sensitivity", "§7, §14 item 9", "EXACT"),
    Formula("tuning.fosr.gamma_balanced@1", "fdpcore.summaries.fosr.fosr_gamma_balanced", "§7 (derived here)", "RULE"),
    Formula("tuning.fosr.t2_given_t1@1", "fdpcore.summaries.fosr.given_t1", "§7, §12.1 (derived here)", "RULE"),
    Formula("postprocess.fosr.structural_zeros@1", "fdpcore.summaries.fosr.zero_structural", "§7 (derived here)", "DEFINITION"),
    Formula("postprocess.fosr.safe_inverse@1", "fdpcore.summaries.fosr.safe_inverse", "§7", "DEFINITION"),
]

#: All registered formulas by id.
FORMULAS: dict[str, Formula] = {f.id: f for f in _ENTRIES}


_SUMMARY_MODULES = {"mean": "mean", "cov": "covariance", "fosr": "fosr", "kde": "kde", "erm": "erm", "fpca": "fpca",
                    "hrw": "hrw"}

#: Where a formula lives, by the leading components of its id (the longest matching prefix wins).
#: A summary's estimator, sensitivities, post-processing, metrics and summary-specific tuning live in
#: its module under ``fdpcore/summaries/``; bases, grids and norms in ``fdpcore/basis/``; noise,
#: calibration, samplers, private selection and private quantiles in ``fdpcore/noise/``; accounting and
#: the mean's tuning rules in ``fdpcore/privacy/``; alignment, clipping and exact sums in ``fdpcore/data/``.
#: The Bernstein baseline is one mechanism (its lattice estimator, sup clip and sensitivity together) in
#: ``fdpcore/noise/bernstein.py``. tests/test_architecture.py checks every registered id against this table.
HOMES: dict[str, str] = {
    "grid": "fdpcore.basis", "eigen": "fdpcore.basis", "kernel": "fdpcore.basis", "norm": "fdpcore.basis",
    "noise": "fdpcore.noise", "calibration": "fdpcore.noise", "sampler": "fdpcore.noise",
    "selection": "fdpcore.noise", "tuning.tau": "fdpcore.noise.quantiles",
    "preprocess.centre": "fdpcore.noise.quantiles",
    "accounting": "fdpcore.privacy", "tuning": "fdpcore.privacy.tuning",
    "preprocess": "fdpcore.data", "preprocess.points": "fdpcore.summaries.kde",
    "preprocess.clip_sup": "fdpcore.noise.bernstein", "estimator.mean.bernstein": "fdpcore.noise.bernstein",
    "sensitivity.mean.bernstein": "fdpcore.noise.bernstein",
    **{f"{kind}.{key}": f"fdpcore.summaries.{module}" for key, module in _SUMMARY_MODULES.items()
       for kind in ("estimator", "sensitivity", "postprocess", "metric", "release", "calibration", "tuning",
                    "accuracy")},
}


def home(formula_id: str) -> str:
    """The package or module where ``formula_id`` is implemented, from :data:`HOMES`.

    >>> home("sensitivity.cov.public_center@1")
    'fdpcore.summaries.covariance'
    >>> home("calibration.iclp.laplace_whitened@1")
    'fdpcore.noise'
    """
    parts = formula_id.split("@")[0].split(".")
    for k in range(len(parts), 0, -1):
        prefix = ".".join(parts[:k])
        if prefix in HOMES:
            return HOMES[prefix]
    raise DomainError(f"formula id ({formula_id!r}) has no home in fdpcore.privacy.formulas.HOMES")


def formula(formula_id: str) -> Formula:
    """Look up a registered formula.

    >>> formula("sensitivity.mean.iclp_qr.exact_l2@1").math
    '§4.3'
    """
    try:
        return FORMULAS[formula_id]
    except KeyError:
        raise DomainError(f"formula id ({formula_id!r}) is not registered") from None


def resolve(formula_id: str) -> Callable[..., Any]:
    """The function that implements ``formula_id``."""
    module, _, name = formula(formula_id).function.rpartition(".")
    fn: Callable[..., Any] = getattr(importlib.import_module(module), name)
    return fn
