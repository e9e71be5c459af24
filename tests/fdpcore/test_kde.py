"""KDE (MATH.md §8): exact sensitivities attained and never exceeded on neighbouring tables (incl. a 10-point unit), noise calibration, bad inputs, reader."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from fdpcore.basis.grids import grid_from_nodes, midpoint_grid
from fdpcore.errors import DataError, DomainError, PrivacyParameterError
from fdpcore.io.points import read_point_table
from fdpcore.privacy.accounting import exact
from fdpcore.summaries import kde as kde_module
from fdpcore.summaries.kde import (
    BandwidthChoice,
    choose_kde_bandwidth,
    draw_point_release,
    hall_kde_paper_sensitivity,
    hall_kde_sensitivity,
    kde_auto_bandwidth,
    kde_bandwidth,
    kde_bandwidth_choice,
    kde_iclp_cs_sensitivity,
    kde_iclp_paper_sensitivity,
    kde_iclp_sensitivity,
    kde_reference_bandwidth,
    plan_kde_release,
    point_space,
    release_kde,
    summarise_kde,
    unit_mean_points,
    unit_point_weights,
)

G1 = midpoint_grid(40)


@pytest.mark.parametrize(("eta", "exact", "cs"), [(1.01, 5.77, 13.57), (1.25, 2.60, 4.60), (1.5, 1.26, 2.17)])
def test_exact_and_cs_sensitivity_match_math_md_reference_values(eta: float, exact: float, cs: float) -> None:
    s = point_space({"name": "gaussian", "length_scale": 0.05}, [grid_from_nodes(np.linspace(0, 1, 201))])
    assert kde_iclp_sensitivity(s, eta=eta, kappa=1.0, n=1)[0] == pytest.approx(exact, abs=0.006)
    assert kde_iclp_cs_sensitivity(s, eta=eta, kappa=1.0, n=1) == pytest.approx(cs, abs=0.006)


def _neighbours(plan, base_pts, base_units, a, b):  # type: ignore[no-untyped-def]
    """z of D and D' where unit 0's points are a (in D) and b (in D')."""
    za = summarise_kde(np.vstack([a, base_pts]), np.concatenate([np.zeros(len(a), int), base_units]), plan)
    zb = summarise_kde(np.vstack([b, base_pts]), np.concatenate([np.zeros(len(b), int), base_units]), plan)
    return za, zb


@pytest.mark.parametrize("axes", [(G1,), (midpoint_grid(12), midpoint_grid(10))], ids=["1d", "2d"])
def test_iclp_worst_pair_attains_the_exact_sensitivity(axes: tuple) -> None:  # type: ignore[type-arg]
    n = 30
    plan = plan_kde_release(axes, n=n, epsilon=1.0, eta=1.25, kernel="exponential" if len(axes) == 2 else "gaussian",
                            secure=False)
    rng = np.random.default_rng(0)
    base = rng.uniform(size=(n - 1, len(axes)))
    _, (k, l) = kde_iclp_sensitivity(plan.space, eta=1.25, kappa=plan.parameters["kappa"], n=n)
    nodes = plan.space.nodes
    za, zb = _neighbours(plan, base, np.arange(1, n), nodes[[k]], nodes[[l]])
    assert np.abs(za - zb).sum() == pytest.approx(plan.sensitivity, rel=1e-10)
    assert plan.paper_sensitivity != pytest.approx(plan.sensitivity)  # the paper's bound differs (MATH.md §14 item 10)
    assert plan.sensitivity <= kde_iclp_cs_sensitivity(plan.space, eta=1.25, kappa=plan.parameters["kappa"], n=n)


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), m=st.integers(1, 10), two_d=st.booleans())
def test_iclp_neighbours_never_exceed_the_bound_even_with_a_ten_point_unit(seed: int, m: int, two_d: bool) -> None:
    axes = (midpoint_grid(10), midpoint_grid(8)) if two_d else (G1,)
    n = 12
    plan = plan_kde_release(axes, n=n, epsilon=1.0, eta=1.1, secure=False)
    rng = np.random.default_rng(seed)
    d = len(axes)
    base = rng.uniform(size=(3 * (n - 1), d))
    units = np.repeat(np.arange(1, n), 3)
    za, zb = _neighbours(plan, base, units, rng.uniform(size=(10, d)), rng.uniform(size=(m, d)))
    assert np.abs(za - zb).sum() <= plan.sensitivity * (1 + 1e-9)


