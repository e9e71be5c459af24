"""One module per released summary, each holding its estimator, its sensitivities and its plan.

mean (MATH.md §4), covariance (§6), fosr (function-on-scalar regression, §7), kde (§8),
erm (RKHS-regularised regression/classification, §9), fpca (exponential-mechanism PCA, §10) and
hrw (batch and online GP release, §11).
"""
