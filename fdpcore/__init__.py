"""fdpcore: differentially private release of functional summaries on a grid.

The library of fdp, usable without Prefect. Math modules are pure (numpy, scipy,
OpenDP for sampling); I/O lives in :mod:`fdpcore.io` and the budget ledger in
:mod:`fdpcore.ledger`. The specification is MATH.md; formula ids are listed in
:mod:`fdpcore.privacy.formulas`.
"""

from fdpcore.basis.eigen import Eigenbasis, weighted_eigenbasis
from fdpcore.basis.grids import Grid, grid_from_nodes, midpoint_grid
from fdpcore.basis.kernels import kernel_matrix, kernel_spec
from fdpcore.basis.norms import cameron_martin_norm, one_c_norm, power_kernel, power_norm, power_trace
from fdpcore.basis.tensor import (
    SeparableKernel,
    TensorEigenbasis,
    TensorGrid,
    sample_iclp_field,
    separable_kernel,
    tensor_eigenbasis,
    tensor_grid,
)
from fdpcore.data.preprocess import align_long, clip_l2
from fdpcore.errors import (
    BudgetExceededError,
    ConfigError,
    DataError,
    DomainError,
    FdpError,
    InternalError,
    PrivacyParameterError,
)
from fdpcore.summaries.hrw import OnlineGPReleaser, OUBridgeReleaser, release_hrw_batch
from fdpcore.summaries.mean import MeanPlan, MeanRelease, plan_mean_release, release_mean

__version__ = "0.1.0"

__all__ = [
    # 2-D fields, power kernels and norms, [HRW] online GP release (MATH.md §1.5-1.6, §11)
    "OUBridgeReleaser",
    "OnlineGPReleaser",
    "SeparableKernel",
    "TensorEigenbasis",
    "TensorGrid",
    "cameron_martin_norm",
    "one_c_norm",
    "power_kernel",
    "power_norm",
    "power_trace",
    "release_hrw_batch",
    "sample_iclp_field",
    "separable_kernel",
    "tensor_eigenbasis",
    "tensor_grid",
    "BudgetExceededError",
    "ConfigError",
    "DataError",
    "DomainError",
    "Eigenbasis",
    "FdpError",
    "Grid",
    "InternalError",
    "MeanPlan",
    "MeanRelease",
    "PrivacyParameterError",
    "align_long",
    "clip_l2",
    "grid_from_nodes",
    "kernel_matrix",
    "kernel_spec",
    "midpoint_grid",
    "plan_mean_release",
    "release_mean",
    "weighted_eigenbasis",
]