def test_unit_average_reduces_a_ten_point_unit_to_one_contribution() -> None:
    plan = plan_kde_release(G1, n=2, epsilon=1.0, eta=1.25, secure=False)
    same = np.full((10, 1), 0.3)
    z10 = summarise_kde(np.vstack([same, [[0.7]]]), np.array([0] * 10 + [1]), plan)
    z1 = summarise_kde(np.array([[0.3], [0.7]]), np.array([0, 1]), plan)
    assert np.allclose(z10, z1)
    n, w = unit_point_weights(np.array([5] * 10 + [2]))
    assert n == 2 and w.sum() == pytest.approx(2.0)


def test_hall_sensitivity_is_attained_by_the_far_pair_and_never_exceeded() -> None:
    n, h = 50, 0.3
    plan = plan_kde_release(midpoint_grid(120), n=n, epsilon=1.0, delta=1e-5, mechanism="hall_gp", bandwidth=h, secure=False)
    assert plan.sensitivity == pytest.approx(hall_kde_sensitivity(n, bandwidth=h, dim=1, diameter=1.0))
    assert plan.sensitivity < plan.paper_sensitivity == hall_kde_paper_sensitivity(n, bandwidth=h, dim=1)
    rng = np.random.default_rng(3)
    base = rng.uniform(size=(n - 1, 1))
    za, zb = _neighbours(plan, base, np.arange(1, n), np.array([[0.0]]), np.array([[1.0]]))
    worst = float(np.linalg.norm(za - zb))  # Cameron-Martin norm of the projected grid difference
    assert 0.97 * plan.sensitivity <= worst <= plan.sensitivity * (1 + 1e-9)
    for _ in range(30):
        za, zb = _neighbours(plan, base, np.arange(1, n), rng.uniform(size=(10, 1)), rng.uniform(size=(3, 1)))
        assert np.linalg.norm(za - zb) <= plan.sensitivity * (1 + 1e-9)


def test_hall_2d_exact_bound_uses_the_box_diagonal() -> None:
    plan = plan_kde_release((midpoint_grid(15), midpoint_grid(15)), n=100, epsilon=1.0, delta=1e-5, mechanism="hall_gp",
                            bandwidth=0.5, secure=False)
    assert plan.sensitivity == pytest.approx(math.sqrt(2 * (1 - math.exp(-2 / (2 * 0.25)))) / (100 * 2 * math.pi * 0.25))


@pytest.mark.parametrize("mechanism", ["iclp_qr", "hall_gp"])
def test_noise_spread_matches_the_calibration(mechanism: str) -> None:
    delta = 1e-5 if mechanism == "hall_gp" else 0.0
    plan = plan_kde_release(G1, n=200, epsilon=0.5, delta=delta, mechanism=mechanism, eta=1.25 if mechanism == "iclp_qr" else None,
                            secure=False)
    rng = np.random.default_rng(11)
    draws = draw_point_release(plan, np.zeros(plan.space.n_basis), draws=20000, rng=rng)
    white = plan.space.coefficients(draws) / np.sqrt(plan.space.eigenvalues)
    scale = plan.calibration.scale
    if mechanism == "iclp_qr":
        assert scale == pytest.approx(plan.sensitivity / 0.5)
        assert stats.kstest(white[:, 0] / scale, "laplace").pvalue > 1e-3
    else:
        assert stats.kstest(white[:, 0] / scale, "norm").pvalue > 1e-3
    sq = float(np.mean(draws**2 @ plan.space.weights))
    assert sq == pytest.approx(plan.expected_sq_l2_error, rel=0.05)


def test_secure_release_is_drawn_by_opendp_and_has_the_grid_shape() -> None:
    rng = np.random.default_rng(5)
    values, plan = release_kde(rng.uniform(size=(300, 1)), axes=G1, epsilon=1.0, eta=1.25)
    assert values.shape == (1, 40) and plan.calibration.secure


