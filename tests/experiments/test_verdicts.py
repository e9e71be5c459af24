"""Guard: every verdict the results report prints is the one its CSVs give (issue 20).

The first test parses the committed ``docs/results.md`` and recomputes each tagged verdict from
``docs/results/*.csv`` with the sections' own ``verdicts()``; the others show that each verdict rule
flips when its numbers are flipped, and that the guard catches a sentence whose word was edited.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from experiments import electricity_table2 as el
from experiments import fpca_table1 as fp
from experiments import kde_figures as kf
from experiments import mortality_kde as mk
from experiments import report
from experiments import timing_table1 as tt
from experiments._util import VERDICT_WORDS, Verdict, tagged_verdicts
from experiments.reference import ICLP_TABLE3_MORTALITY

DOCS = Path(__file__).resolve().parents[2] / "docs"


def test_committed_report_verdicts_agree_with_its_csvs() -> None:
    """Each ``<!--verdict:KEY-->**word**`` of docs/results.md equals the verdict recomputed from docs/results/."""
    text = (DOCS / "results.md").read_text()
    tags = tagged_verdicts(text)
    assert len(tags) >= 10, "the report prints (almost) no tagged verdicts: regenerate it with python3 dev.py results"
    assert {w for _, w in tags} <= set(VERDICT_WORDS)
    assert report.check_report(text, DOCS / "results") == []
    # every section of the report that computes verdicts appears in the summary table
    assert "## Verdicts" in text and "## Still not reproduced" in text


def test_guard_catches_an_edited_sentence() -> None:
    """Flip one printed word (or print an unknown verdict): check_report names the disagreement."""
    text = (DOCS / "results.md").read_text()
    key, word = tagged_verdicts(text)[0]
    other = next(w for w in VERDICT_WORDS if w != word)
    tampered = text.replace(f"<!--verdict:{key}-->**{word}**", f"<!--verdict:{key}-->**{other}**", 1)
    problems = report.check_report(tampered, DOCS / "results")
    assert any(p.startswith(f"{key}: printed '{other}'") for p in problems), problems
    bogus = text + "\n<!--verdict:nowhere.claim-->**confirmed**\n"
    assert any(p.startswith("nowhere.claim") for p in report.check_report(bogus, DOCS / "results"))
    dropped = text.replace(f"<!--verdict:{key}-->", "")
    if key not in {k for k, _ in tagged_verdicts(dropped)}:
        assert any("never printed" in p for p in report.check_report(dropped, DOCS / "results"))


def test_verdict_tag_round_trip() -> None:
    v = Verdict("a.b-c.d", "claim", "paper", "ours", "partly confirmed")
    assert tagged_verdicts(f"x {v.tagged} y") == [("a.b-c.d", "partly confirmed")]


def test_electricity_rules_flip_with_the_numbers() -> None:
    assert el.plateau_verdict([0.99, 1.02]) == "confirmed"
    assert el.plateau_verdict([0.3, 0.28]) == "refuted"
    assert el.plateau_verdict([0.99, 0.3]) == "partly confirmed"
    assert el.qr_smallest_verdict(12, 12) == "confirmed"
    assert el.qr_smallest_verdict(0, 12) == "refuted"


def _elec_table(qr_best: bool, frl_flat: bool) -> pd.DataFrame:
    rows = []
    for (nu, eps) in el.ICLP_TABLE2_ELECTRICITY.rows:
        for version in ("exact", "paper"):
            for mech in el.MECHANISMS:
                mse = {"frl": 0.5, "iclp_ar": 2.0, "iclp_qr": 0.1 if qr_best else 3.0, "bernstein": 1.0}[mech]
                if mech == "frl" and version == "paper":
                    mse = 0.5 if frl_flat else 0.5 / eps
                rows.append({"nu": nu, "epsilon": eps, "mechanism": mech, "version": version, "mse": mse,
                             "bias2": 0.01, "expected_noise": mse - 0.01, "parameter": "M=3"})
    return pd.DataFrame(rows)


@pytest.mark.parametrize(("qr_best", "frl_flat"), [(True, True), (False, False)])
def test_electricity_verdicts_follow_the_csv(tmp_path: Path, qr_best: bool, frl_flat: bool) -> None:
    _elec_table(qr_best, frl_flat).to_csv(tmp_path / "electricity_table2_mse.csv", index=False)
    v = {x.key.split(".")[-1]: x.word for x in el.verdicts(tmp_path)}
    assert v["qr_smallest"] == ("confirmed" if qr_best else "refuted")
    assert v["frl_plateau"] == ("confirmed" if frl_flat else "refuted")


def test_timing_fpca_rules_flip_with_the_numbers() -> None:
    assert tt.cholesky_verdict([0.6, 0.65], [0.47, 0.7]) == "confirmed"
    assert tt.cholesky_verdict([0.01, 0.02], [0.47, 0.7]) == "partly confirmed"
    assert tt.cholesky_verdict([1.3, 2.0], [0.47, 0.7]) == "refuted"
    assert fp.within_verdict([0.1, -1.5, 1.9]) == "confirmed"
    assert fp.within_verdict([0.1, 3.0, 5.0]) == "refuted"
    assert fp.within_verdict([0.1, 0.2, 5.0]) == "partly confirmed"


@pytest.mark.parametrize("qr_wins", [True, False])
def test_kde_verdict_follows_the_csv(tmp_path: Path, qr_wins: bool) -> None:
    rows = [{"dim": d, "mechanism": m, "parameter": p, "version": "exact",
             "mse_truth": (0.1 if qr_wins else 0.9) if m == "ICLP-QR" else 0.5}
            for d in (1, 2) for m, p in (("ICLP-QR", "eta=1.2"), ("Bernstein", "k=10"))]
    pd.DataFrame(rows).to_csv(tmp_path / "kde_figures_mse.csv", index=False)
    assert {v.word for v in kf.verdicts(tmp_path)} == {"confirmed" if qr_wins else "refuted"}


@pytest.mark.parametrize("agree", [True, False])
def test_mortality_verdict_follows_the_csv(tmp_path: Path, agree: bool) -> None:
    """Ours = the paper's numbers (agreement everywhere) or their reverse order (agreement nowhere)."""
    rows = []
    for region, cells in ICLP_TABLE3_MORTALITY.rows.items():
        for c in mk.COLUMNS:
            x = cells[ICLP_TABLE3_MORTALITY.columns.index(c)][0]
            rows.append({"region": region, "mechanism": c, "privacy_error": x if agree else 1.0 / x})
    pd.DataFrame(rows).to_csv(tmp_path / "mortality_kde_privacy_error.csv", index=False)
    (v,) = mk.verdicts(tmp_path)
    if agree:
        assert v.word == "confirmed"
    else:
        assert v.word == "refuted" and v.why


