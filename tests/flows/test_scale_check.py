"""Records outside the public value scale (new-user trial H, finding 1).

A value_scale in the wrong units (GDP per capita in dollars, value_scale 20 as if in thousands) put every record
hundreds of times above the a-priori bound: the DP quantile of ``tau: auto`` then lands anywhere in its range, and
the release was flat at the offset with a small stated error and no warning. ``fdp plan`` and ``fdp init`` now count
the records whose norm exceeds the largest clip radius the release can use and warn from a quarter of them; the
count is for the operator's terminal only and never enters a manifest or the release folder.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml
from fdp.flows.cli import main
from fdp.flows.config import load_config
from fdp.tasks._publish import artifact_prefix
from fdp.tasks.planning import tau_search_range
from flow_support import artifacts, release


def _data(tmp_path: Path, *, level: float, n: int = 40) -> Path:
    """``n`` units read every year 0..10 around ``level`` (about +-20 % of it between units)."""
    rng = np.random.default_rng(3)
    rows = [{"unit": f"u{i}", "t": float(t), "gdp": level * (1.0 + 0.2 * rng.standard_normal() + 0.02 * t)}
            for i in range(n) for t in range(11)]
    path = tmp_path / "d.csv"
    pd.DataFrame(rows).to_csv(path, index=False)
    return path


def _init(tmp_path: Path, data: Path, capsys: pytest.CaptureFixture[str], *, scale: str,
          tau: str | None = None) -> tuple[Path, str]:
    """``fdp init`` of a mean on [0, 10] with offset 4, the given value_scale and tau (default auto)."""
    out = tmp_path / "c.yaml"
    assert main(["init", str(data), "--unit", "unit", "--time", "t", "--value", "gdp", "--time-domain", "0", "10",
                 "--grid-size", "11", "--value-offset", "4", "--value-scale", scale,
                 *(["--tau", tau] if tau is not None else []), "--out", str(out), "--force"]) == 0
    return out, capsys.readouterr().err


def _plan(config: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], *extra: str) -> str:
    assert main(["plan", str(config), "--epsilon", "1", "--ledger", f"sqlite:///{tmp_path / 'l.sqlite'}",
                 *extra]) == 0
    return capsys.readouterr().out


def _scale_lines(text: str) -> list[str]:
    return [ln for ln in text.splitlines() if "aligned records" in ln and "so every release shrinks them" in ln]


def test_a_value_scale_in_the_wrong_units_is_warned_by_init_and_plan(tmp_path: Path,
                                                                      capsys: pytest.CaptureFixture[str]) -> None:
    # GDP per capita around 4000 dollars; the user thought it was in thousands (offset 4, scale 20)
    config, err = _init(tmp_path, _data(tmp_path, level=4000.0), capsys, scale="20")
    (warned,) = _scale_lines(err)
    assert warned.startswith("fdp: warning: 40 of 40 aligned records (100 %) have a norm more than 1 % above the upper end of "
                             "tau: auto's range (1, "), warned
    assert "is value_scale (20) in the units of gdp?" in warned
    assert "lands anywhere in it" in warned  # what it does to tau: auto
    assert "the stated error (noise only) does not include" in warned
    assert "40 of 40" not in config.read_text()  # init writes no count into the config
    lines = _scale_lines(_plan(config, tmp_path, capsys))
    assert len(lines) == 1 and lines[0].strip().removeprefix("warning: ") == warned.removeprefix("fdp: warning: ")
    report = json.loads(_plan(config, tmp_path, capsys, "--json"))
    out = report["out_of_scale"]
    assert (out["count"], out["n"], out["share"], out["tau_max"]) == (40, 40, 1.0, 1.0)
    assert 150 < out["median_ratio"] < out["max_ratio"]  # (4000 - 4) / 20 is about 200 x the radius


def test_records_within_the_scale_or_a_few_above_it_give_no_warning(tmp_path: Path,
                                                                     capsys: pytest.CaptureFixture[str]) -> None:
    # GDP in thousands (about 4 +- 20 %) with offset 4 and scale 20: every record well inside
    config, err = _init(tmp_path, _data(tmp_path, level=4.0), capsys, scale="20")
    assert not _scale_lines(err)
    report = json.loads(_plan(config, tmp_path, capsys, "--json"))
    assert report["out_of_scale"]["count"] == 0 and report["out_of_scale"]["median_ratio"] < 0.1
    assert not _scale_lines(_plan(config, tmp_path, capsys))
    # a stated mean's size raises tau: auto's lower end (tuning.signal_rms), but the far-below count keeps the
    # default range's: records below the stated mean's norm say nothing about value_scale
    raw = yaml.safe_load(config.read_text())
    raw["tuning"] = {"signal_rms": 0.5}
    config.write_text(yaml.safe_dump(raw))
    report = json.loads(_plan(config, tmp_path, capsys, "--json"))
    assert report["out_of_scale"]["tau_min"] == 0.01 and report["out_of_scale"]["below"] == 0  # grid domain [0, 1]
    assert tau_search_range(load_config(config)) == pytest.approx((0.5, 1.0))


def test_a_public_tau_is_the_radius_and_a_quarter_is_the_threshold(tmp_path: Path,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    data = _data(tmp_path, level=4000.0)
    config, _ = _init(tmp_path, data, capsys, scale="20", tau="1000")  # radius 1000 x 20 = 20000: all inside
    report = json.loads(_plan(config, tmp_path, capsys, "--json"))
    assert report["out_of_scale"]["tau_max"] == 1000.0 and report["out_of_scale"]["count"] == 0
    assert not _scale_lines(_plan(config, tmp_path, capsys))
    config, err = _init(tmp_path, data, capsys, scale="20", tau="150")  # radius 3000 dollars: most records above it
    (warned,) = _scale_lines(err)
    assert "have a norm more than 1 % above clipping.tau = 150," in warned and "lands anywhere" not in warned


def test_a_release_warns_on_its_terminal_and_publishes_no_out_of_scale_count(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Trial N: a user who skipped `fdp plan` spent epsilon on values in the wrong units without a word. `fdp release`
    prints the plan's warning on stderr before it charges; the release folder, its stdout and Prefect's artifacts
    never carry the count."""
    config, _ = _init(tmp_path, _data(tmp_path, level=4000.0), capsys, scale="20")
    plan_lines = _scale_lines(_plan(config, tmp_path, capsys))
    assert release(config, tmp_path / "out", f"sqlite:///{tmp_path / 'l.sqlite'}", "units-1") == 0
    printed = capsys.readouterr()
    (warned,) = _scale_lines(printed.err)
    assert warned == "fdp: warning: " + plan_lines[0].strip().removeprefix("warning: ")
    assert printed.err.index(warned) < printed.err.index("budget charged")  # said before anything is spent
    assert not _scale_lines(printed.out)
    manifest = json.loads((tmp_path / "out" / "manifest.json").read_text())
    assert "out_of_scale" not in manifest
    for f in (tmp_path / "out").rglob("*"):
        if f.suffix in (".json", ".md", ".txt", ".csv"):
            text = f.read_text()
            assert "out_of_scale" not in text and "aligned records" not in text, f
    notes = artifacts(f"{artifact_prefix(load_config(config))}-release-note")
    assert notes and not any("aligned records" in n for n in notes)