def test_bandwidth_rule_and_bad_inputs() -> None:
    assert kde_bandwidth(2000, 1) == pytest.approx(2000 ** -0.2)
    plan = plan_kde_release(G1, n=100, epsilon=1.0, eta=1.25, secure=False)
    assert plan.parameters["bandwidth"] == pytest.approx(100 ** -0.2)
    with pytest.raises(DomainError, match="unit box"):
        summarise_kde(np.array([[1.2]] + [[0.5]] * 99), np.arange(100), plan)
    with pytest.raises(DomainError, match="plan is for n = 100"):
        summarise_kde(np.array([[0.5]] * 10), np.arange(10), plan)
    with pytest.raises(DomainError, match="must be 'gaussian'"):
        plan_kde_release(G1, n=10, epsilon=1.0, delta=1e-5, mechanism="hall_gp", kernel="exponential", secure=False)
    with pytest.raises(PrivacyParameterError, match="delta"):
        plan_kde_release(G1, n=10, epsilon=1.0, mechanism="hall_gp", secure=False)
    with pytest.raises(PrivacyParameterError, match="eta"):
        plan_kde_release(G1, n=10, epsilon=1.0, secure=False)
    with pytest.raises(PrivacyParameterError, match="delta"):
        plan_kde_release(G1, n=10, epsilon=1.0, eta=1.25, delta=0.1, secure=False)
    with pytest.raises(DomainError, match=r"must be \[0, 1\]"):
        plan_kde_release(midpoint_grid(10, (0.0, 2.0)), n=10, epsilon=1.0, eta=1.25, secure=False)
    assert kde_iclp_paper_sensitivity(plan.space, eta=1.25, kappa=1.0, n=10) > 0


def test_reader_errors_name_the_row_and_clamp_is_counted(tmp_path: Path) -> None:
    path = tmp_path / "pts.csv"
    pd.DataFrame({"id": ["a", "b", "c"], "x": [1.0, 12.0, -3.0], "y": [1, 0, 1]}).to_csv(path, index=False)
    with pytest.raises(DataError, match=r"column 'x' has a point outside the public domain \[0, 10\] at row 2"):
        read_point_table(path, "csv", unit_column="id", coordinate_columns=["x"], domain=[(0.0, 10.0)], outside="error")
    t = read_point_table(path, "csv", unit_column="id", coordinate_columns=["x"], domain=[(0.0, 10.0)])  # clamp: default
    assert t.n_clamped == 2 and t.points[:, 0].tolist() == [0.1, 1.0, 0.0]
    with pytest.raises(DataError, match="label other than -1 or \\+1 at row 2"):
        read_point_table(path, "csv", unit_column="id", coordinate_columns=["x"], domain=[(-5.0, 15.0)],
                         label_column="y", binary_labels=True, labels="error")
    signed = read_point_table(path, "csv", unit_column="id", coordinate_columns=["x"], domain=[(-5.0, 15.0)],
                              label_column="y", binary_labels=True)  # default: record-wise, the label's sign
    assert signed.labels.tolist() == [1.0, -1.0, 1.0] and signed.n_relabelled == 1
    pd.DataFrame({"id": ["a"], "x": [float("nan")]}).to_csv(path, index=False)
    with pytest.raises(DataError, match="non-finite entry at row 1") as info:  # a KDE: no label to ask for
        read_point_table(path, "csv", unit_column="id", coordinate_columns=["x"], domain=[(0.0, 10.0)])
    assert str(info.value).endswith("every point needs finite coordinates: drop the incomplete rows before the release "
                                    "(complete cases) or fill them in by an imputation rule fixed a priori")
    pd.DataFrame({"id": ["a", "b"], "x": [1.0, 2.0], "y": [1.0, float("nan")]}).to_csv(path, index=False)
    with pytest.raises(DataError, match="column 'y' has a missing or non-finite entry at row 2; every point needs "
                                        "finite coordinates and label: drop the incomplete rows"):  # ERM
        read_point_table(path, "csv", unit_column="id", coordinate_columns=["x"], domain=[(0.0, 10.0)], label_column="y")
    with pytest.raises(DataError, match="missing column"):
        read_point_table(path, "csv", unit_column="id", coordinate_columns=["z"], domain=[(0.0, 10.0)])


