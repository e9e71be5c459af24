"""Release config of RKHS-regularised ERM (MATH.md §9): kernel ridge, logistic regression, hinge-loss SVM.

The dataset is a point table (:class:`fdp.schemas.kde.PointDatasetSpec`) plus a label column; the
release is the fitted function on the grid (one covariate, or two on a tensor grid) with ICLP
(pure) or Gaussian-process (approximate) noise. The manifest is :class:`fdp.schemas.kde.PointManifest`.
"""

from __future__ import annotations

from typing import Any, Literal

from fdp.schemas._base import Frozen, PositiveFloat
from fdp.schemas.config import BudgetSpec, GridSpec, PrivacySpec, ReleaseSeriesSpec, kernel_mapping
from fdp.schemas.kde import PointDatasetSpec, _unit_grid, check_tensor_nodes
from pydantic import Field, field_validator, model_validator

__all__ = ["ErmDatasetSpec", "ErmReleaseConfig"]


class ErmDatasetSpec(PointDatasetSpec):
    """A point table with a label/response column."""

    label_column: str = Field(min_length=1, description="labels: -1/+1 for logistic and hinge; a response for ridge")
    labels: Literal["sign", "error"] = Field(
        "sign", description="logistic/hinge: a label other than -1/+1 becomes +1 if positive, else -1 (record-wise, so "
                            "0/1 coding works; counted in the ledger's internal entry only), or 'error': stop before the "
                            "charge naming the row (on the curator's terminal only)")


class ErmReleaseConfig(Frozen):
    """A private RKHS-regularised ERM release, as written in YAML."""

    schema_version: Literal[1] = Field(1, description="config schema version")
    summary: Literal["erm"] = Field(description="the summary to release")
    dataset: ErmDatasetSpec = Field(description="where the data is, its columns, the privacy unit and the public time/value rescaling")
    grid: GridSpec = Field(description="grid on [0, 1] used for every covariate (a tensor grid in 2-D)")
    loss: Literal["ridge", "logistic", "hinge"] = Field(description="squared (kernel ridge), logistic, or hinge (SVM)")
    mechanism: Literal["iclp", "gp"] = Field("iclp", description="iclp: pure DP; gp: Gaussian process, (epsilon, delta)")
    kernel: dict[str, Any] = Field(description="1-D kernel C, e.g. {name: matern, nu: 1.5, rho: 0.2}; product kernel in 2-D")
    eta: float = Field(1.5, ge=1.0, description="H = H_{C^eta}; eta > 1 + 1/beta keeps the ICLP bound grid-uniform")
    psi: PositiveFloat | Literal["auto"] = Field(
        "auto", description="regularisation weight of ||f||^2 in H_{C^eta}: 'auto' (default) chooses it by the public rule "
        "tuning.erm.psi.risk_prior@1 from n, epsilon/delta, the mechanism, the kernel, the loss and label_bound (no data, "
        "no budget): the psi minimising the expected squared noise (sensitivity M kappa/(psi n), so noise falls as psi "
        "grows) plus the smoothing bias and sampling variance of a regression function of public size "
        "0.5 x label_bound (ridge) or 1 (logistic, hinge), which grow and fall with psi; `fdp plan` shows the psi it "
        "picks at each epsilon. Or a number fixed a priori")
    label_bound: PositiveFloat | None = Field(None, description="ridge only: responses are clipped to [-B_y, B_y] (after "
                                                          "label_offset is subtracted)")
    label_offset: float = Field(0.0, allow_inf_nan=False, description="ridge only: a PUBLIC centre of the responses, "
                                "chosen a priori (e.g. a typical level in source units): subtracted from every response "
                                "before clipping to [-B_y, B_y] and added back to the released function, so B_y bounds "
                                "the deviation from it, not the response itself")
    tolerance: float = Field(1e-9, gt=0, le=1e-3, description="certified optimality gap of the solver (its slack is added to the sensitivity)")
    privacy: PrivacySpec = Field(description="the privacy cost of this release (epsilon, delta)")
    budget: BudgetSpec = Field(description="proposed total budget of the dataset (used only when the ledger does not know it yet)")
    release: ReleaseSeriesSpec | None = Field(None, description="release series of scheduled runs (fdp serve)")

    _grid_on_unit_box = field_validator("grid")(classmethod(lambda cls, v: _unit_grid(v)))

    _kernel_ok = field_validator("kernel")(classmethod(lambda cls, v: kernel_mapping(v)))

    @model_validator(mode="after")
    def _fields(self) -> ErmReleaseConfig:
        check_tensor_nodes(self.grid, self.dataset)
        p = self.privacy
        if (self.label_bound is None) == (self.loss == "ridge"):
            raise ValueError("label_bound is required for loss 'ridge' (M = 2 B_y (1 + kappa/sqrt(psi))) and allowed only there")
        if self.label_offset != 0.0 and self.loss != "ridge":
            raise ValueError(f"label_offset ({self.label_offset:g}) is a parameter of loss 'ridge' only (labels of "
                             f"{self.loss!r} are -1/+1)")
        if self.mechanism == "iclp":
            if p.delta != 0.0:
                raise ValueError(f"privacy.delta ({p.delta}) must be 0 for the pure-DP mechanism 'iclp'")
            if p.calibration != "analytic":
                raise ValueError(f"privacy.calibration ({p.calibration!r}) applies to mechanism 'gp' only")
        else:
            if p.delta == 0.0:
                raise ValueError("privacy.delta (0.0) must be > 0 for mechanism 'gp' (Gaussian noise)")
            if p.calibration == "classical" and p.epsilon > 1.0:
                raise ValueError(f"privacy.epsilon ({p.epsilon}) must be <= 1 with privacy.calibration 'classical'")
        return self