def test_values_in_far_smaller_units_than_the_config_are_warned_as_one_constant(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Trial P (M4): GDP per capita in thousands under a dollars config (offset 4000, scale 20000 here) is about -0.2
    everywhere, inside the scale: no out-of-scale warning, and a meaningless release. Warned by init, plan and release
    (before the charge); the same data in dollars, or a narrow but centred set, is not."""
    marker = "aligned records' values span only"
    data = _data(tmp_path, level=4.0)  # thousands: 4 +- 20 %
    out = tmp_path / "k.yaml"
    assert main(["init", str(data), "--unit", "unit", "--time", "t", "--value", "gdp", "--time-domain", "0", "10",
                 "--grid-size", "11", "--value-offset", "4000", "--value-scale", "20000", "--out", str(out),
                 "--force"]) == 0
    (warned,) = _warned(capsys.readouterr().err, marker)
    assert "fdp: warning: the 40 aligned records' values span only" in warned and "% of value_scale = 20000)" in warned
    assert "below value_offset (4000)" in warned and "(e.g. thousands against units)?" in warned
    assert _warned(_plan(out, tmp_path, capsys), marker)
    assert release(out, tmp_path / "out", f"sqlite:///{tmp_path / 'l.sqlite'}", "kusd-1") == 0
    printed = capsys.readouterr()
    (said,) = _warned(printed.err, marker)
    assert printed.err.index(said) < printed.err.index("budget charged") and not _warned(printed.out, marker)
    # the same values in the config's units, or centred on the offset: nothing to say
    config, err = _init(tmp_path, _data(tmp_path, level=4000.0), capsys, scale="20000")
    assert not _warned(err, marker)
    # trial Y: deaths per million miles (about 0.02) under a per-100-million config (offset 2.2, scale 2.5) span
    # about 1.5 % of the scale, all about 0.87 of it below the offset: warned since the threshold is 5 %
    small = tmp_path / "deaths.yaml"
    assert main(["init", str(_data(tmp_path, level=0.022)), "--unit", "unit", "--time", "t", "--value", "gdp",
                 "--time-domain", "0", "10", "--grid-size", "11", "--value-offset", "2.2", "--value-scale", "2.5",
                 "--out", str(small), "--force"]) == 0
    (warned,) = _warned(capsys.readouterr().err, marker)
    assert "below value_offset (2.2)" in warned and "% of value_scale = 2.5)" in warned
    config, err = _init(tmp_path, _data(tmp_path, level=4.0), capsys, scale="20")
    assert not _warned(err, marker) and not _warned(_plan(config, tmp_path, capsys), marker)


def test_repeated_readings_are_averaged_and_warned_of_from_five_percent_of_the_rows(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Trial P (L1): every (unit, time) twice with values that disagree was released without a word."""
    marker = "repeat the (unit, time) of another row and were averaged with it"
    data = _data(tmp_path, level=4.0)
    frame = pd.read_csv(data)
    twice = pd.concat([frame, frame.assign(gdp=frame["gdp"] + 0.1)])  # a duplicated export that disagrees
    twice.to_csv(data, index=False)
    config, err = _init(tmp_path, data, capsys, scale="20")
    (warned,) = _warned(err, marker)
    assert warned.startswith("fdp: warning: 440 of 880 rows (50 %) repeat the (unit, time) of another row")
    assert _warned(_plan(config, tmp_path, capsys), marker)
    twice.iloc[: len(frame) + 21].to_csv(data, index=False)  # 21 of 461 rows (4.6 %): below the threshold
    config, err = _init(tmp_path, data, capsys, scale="20")
    assert not _warned(err, marker) and not _warned(_plan(config, tmp_path, capsys), marker)


def test_a_far_too_generous_value_scale_is_warned_below_the_tau_range(tmp_path: Path,
                                                                       capsys: pytest.CaptureFixture[str]) -> None:
    # GDP in thousands (about 4) with a scale of 5000: every record far below tau: auto's lower end (0.01)
    config, err = _init(tmp_path, _data(tmp_path, level=4.0), capsys, scale="5000")
    (warned,) = [ln for ln in err.splitlines() if "below the lower end of tau: auto's range (0.01)" in ln]
    assert warned.startswith("fdp: warning: 40 of 40 aligned records (100 %) have a norm below"), warned
    assert "is value_scale (5000) in the units of gdp, or far too generous?" in warned
    # trial V: where tau falls back to the range's upper end the factor is that end's, not the lower end's
    lower, upper = (float(f) for f in re.findall(r"at least ([0-9.e+]+) x that of a tau .* \(([0-9.e+]+) x where n", warned)[0])
    assert upper == pytest.approx(lower * 100, rel=0.01)  # tau_max / tau_min = 1 / 0.01
    report = json.loads(_plan(config, tmp_path, capsys, "--json"))
    assert (report["out_of_scale"]["below"], report["out_of_scale"]["tau_min"]) == (40, 0.01)
    assert sum("below the lower end" in w for w in report["warnings"]) == 1
    # a public tau has no range to fall below: no such warning
    config, err = _init(tmp_path, _data(tmp_path, level=4.0), capsys, scale="5000", tau="1")
    assert "below the lower end" not in err
    assert json.loads(_plan(config, tmp_path, capsys, "--json"))["out_of_scale"]["below"] == 0


# --- points (KDE, ERM): new-user trial M, H1-H3 ----------------------------------------------------------------------

def _points(tmp_path: Path, **columns: np.ndarray) -> Path:
    path = tmp_path / "p.csv"
    n = len(next(iter(columns.values())))
    pd.DataFrame({"unit": [f"u{i}" for i in range(n)], **columns}).to_csv(path, index=False)
    return path


def _init_points(tmp_path: Path, data: Path, capsys: pytest.CaptureFixture[str], *args: str) -> tuple[Path, str]:
    out = tmp_path / "p.yaml"
    assert main(["init", str(data), "--unit", "unit", *args, "--out", str(out), "--force"]) == 0
    return out, capsys.readouterr().err


def _warned(text: str, marker: str) -> list[str]:
    return [ln for ln in text.splitlines() if marker in ln]


def test_a_kde_domain_in_the_wrong_units_is_warned_by_init_and_plan(tmp_path: Path,
                                                                    capsys: pytest.CaptureFixture[str]) -> None:
    # prices in dollars (300..19000); the user wrote the domain in thousands
    prices = np.random.default_rng(1).lognormal(8.0, 1.0, 400).clip(300, 19000)
    config, err = _init_points(tmp_path, _points(tmp_path, price=prices), capsys, "--summary", "kde", "--time", "price",
                               "--time-domain", "0", "20")
    (warned,) = _warned(err, "lie outside dataset.domain")
    assert "of 400 points" in warned and "[0, 20]" in warned and "units of price?" in warned
    assert _warned(_plan(config, tmp_path, capsys), "lie outside dataset.domain")
    config, err = _init_points(tmp_path, _points(tmp_path, price=prices), capsys, "--summary", "kde", "--time", "price",
                               "--time-domain", "0", "20000")
    assert _warned(err, "dataset.domain") == []  # the right units: silent


def test_a_ridge_without_its_public_centre_is_warned(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rng = np.random.default_rng(2)
    x = rng.uniform(60, 75, 300)
    heights = 0.6 * x + 28 + rng.normal(0, 2, 300)  # inches, about 60..78
    data = _points(tmp_path, parent=x, child=heights)
    args = ("--summary", "erm", "--loss", "ridge", "--time", "parent", "--time-domain", "58", "78", "--value", "child",
            "--label-bound", "12")
    config, err = _init_points(tmp_path, data, capsys, *args)  # no --value-offset: label_offset 0
    (warned,) = _warned(err, "beyond label_offset +- label_bound")
    assert warned.startswith("fdp: warning: 300 of 300 responses (100 %) lie beyond label_offset +- label_bound (0 +- 12)")
    assert _warned(_plan(config, tmp_path, capsys), "beyond label_offset")
    _, err = _init_points(tmp_path, data, capsys, *args, "--value-offset", "68")
    assert _warned(err, "label_offset") == []


def test_classifier_labels_coded_one_and_two_are_warned(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rng = np.random.default_rng(3)
    glucose = rng.uniform(60, 190, 300)
    coded = np.where(glucose + rng.normal(0, 20, 300) > 130, 2, 1)  # 1 = healthy, 2 = diabetic
    args = ("--summary", "erm", "--loss", "logistic", "--time", "glucose", "--time-domain", "40", "200", "--value", "y")
    config, err = _init_points(tmp_path, _points(tmp_path, glucose=glucose, y=coded), capsys, *args)
    (warned,) = _warned(err, "labels (100 %) are +1")
    assert f"({int(np.sum(coded == 2))} labels other than -1/+1 were mapped by labels: sign" in warned  # the 2s
    assert "coded 1/2 all become +1" in warned
    assert _warned(_plan(config, tmp_path, capsys), "are +1")
    _, err = _init_points(tmp_path, _points(tmp_path, glucose=glucose, y=coded - 1), capsys, *args)  # 0/1: fine
    assert _warned(err, "labels (") == []


def test_a_three_valued_label_merged_by_its_sign_is_warned(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Trial S: arrivals coded early / on time / late as -1/0/+1 became two classes (0 to -1) without a word."""
    rng = np.random.default_rng(4)
    hour = rng.uniform(5, 23, 400)
    coded = np.digitize(hour + rng.normal(0, 4, 400), [11.0, 17.0]) - 1  # -1, 0, +1
    args = ("--summary", "erm", "--loss", "logistic", "--time", "hour", "--time-domain", "0", "24", "--value", "y")
    config, err = _init_points(tmp_path, _points(tmp_path, hour=hour, y=coded), capsys, *args)
    (warned,) = _warned(err, "distinct values")
    assert "y holds 3 distinct values, and labels: sign merged them into two classes" in warned
    assert f"{int(np.sum(coded == 0))} of 400 labels mapped" in warned and "are +1" not in warned
    assert _warned(_plan(config, tmp_path, capsys), "distinct values")
    _, err = _init_points(tmp_path, _points(tmp_path, hour=hour, y=np.where(coded > 0, 1, -1)), capsys, *args)
    assert _warned(err, "distinct values") == []  # two values: silent


@pytest.mark.parametrize(("level", "warned"), [(1.0, False), (1.0 + 1e-9, False), (1.005, False), (1.05, True)])
def test_a_tight_bound_is_not_warned_of_but_records_shrunk_by_more_than_one_percent_are(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], level: float, warned: bool) -> None:
    """Session 28: z-scored records (RMS exactly 1) at the recommended tau = 1 were all 'above' it by a rounding error;
    a record counts from 1 % above the radius (it is then shrunk by more than 1 %)."""
    path = tmp_path / "d.csv"
    pd.DataFrame([{"unit": f"u{i}", "t": float(t), "v": level} for i in range(40) for t in range(11)]).to_csv(path,
                                                                                                             index=False)
    out = tmp_path / "c.yaml"
    assert main(["init", str(path), "--unit", "unit", "--time", "t", "--value", "v", "--time-domain", "0", "10",
                 "--grid-size", "11", "--value-offset", "0", "--value-scale", "1", "--tau", "1", "--out", str(out)]) == 0
    assert bool(_scale_lines(capsys.readouterr().err)) is warned
    report = json.loads(_plan(out, tmp_path, capsys, "--json"))
    assert report["out_of_scale"]["count"] == (40 if warned else 0)
