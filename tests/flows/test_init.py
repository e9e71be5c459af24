"""``fdp init``: a commented config from column names, types and the unit count only (issue 16)."""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

import pandas as pd
import pytest
import yaml
from fdp.flows.cli import main
from fdp.flows.config import load_config
from fdp.flows.init_command import init_config, parse_levels
from flow_support import release, run_walkthrough

REPO = Path(__file__).resolve().parents[2]
DATA = REPO / "examples" / "data" / "electricity_monday.parquet"
ARGS = ["--unit", "monday_index", "--time", "half_hour", "--value", "demand_mw", "--time-domain", "1", "48"]


def _init(data: Path, out: Path, *extra: str) -> int:
    return main(["init", str(data), *ARGS, "--out", str(out), *extra])


@pytest.mark.parametrize("summary", ["mean", "covariance", "fpca"])
def test_init_writes_a_commented_config_that_validates_plans_and_releases(
        summary: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cfg = tmp_path / "c.yaml"
    assert _init(DATA, cfg, "--summary", summary, "--value-offset", "1500", "--value-scale", "1000") == 0
    assert "508 privacy units" in capsys.readouterr().out
    text = cfg.read_text()
    for field in ("time_domain", "value_offset", "value_scale", "tau", "size"):
        line = next(ln for ln in text.splitlines() if ln.strip().startswith(f"{field}:"))
        assert "# PUBLIC" in line or (field == "tau" and "auto   # BOUGHT" in line), line
    config = load_config(cfg)
    assert config.summary == summary and config.dataset.value_scale == 1000.0
    assert main(["plan", str(cfg), "--json", "--epsilon", "1", "--ledger", f"sqlite:///{tmp_path / 'l.sqlite'}"]) == 0
    assert json.loads(capsys.readouterr().out)["n"] == 508
    assert release(cfg, tmp_path / "out", f"sqlite:///{tmp_path / 'l.sqlite'}", "r") == 0
    manifest = json.loads((tmp_path / "out" / "manifest.json").read_text())
    assert manifest["n"] == 508
    # tau: auto is a named budget split charged with the release, first (508 curves at epsilon 1 can buy it)
    assert [s["name"] for s in manifest["budget_splits"]] == ["tau", summary]
    assert manifest["parameters"]["public_choices"][0]["formula"] == "tuning.tau.dp_norm_quantile@2"


def test_init_never_fills_a_value_from_the_data(tmp_path: Path) -> None:
    df = pd.read_parquet(DATA)
    texts = []
    for i, (factor, shift) in enumerate([(1.0, 0.0), (1e-3, 5.0), (250.0, -1e6)]):
        d = tmp_path / f"d{i}"
        d.mkdir()
        # values rescaled and times moved (still alignable on --time-domain: init checks the data as release will)
        changed = df.assign(demand_mw=df["demand_mw"] * factor + shift, half_hour=df["half_hour"] + 0.25 * i)
        changed.to_parquet(d / "data.parquet", index=False)
        assert _init(d / "data.parquet", d / "c.yaml") == 0
        texts.append((d / "c.yaml").read_text())
    assert texts[0] == texts[1] == texts[2]  # values and times changed; the config did not


def test_init_names_a_missing_column_and_refuses_to_overwrite(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["init", str(DATA), "--unit", "monday_index", "--time", "hour", "--value", "demand_mw",
                 "--time-domain", "0", "1"]) == 2
    assert "missing column(s) ['hour']" in capsys.readouterr().err
    cfg = tmp_path / "c.yaml"
    cfg.write_text("x")
    assert _init(DATA, cfg) == 2
    assert "exists" in capsys.readouterr().err and cfg.read_text() == "x"
    points = REPO / "examples" / "data" / "erm_points.parquet"
    erm = ["init", str(points), "--unit", "customer_id", "--time", "x1", "--time-domain", "0", "10", "--summary", "erm"]
    assert main([*erm, "--out", str(tmp_path / "e.yaml")]) == 2
    assert "--value COLUMN: the label" in capsys.readouterr().err
    assert main([*erm, "--value", "response", "--loss", "ridge", "--out", str(tmp_path / "e.yaml")]) == 2
    assert "--label-bound B" in capsys.readouterr().err
    assert main([*erm, "--value", "response", "--loss", "ridge", "--label-bound", "2", "--value-offset", "0.5",
                 "--out", str(tmp_path / "e.yaml")]) == 0  # ridge: --value-offset is the responses' public centre
    assert yaml.safe_load((tmp_path / "e.yaml").read_text())["label_offset"] == 0.5
    assert main([*erm, "--value", "response", "--value-offset", "0.5", "--out", str(tmp_path / "f.yaml")]) == 2
    assert "--value-offset (0.5) applies to curves and to --summary erm --loss ridge" in capsys.readouterr().err


def test_readme_new_data_walkthrough_runs_as_written(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    text, outputs = run_walkthrough("new-data", tmp_path, monkeypatch, capsys)
    assert "nothing charged" in outputs[1]
    assert json.loads(outputs[2])["rows"][0]["epsilon"] == 0.5 and (tmp_path / "my-plan.png").is_file()
    assert "already published — files re-written, nothing charged" in outputs[4]
    assert (tmp_path / "releases" / "my-first" / "release.png").is_file()


POINTS = {
    "kde": (REPO / "examples" / "data" / "kde_points_1d.parquet",
            ["--unit", "person_id", "--time", "score", "--time-domain", "0", "10"], 2000),
    "erm": (REPO / "examples" / "data" / "erm_points.parquet",
            ["--unit", "customer_id", "--time", "x1", "--value", "label", "--time-domain", "0", "10"], 1000),
}


@pytest.mark.parametrize("summary", ["kde", "erm"])
def test_init_writes_point_configs_that_plan_and_release(summary: str, tmp_path: Path,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    """KDE and ERM (issue 16): the domain comes from the options, never from the points; the config plans and releases."""
    data, args, n = POINTS[summary]
    cfg = tmp_path / "p.yaml"
    assert main(["init", str(data), *args, "--summary", summary, "--out", str(cfg)]) == 0
    assert f"{n} privacy units" in capsys.readouterr().out
    text = cfg.read_text()
    assert "domain: [[0.0, 10.0]]   # PUBLIC" in text and "size: 50           # PUBLIC" in text
    config = load_config(cfg)
    assert config.summary == summary and list(config.dataset.domain) == [(0.0, 10.0)]
    ledger = f"sqlite:///{tmp_path / 'l.sqlite'}"
    assert main(["plan", str(cfg), "--json", "--epsilon", "1", "--ledger", ledger]) == 0
    assert json.loads(capsys.readouterr().out)["n"] == n
    assert release(cfg, tmp_path / "out", ledger, "r") == 0
    manifest = json.loads((tmp_path / "out" / "manifest.json").read_text())
    assert manifest["n"] == n
    if summary == "kde":  # fdp init buys the bandwidth (benchmarks/kde_bandwidth.py): split first, then the density
        assert config.bandwidth == "auto" and "bandwidth: auto   # BOUGHT" in text  # type: ignore[union-attr]
        assert [s["name"] for s in manifest["budget_splits"]] == ["bandwidth", "kde"]
        # the plan priced it at the normal_reference bandwidth: the release line says its figure is another one
        assert ("`fdp plan` stated it at the normal_reference bandwidth: this is the noise at the bandwidth released"
                in capsys.readouterr().out)
    moved = tmp_path / "moved.parquet"  # other values, same columns and units: the same config
    frame = pd.read_parquet(data)
    frame[args[3]] = frame[args[3]] * 7.0 - 3.0
    frame.to_parquet(moved, index=False)
    assert main(["init", str(moved), *args, "--summary", summary, "--out", str(tmp_path / "q.yaml")]) == 0

    def _no_names(s: str) -> list[str]:  # the file's name and path differ; everything else must not
        return [ln for ln in s.splitlines()[1:] if not ln.strip().startswith(("path:", "id:"))]

    assert _no_names((tmp_path / "q.yaml").read_text()) == _no_names(text)


@pytest.mark.parametrize(("summary", "data", "args"), [
    ("kde", REPO / "examples" / "data" / "kde_points_2d.parquet",
     ["--unit", "household_id", "--time", "x1", "--time", "x2", "--time-domain", "-5", "5", "--time-domain", "-6", "6"]),
    ("erm", REPO / "examples" / "data" / "erm_points.parquet",
     ["--unit", "customer_id", "--time", "x1", "--time", "x2", "--value", "label", "--time-domain", "0", "10",
      "--time-domain", "-1", "11"]),
])
def test_init_takes_one_time_per_coordinate_for_points_in_two_dimensions(
        summary: str, data: Path, args: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A second --time was silently dropped (the last one won, with the first one's domain); now each coordinate
    keeps its own public range, in order, and the 2-D config plans; a curve summary refuses two."""
    cfg = tmp_path / "p.yaml"
    assert main(["init", str(data), *args, "--summary", summary, "--grid-size", "20", "--out", str(cfg)]) == 0
    config = load_config(cfg)
    assert list(config.dataset.coordinate_columns) == [args[3], args[5]]
    assert [tuple(d) for d in config.dataset.domain] == [
        (float(args[-5]), float(args[-4])), (float(args[-2]), float(args[-1]))]
    if summary == "kde":  # 2-D: the public rule (pricing auto's 2-D candidates takes minutes on a grid's first use)
        assert config.bandwidth == "normal_reference"  # type: ignore[union-attr]
    assert main(["plan", str(cfg), "--epsilon", "1", "--ledger", f"sqlite:///{tmp_path / 'l.sqlite'}"]) == 0
    capsys.readouterr()
    assert main(["init", str(data), *args[:-3], "--summary", summary]) == 2  # two times, one domain
    assert "one --time-domain A B per --time" in capsys.readouterr().err
    assert main(["init", str(DATA), *ARGS[:4], "--time", "monday_index", *ARGS[4:]]) == 2
    assert "exactly one --time column" in capsys.readouterr().err


def _weather(path: Path, *, seasons: tuple[str, ...] = ("winter", "spring", "summer", "autumn"), shift: float = 0.0) -> Path:
    """Hourly temperatures (hours 0..23) of 40 days, each with a text season and a numeric covariate."""
    rows = [{"day": d, "hour": h, "temp_c": 10.0 + shift + 0.3 * h - 0.01 * h * h + 0.1 * d,
             "season": seasons[(d // 10) % len(seasons)], "rain_mm": float((d * 7) % 5) + shift}
            for d in range(40) for h in range(24)]
    frame = pd.DataFrame(rows)
    if path.suffix == ".csv":
        frame.to_csv(path, index=False)
    else:
        frame.to_parquet(path, index=False)
    return path


WEATHER = ["--unit", "day", "--time", "hour", "--value", "temp_c", "--time-domain", "-0.5", "23.5", "--grid-size", "24",
           "--value-offset", "10", "--value-scale", "30", "--summary", "fosr"]


@pytest.mark.parametrize("suffix", [".parquet", ".csv"])
def test_init_refuses_a_text_covariate_without_its_public_levels(suffix: str, tmp_path: Path,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    """A text covariate is not written as numeric (fdp release would refuse it); the message shows the option."""
    data = _weather(tmp_path / f"w{suffix}")
    cfg = tmp_path / "c.yaml"
    for bound in ([], ["--covariate-bound", "1"]):
        assert main(["init", str(data), *WEATHER, "--covariate", "season", *bound, "--out", str(cfg)]) == 2
        err = capsys.readouterr().err
        assert "column 'season' is not numeric" in err and "add --levels season=LEVEL1,LEVEL2,..." in err, err
        assert "winter" not in err.replace("--levels season=winter,spring,summer,autumn", "")  # no value read
        assert not cfg.exists()
    assert main(["init", str(data), *WEATHER, "--covariate", "rain_mm", "--levels", "season=a,b",
                 "--out", str(cfg)]) == 2
    assert "--levels names ['season'], which is not a --covariate" in capsys.readouterr().err
    for bad, message in [("season", "must read COLUMN=LEVEL1,LEVEL2,..."), ("season=winter", "at least two distinct"),
                         ("season=a,a", "level(s) 'a' listed more than once"),
                         ("season=1,2,2", "level(s) '2' listed more than once")]:
        assert main(["init", str(data), *WEATHER, "--covariate", "season", "--levels", bad, "--out", str(cfg)]) == 2
        assert message in capsys.readouterr().err


def test_init_writes_one_hot_covariates_from_public_levels_that_plan_and_release(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data = _weather(tmp_path / "w.parquet")
    cfg = tmp_path / "c.yaml"
    levels = ["--levels", "season=winter,spring,summer,autumn"]
    assert main(["init", str(data), *WEATHER, "--covariate", "season", *levels, "--out", str(cfg)]) == 0
    assert "fosr release of w (40 privacy units, parquet)" in capsys.readouterr().out
    text = cfg.read_text()
    assert ("  - name: season\n    encoding: one_hot\n    levels: [winter, spring, summer, autumn]   # PUBLIC"
            in text), text
    assert "    reference: winter   # the first level" in text
    assert "covariate_bound: 1.0   # PUBLIC: sqrt(1)" in text  # the one-hot default: nothing is shrunk
    config = load_config(cfg)
    (season,) = config.covariates
    assert (season.encoding, season.levels, season.reference) == ("one_hot", ["winter", "spring", "summer", "autumn"],
                                                                  "winter")
    assert config.covariate_bound == 1.0 and config.n_design_columns == 3
    assert config.covariates_within_unit == "error"  # one level per unit: the indicators' products are exactly 0
    ledger = f"sqlite:///{tmp_path / 'l.sqlite'}"
    assert main(["plan", str(cfg), "--json", "--epsilon", "1", "--ledger", ledger]) == 0
    assert json.loads(capsys.readouterr().out)["n"] == 40
    assert release(cfg, tmp_path / "out", ledger, "r") == 0  # the trial's failure was here
    columns = pd.read_parquet(tmp_path / "out" / "release.parquet").columns
    assert {"beta_intercept", "beta_season=spring", "beta_season=summer", "beta_season=autumn"} <= set(columns)

    # two one-hot covariates: sqrt(2); a numeric one is written as before and needs --covariate-bound
    frame = pd.read_parquet(data).assign(site=lambda f: ["north" if d % 2 else "south" for d in f["day"]])
    frame.to_parquet(data, index=False)
    two = ["--covariate", "season", "--covariate", "site", *levels, "--levels", "site=south,north"]
    assert main(["init", str(data), *WEATHER, *two, "--out", str(tmp_path / "two.yaml")]) == 0
    assert load_config(tmp_path / "two.yaml").covariate_bound == pytest.approx(2**0.5)
    mixed = [*two, "--covariate", "rain_mm"]
    assert main(["init", str(data), *WEATHER, *mixed, "--out", str(tmp_path / "m.yaml")]) == 2
    err = capsys.readouterr().err
    assert "numeric covariate(s) ['rain_mm'] have no a-priori bound" in err and "--levels COL=L1,L2" in err
    assert main(["init", str(data), *WEATHER, *mixed, "--covariate-bound", "6", "--out", str(tmp_path / "m.yaml")]) == 0
    m = (tmp_path / "m.yaml").read_text()
    assert "  - name: rain_mm\ncovariates_within_unit: error   # a unit's covariate" in m
    assert "\nintercept: true\ncovariate_bound: 6.0   # PUBLIC: Euclidean bound" in m
    assert [c.encoding for c in load_config(tmp_path / "m.yaml").covariates] == ["one_hot", "one_hot", None]


def test_init_quotes_levels_yaml_would_read_as_other_types(tmp_path: Path) -> None:
    data = tmp_path / "m.csv"
    data.write_text("unit,t,y,member,grade\n" + "".join(f"{u},{t},{t + u},{'yes' if u % 2 else 'no'},{u % 3}\n"
                                                      for u in range(6) for t in range(3)))
    text, _ = init_config(data, unit="unit", time="t", value="y", summary="fosr", time_domain=(-0.5, 2.5), grid_size=3,
                          covariates=["member", "grade"], levels=parse_levels(["member=no,yes", "grade=0,1,2,1.5]"]),
                          config_dir=tmp_path)
    assert "levels: ['no', 'yes']" in text and "reference: 'no'" in text
    (data.parent / "c.yaml").write_text(text)
    member, grade = load_config(data.parent / "c.yaml").covariates
    assert (member.levels, member.reference, grade.levels) == (["no", "yes"], "no", ["0", "1", "2", "1.5]"])


def test_init_fosr_text_depends_on_the_options_only(tmp_path: Path) -> None:
    """Other categories, other numbers: the same config (the levels come from --levels, never from the data)."""
    texts = []
    for i, (seasons, shift) in enumerate([(("winter", "spring", "summer", "autumn"), 0.0), (("summer",), 7.5)]):
        d = tmp_path / f"d{i}"
        d.mkdir()
        data = _weather(d / "w.csv", seasons=seasons, shift=shift)
        assert main(["init", str(data), *WEATHER, "--covariate", "season", "--covariate", "rain_mm",
                     "--levels", "season=winter,spring,summer,autumn", "--covariate-bound", "3",
                     "--out", str(d / "c.yaml")]) == 0
        texts.append((d / "c.yaml").read_text())
    assert texts[0] == texts[1]
    # the recommended public reference curve (T1's noise scales with the intercept): commented, valid once uncommented
    assert "# centering:   # recommended: a PUBLIC reference curve" in texts[0]
    assert load_config(tmp_path / "d0" / "c.yaml").centering is None
    uncommented = re.sub(r"^# centering: .*$", "centering:", texts[0], flags=re.M)
    uncommented = re.sub(r"^#   (time|value|source): ", r"  \1: ", uncommented, flags=re.M)
    (tmp_path / "d0" / "u.yaml").write_text(uncommented)
    assert load_config(tmp_path / "d0" / "u.yaml").centering is not None


def test_init_fpca_n_components_is_checked_against_the_basis(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cfg = tmp_path / "f.yaml"
    assert _init(DATA, cfg, "--summary", "fpca", "--n-components", "3") == 0
    text = cfg.read_text()
    assert "n_components: 3          # PUBLIC" in text and "no centering block: records are centred on" in text
    config = load_config(cfg)
    assert (config.n_components, config.basis.n_basis, config.centering) == (3, 5, None)
    assert _init(DATA, cfg, "--summary", "fpca", "--n-components", "5", "--force") == 2
    assert "--n-components (5) must be < the number of basis functions (5, the default); add --n-basis 6" in (
        capsys.readouterr().err)
    assert _init(DATA, cfg, "--summary", "fpca", "--n-components", "6", "--n-basis", "8", "--force") == 0
    assert (load_config(cfg).n_components, load_config(cfg).basis.n_basis) == (6, 8)
    assert _init(DATA, cfg, "--summary", "fpca", "--n-components", "0", "--force") == 2
    assert "--n-components (0) must be >= 1" in capsys.readouterr().err
    assert _init(DATA, cfg, "--summary", "mean", "--n-components", "2", "--force") == 2
    assert "apply to --summary fpca only" in capsys.readouterr().err


def test_init_help_and_comments_say_value_scale_is_a_bound_and_how_to_set_the_time_domain(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """value_scale as docs/configuration.md defines it; the time-domain convention of the shipped example."""
    with pytest.raises(SystemExit):
        main(["init", "--help"])
    help_text = " ".join(capsys.readouterr().out.split())
    assert "typical size" not in help_text
    assert "bound on how far a value can plausibly lie from --value-offset" in help_text
    assert "(value - offset)/scale lies in [-1, 1]" in help_text
    assert "--time-domain -0.5 23.5 --grid-size 24" in help_text and "t1-h/2 tN+h/2 with --grid-size N" in help_text
    assert "--levels COL=L1,L2,..." in help_text and "--n-components K" in help_text
    assert "bound on how far a value can plausibly lie from" in (REPO / "docs" / "configuration.md").read_text()
    cfg = tmp_path / "c.yaml"
    assert _init(DATA, cfg) == 0
    line = next(ln for ln in cfg.read_text().splitlines() if ln.strip().startswith("value_scale:"))
    assert "bound on how far a value can plausibly lie from value_offset" in line and "[-1, 1]" in line
    # the walkthrough follows the recommendation: one grid point on each half-hour, as the shipped example
    walkthrough = (REPO / "docs" / "getting-started.md").read_text().split("<!-- walkthrough: new-data -->")[1]
    assert "--time-domain 0.5 48.5 --grid-size 48" in walkthrough.split("```")[1]
    assert "time_domain: [0.5, 48.5]" in (REPO / "examples" / "electricity_mean.yaml").read_text()


def test_fosr_page_init_example_runs_as_written(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    text = (REPO / "docs" / "summaries" / "fosr.md").read_text()
    block = re.search(r"<!-- walkthrough: init-fosr -->\n```bash\n(.*?)```", text, re.S)
    assert block is not None
    commands = [shlex.split(ln.split("#", 1)[0]) for ln in block.group(1).replace("\\\n", " ").splitlines() if ln.strip()]
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("FDP_LEDGER_URL", f"sqlite:///{tmp_path / 'ledger.sqlite'}")
    (tmp_path / "examples").symlink_to(REPO / "examples")
    for words in commands:
        assert words[0] == "fdp", words
        assert main(words[1:]) == 0, (words, capsys.readouterr().err)
    (sex,) = load_config(tmp_path / "my-fosr.yaml").covariates
    assert (sex.encoding, sex.levels, sex.reference) == ("one_hot", ["F", "M"], "F")
    # two levels: the better-conditioned +-1 coding is offered in a comment (trial J, M3), valid once used
    text = (tmp_path / "my-fosr.yaml").read_text()
    assert "# two levels: encoding: {F: -1, M: 1} instead of one_hot is better conditioned" in text
    pm1 = re.sub(r"    encoding: one_hot\n    levels: .*\n    reference: .*\n", "    encoding: {F: -1, M: 1}\n", text)
    (tmp_path / "pm1.yaml").write_text(pm1)
    assert load_config(tmp_path / "pm1.yaml").covariates[0].encoding == {"F": -1.0, "M": 1.0}
    assert "plan: fosr of berkeley_growth (n = 93" in capsys.readouterr().out


def test_docs_a_new_user_reads_after_init_match_the_code() -> None:
    """Default tuning of the mean page, and what each curve summary is centred on when init writes no centre."""
    from fdpcore.privacy.tuning import DEFAULT_RULES

    mean = " ".join((REPO / "docs" / "summaries" / "mean.md").read_text().split())
    assert DEFAULT_RULES["iclp_qr"] == DEFAULT_RULES["gp"] == "risk_prior"
    assert "`iclp_qr`/`gp`: `risk_prior` (default," in mean and "`exact_balanced` (default)" not in mean
    cov = " ".join((REPO / "docs" / "summaries" / "covariance.md").read_text().split())
    assert "is the second moment about `c`, not the covariance about the sample mean" in cov
    assert "Σ̂ + (X̄ − c) ⊗ (X̄ − c)" in cov
    fpca = " ".join((REPO / "docs" / "summaries" / "fpca.md").read_text().split())
    assert "`fdp init --summary fpca` writes none" in fpca and "centred on the constant `value_offset`" in fpca


def test_init_kernel_length_scale_is_at_least_two_grid_steps(tmp_path: Path) -> None:
    """A 9-point grid gets rho 0.22 (two steps of [0, 1]), the default 50-point grid 0.1: noise no rougher than the grid."""
    rhos = {}
    for size in (9, 24, 50):
        assert _init(DATA, tmp_path / f"g{size}.yaml", "--grid-size", str(size)) == 0
        rhos[size] = load_config(tmp_path / f"g{size}.yaml").kernel["rho"]
    assert rhos == {9: 0.22, 24: 0.1, 50: 0.1}


def test_init_mean_reference_block_validates_once_uncommented(tmp_path: Path) -> None:
    """The commented `centering` block fdp init writes for a mean is a valid public reference when uncommented."""
    assert _init(DATA, tmp_path / "m.yaml") == 0
    lines = (tmp_path / "m.yaml").read_text().splitlines()
    start = next(i for i, ln in enumerate(lines) if ln.startswith("# centering:"))
    end = next(i for i in range(start, len(lines)) if lines[i].startswith("#   source:")) + 1
    block = [ln[2:] for ln in lines[start:end]]
    text = "\n".join(lines[:start] + [ln for ln in block if not ln.lstrip().startswith("#")] + lines[end:])
    (tmp_path / "r.yaml").write_text(text)
    config = load_config(tmp_path / "r.yaml")
    assert config.centering is not None and config.centering.source == "where the reference comes from"


def test_init_refuses_what_plan_and_release_would_refuse(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A new user's `fdp init … --summary erm --loss logistic --value type` on Yes/No labels wrote a config (exit 0);
    only `fdp plan` then said the label column is not numeric. init reads the data as they will, and writes nothing."""
    data = tmp_path / "pima.csv"
    data.write_text("id,glucose,type\n1,148,Yes\n2,85,No\n3,183,Yes\n")
    out = tmp_path / "p.yaml"
    assert main(["init", str(data), "--unit", "id", "--time", "glucose", "--time-domain", "0", "200", "--summary", "erm",
                 "--loss", "logistic", "--value", "type", "--out", str(out)]) == 2
    assert "pima.csv: column 'type' has a non-numeric entry at row 1" in capsys.readouterr().err and not out.exists()
    # curves whose times all miss --time-domain: no unit can be aligned, as the release would say
    assert main(["init", str(DATA), "--unit", "monday_index", "--time", "half_hour", "--value", "demand_mw",
                 "--time-domain", "100", "148", "--out", str(out)]) == 2
    assert "no privacy unit could be aligned onto the grid" in capsys.readouterr().err and not out.exists()


def test_init_takes_the_csv_delimiter_and_names_the_option_when_it_is_wrong(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Trial H, F10: a ';'-delimited CSV made init say 'is dataset.csv_delimiter (',') the file's delimiter?', but init
    had no such option and wrote no config."""
    frame = pd.read_parquet(DATA)
    for name, sep, option, written in (("semi.csv", ";", ";", ";"), ("tab.csv", "\t", "\\t", "\t")):
        data = tmp_path / name
        frame.to_csv(data, sep=sep, index=False)
        cfg = tmp_path / f"{name}.yaml"
        assert _init(data, cfg) == 2  # the default ',' reads one column
        err = capsys.readouterr().err
        assert "is dataset.csv_delimiter (',') the file's delimiter?" in err
        assert f"fdp init reads the file with --csv-delimiter ',': give the file's, e.g. --csv-delimiter '{option}'" in err
        assert not cfg.exists()
        assert _init(data, cfg, "--csv-delimiter", option) == 0
        assert "508 privacy units" in capsys.readouterr().out
        assert load_config(cfg).dataset.csv_delimiter == written
        assert "# the CSV file's column delimiter (fdp init --csv-delimiter)" in cfg.read_text()
        assert main(["plan", str(cfg), "--json", "--epsilon", "1", "--ledger", f"sqlite:///{tmp_path / 'l.sqlite'}"]) == 0
        assert json.loads(capsys.readouterr().out)["n"] == 508
    # the default writes no line; one character only; a Parquet file has no delimiter
    assert _init(DATA, tmp_path / "p.yaml") == 0 and "csv_delimiter" not in (tmp_path / "p.yaml").read_text()
    assert _init(tmp_path / "semi.csv", tmp_path / "x.yaml", "--csv-delimiter", ";;") == 2
    assert "--csv-delimiter (';;') must be one character" in capsys.readouterr().err
    assert _init(DATA, tmp_path / "y.yaml", "--csv-delimiter", ";") == 2
    assert "--csv-delimiter (';') applies to a .csv file, not to a parquet file" in capsys.readouterr().err


def test_readme_one_example_matches_getting_started_and_runs_on_a_new_dataset(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """Trial H, L4: the README used --time-domain 1 48 with the default 50-point grid, while getting-started puts one
    grid point on each half-hour reading (0.5 48.5 --grid-size 48); and it did not say the dataset id is new."""
    readme = (REPO / "README.md").read_text()
    section = readme.split("## One example", 1)[1].split("\n## ", 1)[0]
    block = re.search(r"```bash\n(.*?)```", section, re.S)
    assert block is not None
    commands = [shlex.split(ln.split("  #", 1)[0]) for ln in block.group(1).replace("\\\n", " ").splitlines() if ln.strip()]
    guide = (REPO / "docs" / "getting-started.md").read_text()
    walk = re.search(r"<!-- walkthrough: new-data -->\n```bash\n(.*?)```", guide, re.S)
    assert walk is not None
    guide_init = next(shlex.split(ln) for ln in walk.group(1).replace("\\\n", " ").splitlines() if "fdp init" in ln)
    assert commands[0] == guide_init  # the same init, option for option
    assert "--time-domain 0.5 48.5 --grid-size 48" in " ".join(commands[0])
    assert "dataset id comes from the file name" in section and "adelaide-electricity-monday" in section
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("FDP_LEDGER_URL", f"sqlite:///{tmp_path / 'ledger.sqlite'}")
    (tmp_path / "examples").symlink_to(REPO / "examples")
    for words in commands:
        assert words[0] == ".venv/bin/fdp", words
        assert main(words[1:]) == 0, (words, capsys.readouterr().err)
    shown = capsys.readouterr().out
    assert "electricity_monday" in shown and "adelaide-electricity-monday" not in shown  # a new ledger dataset
    assert load_config(tmp_path / "my-release.yaml").grid.size == 48
