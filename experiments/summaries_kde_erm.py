"""Closing-note numbers for KDE and ERM: expected privacy error and measured L2 distance to the non-private estimate at epsilon = 1.

    .venv/bin/python experiments/summaries_kde_erm.py

For each example config it plans the release exactly as `fdp release` does (secure=False: NumPy noise,
fixed seed, simulation only), computes the non-private estimate (publishes nothing), and reports on the
unit-scaled grid: sqrt(E||noise||_W^2) from the mechanism, and the mean and sd over 200 draws of
||release - non-private||_W.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from fdp.flows.config import load_config
from fdp.tasks.kde import point_axes

from fdpcore.io.points import read_point_table
from fdpcore.summaries.erm import plan_erm_release, summarise_erm
from fdpcore.summaries.kde import draw_point_release, plan_kde_release, summarise_kde

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
CONFIGS = ["kde_1d.yaml", "kde_1d_hall.yaml", "kde_2d.yaml", "erm_ridge.yaml", "erm_logistic.yaml", "erm_svm_2d.yaml"]


def main() -> None:
    rng = np.random.default_rng(20240601)
    print(f"{'config':18s} {'mechanism':9s} {'n':>5s} {'sensitivity':>12s} {'paper':>12s} {'E-err (sqrt)':>12s} "
          f"{'measured L2':>12s} {'sd':>8s} {'||f_np||':>9s}")
    for name in CONFIGS:
        c = load_config(EXAMPLES / name)
        ds = c.dataset
        table = read_point_table(EXAMPLES / ds.path, ds.format, unit_column=ds.unit_column,
                                 coordinate_columns=ds.coordinate_columns, domain=ds.domain,
                                 label_column=getattr(ds, "label_column", None), outside=ds.outside_domain)
        n, p = table.n_units, c.privacy
        if c.summary == "kde":
            plan = plan_kde_release(point_axes(c), n=n, epsilon=p.epsilon, mechanism=c.mechanism, kernel=c.kernel,
                                    bandwidth=c.bandwidth, eta=c.eta, delta=p.delta,
                                    secure=False)
            z = summarise_kde(table.points, table.unit_codes, plan)
        else:
            plan = plan_erm_release(point_axes(c), c.kernel, n=n, epsilon=p.epsilon, loss=c.loss, psi=c.psi, eta=c.eta,
                                    mechanism=c.mechanism, label_bound=c.label_bound, tolerance=c.tolerance,
                                    delta=p.delta, secure=False)
            z = summarise_erm(table.points, table.labels, table.unit_codes, plan)
        w = plan.space.weights
        nonprivate = z @ plan.space.recolour
        draws = draw_point_release(plan, z, draws=200, rng=rng)
        dist = np.sqrt(((draws - nonprivate) ** 2) @ w)
        print(f"{name:18s} {plan.mechanism:9s} {n:5d} {plan.sensitivity:12.4g} {plan.paper_sensitivity:12.4g} "
              f"{np.sqrt(plan.expected_sq_l2_error):12.4g} {dist.mean():12.4g} {dist.std():8.3g} "
              f"{np.sqrt(nonprivate**2 @ w):9.4g}")


if __name__ == "__main__":
    main()