@settings(max_examples=40, deadline=None)
@given(ids=st.lists(st.one_of(st.integers(-3, 3).map(lambda i: f"u{i}"), st.sampled_from(["u1x", "U1", "", "é"])),
                    min_size=1, max_size=30),
       as_int=st.booleans(), dictionary=st.booleans())
def test_reader_groups_points_by_unit_id_exactly(tmp_path_factory: pytest.TempPathFactory, ids: list[str],
                                                 as_int: bool, dictionary: bool) -> None:
    """A KDE/ERM point's unit is its id, nothing else: two points share a code iff their ids are equal (text ids that
    differ in letter case are different units; ids that differ only in spaces or number format are refused, tested in
    test_ingest_properties), whatever the column's type (text, dictionary-encoded with unused entries, integer); read
    as categorical codes since session 29 (fdpcore.io.tables.compact_ids)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    values: list[object] = [abs(hash(i)) % 7 for i in ids] if as_int else list(ids)
    col = pa.array(values)
    if dictionary and not as_int:  # a dictionary that also holds ids no row uses
        distinct = list(dict.fromkeys(ids))
        col = pa.DictionaryArray.from_arrays(pa.array([distinct.index(i) + 1 for i in ids], pa.int32()),
                                             pa.array(["unused", *distinct, "also unused"]))
    path = tmp_path_factory.mktemp("points") / "p.parquet"
    pq.write_table(pa.table({"id": col, "x": np.linspace(0.0, 1.0, len(ids))}), path)
    t = read_point_table(path, "parquet", unit_column="id", coordinate_columns=["x"], domain=[(0.0, 1.0)])
    codes = t.unit_codes.tolist()
    assert all((codes[a] == codes[b]) == (values[a] == values[b]) for a in range(len(ids)) for b in range(len(ids)))
    assert t.n_units == len(set(values)) and unit_point_weights(t.unit_codes)[0] == len(set(values))


def test_normal_reference_bandwidth_beats_the_papers_rule_on_a_concentrated_density() -> None:
    """tuning.kde.normal_reference@1: (1.06/6) n^(-1/5); on points that occupy a fifth of the range the paper's wider
    n^(-1/5) is dominated by smoothing bias (its error does not fall with epsilon), the reference rule's does."""
    from scipy import stats

    from fdpcore.summaries.kde import kde_bandwidth, kde_reference_bandwidth

    assert kde_reference_bandwidth(2000, 1) == pytest.approx(1.06 / 6 * 2000 ** -0.2)
    assert kde_reference_bandwidth(2000, 2) == pytest.approx(2000 ** (-1 / 6) / 6)
    rng = np.random.default_rng(7)
    grid = midpoint_grid(100)
    truth = stats.norm.pdf(grid.grid_points, 0.45, 0.08)
    truth /= np.sum(truth * grid.weights)

    def error(rule: str, eps: float) -> float:
        errs = []
        for _ in range(6):
            x = np.clip(rng.normal(0.45, 0.08, (1000, 1)), 0.0, 1.0)
            v, p = release_kde(x, axes=grid, epsilon=eps, eta=1.25, bandwidth=rule, secure=False, rng=rng)
            assert p.parameters["bandwidth"] == (kde_bandwidth if rule == "n_rule" else kde_reference_bandwidth)(1000, 1)
            errs.append(float(np.sqrt(np.sum((v[0] - truth) ** 2 * grid.weights))))
        return float(np.mean(errs))

    ref1, ref5, paper1, paper5 = error("normal_reference", 1.0), error("normal_reference", 5.0), error("n_rule", 1.0), \
        error("n_rule", 5.0)
    assert ref1 < 0.6 * paper1 and ref5 < 0.6 * paper5
    assert ref5 < ref1 and paper5 > 0.9 * paper1  # budget buys accuracy only where bias does not dominate


# ---------------------------------------------------------------------------------------------
# bandwidth: auto (tuning.kde.bandwidth_auto@1)
# ---------------------------------------------------------------------------------------------

G100 = midpoint_grid(100)