def test_mortality_weighted_summary_equals_points() -> None:
    """The node-histogram summary of a small table equals summarise_kde on its snapped points, one per death."""
    from fdpcore.basis.grids import midpoint_grid
    from fdpcore.summaries.kde import kde_iclp_coefficients, plan_kde_release, summarise_kde

    frame = pd.DataFrame({"age_start": [0, 5, 60], "age_end": [5, 10, 65], "deaths_thousands": [0.010, 0.005, 0.020]})
    counts, n = mk.node_counts(frame)
    assert n == 35 and counts.sum() == pytest.approx(35)
    grid = midpoint_grid(mk.MAX_AGE)
    plan = plan_kde_release(grid, n=n, epsilon=1.0, eta=1.05, bandwidth=0.05, secure=False)
    theta = kde_iclp_coefficients(np.arange(mk.MAX_AGE), counts, plan.space, eta=1.05, kappa=plan.parameters["kappa"], n=n)
    # points: each group's deaths spread evenly over its one-year cells (2 deaths per cell of 0-5, 1 of 5-10, 4 of 60-65)
    ages = np.concatenate([np.repeat(np.arange(a, b) + 0.5, int(round(d * 1000 / (b - a))))
                           for a, b, d in frame.itertuples(index=False)])
    z = summarise_kde(ages[:, None] / mk.MAX_AGE, np.arange(ages.size), plan)
    np.testing.assert_allclose(theta / np.sqrt(plan.space.eigenvalues), z, rtol=1e-10, atol=1e-14)


def test_fpca_simulation_and_hrw_rules_flip() -> None:
    from experiments import fpca_simulation as fs
    from experiments import hrw_examples as hw

    assert fs.trend_verdict([(0.5, 0.01, 0.1, 0.01), (0.2, 0.01, 0.05, 0.01)]) == "confirmed"
    assert fs.trend_verdict([(0.1, 0.01, 0.5, 0.01), (0.05, 0.01, 0.2, 0.01)]) == "refuted"
    assert fs.trend_verdict([(0.5, 0.01, 0.1, 0.01), (0.05, 0.01, 0.2, 0.01)]) == "partly confirmed"
    assert hw.mc_verdict([0.5, -1.0]) == "confirmed"
    assert hw.mc_verdict([5.0]) == "refuted"


def test_small_new_sections_run_and_tag_their_verdicts(tmp_path: Path) -> None:
    """fpca_simulation, hrw_examples and mortality_kde at toy sizes: files written, verdicts tagged and consistent."""
    from experiments import fpca_simulation as fs
    from experiments import hrw_examples as hw

    out = tmp_path / "results"
    bodies = [fs.run(out, 2, 1, ns2=(50, 400), ns3=(100,), epsilons=(1.0,), draws=3),
              hw.run(out, 2, 1, draws=5),
              mk.run(out, 2, 1, regions=("Caribbean", "Polynesia"), draws=5)]
    text = "\n".join(bodies)
    assert report.missing_links(text, tmp_path) == []
    names = ("fpca_simulation", "hrw_examples", "mortality_kde")
    assert report.check_report(text, out, names) == []


def test_defaults_section_says_when_the_defaults_are_missing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from experiments import defaults_vs_paper as dv

    monkeypatch.setattr(dv, "available", lambda: False)
    assert dv.run(tmp_path, 1, 1).startswith("Not run: the library has no `fdpcore.noise.quantiles`")
    assert not any(tmp_path.iterdir())


def test_defaults_section_runs_on_a_small_case(tmp_path: Path) -> None:
    """With the issue-16 defaults in the library: four pipelines per (data, epsilon), tau auto drawn in range."""
    from experiments import defaults_vs_paper as dv

    if not dv.available():
        pytest.skip("fdpcore.noise.quantiles is not in this checkout")
    body = dv.run(tmp_path / "results", 1, 2, epsilons=(1.0,), scenarios=("S-1",))
    table = pd.read_csv(tmp_path / "results" / "defaults_vs_paper_mse.csv")
    assert set(table.pipeline) == set(dv.PIPELINES) and set(table.data) == {"simulation S-1", "electricity"}
    auto = table[table.pipeline == "new defaults"]
    assert ((auto.tau >= 0.01) & (auto.tau <= 100)).all()
    assert (table.mse > 0).all() and "| simulation S-1 | 1 |" in body
