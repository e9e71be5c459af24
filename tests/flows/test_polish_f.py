"""Small defects from a new user's trial on unseen data (helper F).

``fdp plan`` printed a KDE ``bandwidth: auto`` legend twice; ``fdp budget show`` said "(1 releases)"; a refused
charge (exit 3) did not say how to go on; a FoSR guarantee showed its parts' epsilon to six digits; the guarantee
glued "for each" onto a ``privacy_unit`` phrased "one country's …"; ``fdp init`` had no option for
``dataset.max_end_gap`` (studies with drop-outs).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml
from fdp.flows.cli import main
from flow_support import REPO, release, run_walkthrough, write_config

from fdpcore.ledger import Ledger, current_period

ELECTRICITY = REPO / "examples" / "electricity_mean.yaml"
GROWTH = REPO / "examples" / "data" / "berkeley_growth.parquet"
RESERVE = dict(config_sha256="0" * 64, summary="mean", mechanism="iclp_qr", sensitivity_formula="s",
               budget_splits=[], provenance={}, internal={})


def test_kde_plan_with_bandwidth_auto_prints_the_error_legend_once_with_its_explanation(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cfg = write_config(tmp_path, REPO / "examples" / "kde_1d.yaml", grid__size=50, bandwidth="auto")
    # epsilon 0.005: n * epsilon too small to buy the bandwidth (its row's note lacks the explanation); 1: bought
    assert main(["plan", str(cfg), "--epsilon", "0.005", "--epsilon", "1",
                 "--ledger", f"sqlite:///{tmp_path / 'l.sqlite'}"]) == 0
    out = capsys.readouterr().out
    legends = [ln for ln in out.splitlines() if ln.strip().startswith("E L2 error: the noise part")]
    assert len(legends) == 1, legends
    assert "bandwidth: auto — the bandwidth is bought after the charge" in legends[0]
    assert "bandwidth at epsilon 0.005: n * epsilon is too small to buy it" in out  # the other row keeps its line


def test_budget_show_and_audit_verify_count_releases_in_the_singular_and_the_plural(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    url = f"sqlite:///{tmp_path / 'l.sqlite'}"
    led = Ledger(url)
    led.set_budget("one-release", 5.0)
    led.set_budget("two-releases", 5.0)
    led.reserve(release_id="a", dataset_id="one-release", epsilon=1.0, delta=0.0, **RESERVE)
    led.reserve(release_id="b", dataset_id="two-releases", epsilon=1.0, delta=0.0, **RESERVE)
    led.reserve(release_id="c", dataset_id="two-releases", epsilon=1.0, delta=0.0, **RESERVE)
    period = current_period()
    assert main(["budget", "show", "--ledger", url, "--dataset", "one-release"]) == 0
    one = capsys.readouterr().out
    assert f"period {period}: spent epsilon 1 (1 release)" in one and "releases)" not in one
    assert main(["budget", "show", "--ledger", url, "--dataset", "two-releases"]) == 0
    assert f"period {period}: spent epsilon 2 (2 releases)" in capsys.readouterr().out
    assert main(["audit", "verify", "--ledger", url]) == 0
    assert re.search(r"ledger intact \(\d+ entries, 3 releases\)", capsys.readouterr().out)


def test_a_refused_charge_says_how_to_go_on(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    url = f"sqlite:///{tmp_path / 'l.sqlite'}"
    Ledger(url).set_budget("adelaide-electricity-monday", 0.5)
    cfg = write_config(tmp_path, ELECTRICITY)
    assert release(cfg, tmp_path / "out", url, "r1") == 3
    err = capsys.readouterr().err
    assert "total budget of dataset 'adelaide-electricity-monday' would be exceeded; nothing was spent. " in err
    assert "Requested: epsilon=1, delta=0. Remaining: epsilon=0.5, delta=0. Difference: epsilon=+0.5" in err
    assert "`fdp budget set adelaide-electricity-monday --epsilon TOTAL`" in err
    assert "a set replaces the whole policy" in err and "recorded in the ledger's audit chain" in err
    assert "smaller privacy.epsilon" in err and "`fdp plan CONFIG --epsilon E`" in err
    assert "fdp budget grant" not in err

    url2 = f"sqlite:///{tmp_path / 'l2.sqlite'}"
    Ledger(url2).set_budget("adelaide-electricity-monday", 12.0, period="month", epsilon_per_period=0.5)
    assert release(cfg, tmp_path / "out2", url2, "r2") == 3
    err = capsys.readouterr().err
    assert f"allowance of period {current_period()}" in err
    assert f"`fdp budget grant adelaide-electricity-monday --period {current_period()} --epsilon E`" in err
    assert "--period month --per-period E" in err and "smaller privacy.epsilon" in err

    # trial M: only delta short (a GP release on a dataset with delta 0): the first remedy names delta, not epsilon
    url3 = f"sqlite:///{tmp_path / 'l3.sqlite'}"
    Ledger(url3).set_budget("adelaide-electricity-monday", 10.0)
    gp = write_config(tmp_path, ELECTRICITY, estimator="gp", privacy__delta=1e-5)
    assert release(gp, tmp_path / "out3", url3, "r3") == 3
    err = capsys.readouterr().err
    assert "Only delta is short" in err and "--epsilon TOTAL --delta DELTA" in err and "no delta" in err
    assert "raise the dataset's total with" not in err


def test_unit_noun_reads_after_for_each_in_both_phrasings() -> None:
    from fdp.tasks._publish import unit_noun

    assert unit_noun("one country's fertility series") == "country's fertility series"
    assert unit_noun("  One cow (all test days of one cow)") == "cow (all test days of one cow)"
    assert unit_noun("a household") == "household"
    monday = "Monday demand curve (one day of the region's half-hourly demand)"
    assert unit_noun(monday) == monday  # nothing to drop; the "one" inside stays
    assert unit_noun("oneself") == "oneself" and unit_noun("each") == "each"


def test_the_release_line_reads_well_for_a_unit_phrased_with_one(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    url = f"sqlite:///{tmp_path / 'l.sqlite'}"
    phrase = "one child's height curve (ages 1 to 18) and sex"
    cfg = write_config(tmp_path, REPO / "examples" / "growth_fosr.yaml", data=GROWTH, clipping__tau="auto",
                       privacy__epsilon=3.3, dataset__privacy_unit=phrase)
    assert release(cfg, tmp_path / "out", url, "f1") == 0
    out = capsys.readouterr().out
    m = json.loads((tmp_path / "out" / "manifest.json").read_text())
    g = m["privacy"]["guarantee"]
    assert m["privacy"]["privacy_unit"] == phrase  # the manifest keeps the phrase as written
    assert "for each child's height curve (ages 1 to 18) and sex (replace-one adjacency" in g
    assert "for each one" not in g and "for each one" not in out
    parts = {s["name"].split()[0]: s["epsilon"] for s in m["budget_splits"]}
    # the parts' epsilons as every guarantee shows numbers (:g), so text and budget_splits agree to six digits
    assert f"design moments T1 (epsilon {parts['T1']:g})" in g and f"T2 (epsilon {parts['T2']:g})" in g
    assert f"epsilon {parts['tau']:g} buys tau" in g


def test_the_release_line_keeps_a_unit_phrased_as_a_noun(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    url = f"sqlite:///{tmp_path / 'l.sqlite'}"
    cfg = write_config(tmp_path, ELECTRICITY)
    assert release(cfg, tmp_path / "out", url, "m1") == 0
    out = capsys.readouterr().out
    g = json.loads((tmp_path / "out" / "manifest.json").read_text())["privacy"]["guarantee"]
    phrase = "Monday demand curve (one day of the region's half-hourly demand)"
    assert f"for each {phrase} (replace-one adjacency" in g and f"for each {phrase}" in out


def _milk_like(path: Path) -> Path:
    """Weekly readings 1..19 of 6 units; 3 stop at week 15 (a drop-out 4 weeks before the last grid point)."""
    import pandas as pd

    rows = [(f"cow{u}", w, 3.0 + 0.01 * w + 0.05 * u) for u in range(6) for w in range(1, 20 if u < 3 else 16)]
    pd.DataFrame(rows, columns=["cow", "week", "protein"]).to_parquet(path, index=False)
    return path


def test_init_max_end_gap_writes_the_public_gap_and_the_plan_states_it(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data = _milk_like(tmp_path / "milk.parquet")
    out = tmp_path / "milk.yaml"
    base = [str(data), "--unit", "cow", "--time", "week", "--value", "protein", "--time-domain", "0.5", "19.5",
            "--grid-size", "19", "--value-offset", "3", "--value-scale", "1", "--tau", "1"]
    assert main(["init", *base, "--max-end-gap", "4", "--out", str(out)]) == 0
    text = out.read_text()
    line = next(ln for ln in text.splitlines() if ln.strip().startswith("max_end_gap:"))
    assert "PUBLIC, source time units, chosen from the study design" in line
    assert "released as the zero record (value_offset" in text
    assert yaml.safe_load(text)["dataset"]["max_end_gap"] == 4.0
    capsys.readouterr()
    assert main(["plan", str(out), "--epsilon", "1", "--ledger", f"sqlite:///{tmp_path / 'l.sqlite'}"]) == 0
    assert "reach from at most 5 to at least 15 (week" in capsys.readouterr().out  # last grid point 19, gap 4
    assert main(["init", *base]) == 0  # without the option: no max_end_gap line (the default, one grid step)
    assert "max_end_gap" not in yaml.safe_load(capsys.readouterr().out)["dataset"]


def test_init_max_end_gap_is_refused_for_points_and_below_zero(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data = _milk_like(tmp_path / "milk.parquet")
    assert main(["init", str(data), "--unit", "cow", "--time", "week", "--summary", "kde", "--time-domain", "0", "20",
                 "--max-end-gap", "2"]) == 2
    assert "--max-end-gap applies to curves" in capsys.readouterr().err
    assert main(["init", str(data), "--unit", "cow", "--time", "week", "--value", "protein", "--time-domain", "0.5",
                 "19.5", "--max-end-gap", "-1"]) == 2
    assert "dataset.max_end_gap: Input should be greater than or equal to 0" in capsys.readouterr().err


@pytest.mark.parametrize(("week", "ok"), [(["1", " 2", "", "3.0"], True), (["week 1", "week 2", "", "week 3"], False)])
def test_a_parquet_time_column_of_text_is_read_as_numbers_or_refused_naming_the_row(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], week: list[str], ok: bool) -> None:
    import pandas as pd

    path = tmp_path / "t.parquet"
    pd.DataFrame({"cow": ["a"] * 4 + ["b"] * 4, "week": week * 2, "protein": [3.0] * 8}).to_parquet(path, index=False)
    code = main(["init", str(path), "--unit", "cow", "--time", "week", "--value", "protein", "--time-domain", "0.5",
                 "3.5", "--grid-size", "3", "--tau", "1", "--out", str(tmp_path / "t.yaml")])
    err = capsys.readouterr().err
    if ok:  # read as the numbers 1, 2, 3 (spaces ignored; the empty entry is a missing value, its row ignored)
        assert code == 0, err
        assert main(["plan", str(tmp_path / "t.yaml"), "--epsilon", "1", "--ledger",
                     f"sqlite:///{tmp_path / 'l.sqlite'}"]) == 0
        assert "n = 2 privacy units" in capsys.readouterr().out
    else:
        assert code == 2
        assert "column 'week' has a non-numeric entry at row 1; it must be numeric" in err


def test_getting_started_drop_out_example_runs_as_written(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    text, outputs = run_walkthrough("drop-outs", tmp_path, monkeypatch, capsys)
    assert yaml.safe_load((tmp_path / "my-growth.yaml").read_text())["dataset"]["max_end_gap"] == 2.0
    assert "max_end_gap: 2.0" in text  # the page says what the config carries
    assert "aligned when its readings reach from at most 3 to at least 16 (age_years" in outputs[1]