def test_auto_bandwidth_quartiles_see_one_value_per_unit(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[tuple[np.ndarray, float, float]] = []
    real = kde_module.dp_quantile

    def spy(values, candidates, *, alpha, epsilon):  # type: ignore[no-untyped-def]
        seen.append((np.asarray(values), alpha, epsilon))
        return real(values, candidates, alpha=alpha, epsilon=epsilon)

    monkeypatch.setattr(kde_module, "dp_quantile", spy)
    rng = np.random.default_rng(3)
    pts = np.vstack([rng.uniform(0.2, 0.4, (1000, 2)), np.full((500, 2), 0.9)])  # unit 'heavy': 500 rows at 0.9
    codes = np.concatenate([np.arange(1000), np.full(500, -1)])
    choice = kde_bandwidth_choice((midpoint_grid(12), midpoint_grid(12)), 1001, 4.0)
    drawn = choose_kde_bandwidth(choice, pts, codes, (midpoint_grid(12), midpoint_grid(12)), epsilon=4.0, eta=1.2,
                                 secure=False)
    assert [(a, e) for _, a, e in seen] == [(0.25, choice.quantile_epsilon), (0.75, choice.quantile_epsilon)] * 2
    for values, _, _ in seen:
        assert values.shape == (1001,)  # one value per unit: the 500-row unit counts once
        assert int(np.sum(values > 0.85)) == 1  # its mean point (0.9), moved by at most the dither (0.01)
    assert drawn.quartiles is not None and len(drawn.quartiles) == 2 and drawn.value in choice.candidates
    means = unit_mean_points(pts, codes)
    assert means.shape == (1001, 2) and np.sum(np.all(np.isclose(means, 0.9), axis=1)) == 1


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_auto_bandwidth_worst_case_neighbours_change_each_rank_count_by_at_most_one(seed: int) -> None:
    rng = np.random.default_rng(seed)
    pts = rng.uniform(size=(300, 1))
    codes = rng.integers(0, 100, 300)  # units of 1..many rows
    heavy = int(np.bincount(codes).argmax())
    cands = np.linspace(0.0, 1.0, 201)
    base = unit_mean_points(pts, codes)[:, 0]
    for replacement in (0.0, 1.0, 0.5):  # the heaviest unit (all its rows) replaced by one far point
        keep = codes != heavy
        neighbour = unit_mean_points(np.vstack([pts[keep], [[replacement]]]), np.concatenate([codes[keep], [heavy]]))[:, 0]
        assert neighbour.shape == base.shape
        counts = np.array([np.sum(base < c) for c in cands])
        counts2 = np.array([np.sum(neighbour < c) for c in cands])
        assert int(np.max(np.abs(counts - counts2))) <= 1


@pytest.mark.parametrize(("n", "epsilon", "dim"), [(2000, 1.0, 1), (2000, 0.37, 1), (50000, 0.3, 2), (1001, 4.0, 2),
                                                    (3000, 7.0, 1)])
def test_auto_bandwidth_split_sums_exactly_with_the_mechanism(n: int, epsilon: float, dim: int) -> None:
    axes = (midpoint_grid(12),) * dim
    choice = kde_bandwidth_choice(axes, n, epsilon)
    assert not choice.a_priori and 0 < choice.epsilon <= epsilon / 2
    assert exact(choice.quantile_epsilon) * (2 * dim) <= exact(choice.epsilon)  # 2d quartiles within the split
    plan = plan_kde_release(axes, n=n, epsilon=epsilon, eta=1.2, bandwidth="auto", secure=False)
    assert [s["name"] for s in plan.budget_splits] == ["bandwidth", "kde"] and plan.epsilon == epsilon
    assert sum((exact(s["epsilon"]) for s in plan.budget_splits), exact(0.0)) == exact(epsilon)
    assert plan.calibration.scale == pytest.approx(plan.sensitivity / plan.epsilon_mechanism)  # noise at what is left
    assert plan.parameters["bandwidth"] == kde_reference_bandwidth(n, dim)  # undrawn: priced at normal_reference
    assert {"tuning.kde.bandwidth_auto@1", "accounting.pure.sequential@1"} <= set(plan.formulas)
    hall = plan_kde_release(axes, n=n, epsilon=epsilon, mechanism="hall_gp", delta=1e-6, bandwidth="auto", secure=False)
    assert hall.rho == pytest.approx(hall.calibration.rho + choice.epsilon**2 / 2)  # type: ignore[union-attr]


def _noise(epsilon: float, n: int = 2000):  # type: ignore[no-untyped-def]
    return lambda h: plan_kde_release(G100, n=n, epsilon=epsilon, eta=1.25, bandwidth=h, secure=False).expected_sq_l2_error


def test_auto_bandwidth_falls_as_the_data_concentrate_and_as_epsilon_grows() -> None:
    cands = kde_bandwidth_choice(G100, 2000, 1.0).candidates
    by_sigma = [kde_auto_bandwidth([s], 2000, cands, _noise(1.0)) for s in (1 / 6, 0.1, 0.06, 0.03)]
    assert by_sigma == sorted(by_sigma, reverse=True) and by_sigma[-1] < by_sigma[0] / 2
    by_eps = [kde_auto_bandwidth([0.06], 2000, cands, _noise(e)) for e in (0.1, 0.5, 2.0, 20.0)]
    assert by_eps == sorted(by_eps, reverse=True) and by_eps[-1] < by_eps[0]
    silent = kde_auto_bandwidth([0.06], 2000, cands, lambda h: 0.0)  # no noise: the pure AMISE minimiser
    assert silent <= by_eps[-1]
    assert all(h in cands for h in by_sigma + by_eps)


def test_auto_bandwidth_falls_back_to_normal_reference_for_free_when_n_epsilon_is_small() -> None:
    choice = kde_bandwidth_choice(G100, 200, 1.0)
    assert choice.a_priori and choice.epsilon == 0.0 and choice.formula_id == "tuning.kde.normal_reference@1"
    drawn = choose_kde_bandwidth(choice, None, None, G100, epsilon=1.0, eta=1.25)  # type: ignore[arg-type]  # reads nothing
    assert drawn.value == kde_reference_bandwidth(200, 1)
    plan = plan_kde_release(G100, n=200, epsilon=1.0, eta=1.25, bandwidth="auto", public_choices=(drawn,), secure=False)
    assert plan.budget_splits == [{"name": "kde", "epsilon": 1.0, "delta": 0.0}]
    assert plan.parameters["bandwidth"] == kde_reference_bandwidth(200, 1)
    assert "accounting.pure.sequential@1" not in plan.formulas
    assert drawn.as_manifest()["epsilon"] == 0.0 and "nothing charged" in str(drawn.as_manifest()["mechanism"])
    assert kde_bandwidth_choice((midpoint_grid(12),) * 2, 6, 100.0).a_priori  # fewer than 8d units: never bought


def test_auto_bandwidth_facade_buys_a_narrow_bandwidth_for_concentrated_points() -> None:
    rng = np.random.default_rng(0)
    x = rng.normal(0.5, 0.04, (3000, 1)).clip(0, 1)
    values, plan = release_kde(x, axes=G100, epsilon=2.0, eta=1.25, bandwidth="auto", secure=False, rng=rng)
    (choice,) = plan.public_choices
    assert isinstance(choice, BandwidthChoice) and choice.value == plan.parameters["bandwidth"]
    assert plan.parameters["bandwidth"] < kde_reference_bandwidth(3000, 1) / 1.5
    assert plan.parameters["bandwidth_rule"] == "tuning.kde.bandwidth_auto@1"
    assert choice.sigmas is not None and 0.02 < choice.sigmas[0] < 0.07
    assert values.shape == (1, 100)
    with pytest.raises(DomainError, match="draws"):
        release_kde(x, axes=G100, epsilon=2.0, eta=1.25, bandwidth="auto", draws=2, secure=False)
    with pytest.raises(DomainError, match="auto"):
        plan_kde_release(G100, n=10, epsilon=1.0, eta=1.25, bandwidth="wide", secure=False)



def test_remembered_grid_sensitivity_is_the_exact_one_bit_for_bit() -> None:
    axes = (midpoint_grid(9), midpoint_grid(7))
    kde_module._grid_sensitivity_of.cache_clear()
    first = plan_kde_release(axes, n=37, epsilon=0.7, eta=1.2, bandwidth=0.11, secure=False)
    again = plan_kde_release(axes, n=37, epsilon=0.7, eta=1.2, bandwidth=0.11, secure=False)  # from the memo
    direct = kde_iclp_sensitivity(first.space, eta=1.2, kappa=first.parameters["kappa"], n=37)[0]
    assert first.sensitivity == again.sensitivity == direct and kde_module._grid_sensitivity_of.cache_info().currsize == 1
