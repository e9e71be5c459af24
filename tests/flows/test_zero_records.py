"""Zero records on sparse, irregular designs (issue 16 follow-up, new-user trial G, finding 1).

On HLMdiag/wages 878 of 888 units could not be aligned within the default end gap and entered the release as the
zero record, silently. ``fdp plan`` and ``fdp init`` now count them from the data and warn at >= 5 %; the count is
for the operator's terminal only and never enters a manifest or the release folder.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
from fdp.flows.cli import main
from flow_support import REPO, release

CONFIGURATION = REPO / "docs" / "configuration.md"


def _data(tmp_path: Path, *, dense: int, sparse: int = 0, outside: int = 0) -> Path:
    """Units on [0, 10]: ``dense`` read every year 0..10, ``sparse`` only at 4, 5, 6, ``outside`` only at 87, 88."""
    rows = []
    for i in range(dense + sparse + outside):
        times = range(11) if i < dense else (4, 5, 6) if i < dense + sparse else (87, 88)
        rows += [{"unit": f"u{i}", "t": float(t), "y": 1.0 + 0.05 * t + 0.01 * (i % 7)} for t in times]
    path = tmp_path / "d.csv"
    pd.DataFrame(rows).to_csv(path, index=False)
    return path


def _init(tmp_path: Path, data: Path, capsys: pytest.CaptureFixture[str]) -> tuple[Path, str]:
    """``fdp init`` of a mean on [0, 10] with 10 grid points (default end gap 1); the config and init's stderr."""
    out = tmp_path / "c.yaml"
    assert main(["init", str(data), "--unit", "unit", "--time", "t", "--value", "y", "--time-domain", "0", "10",
                 "--grid-size", "10", "--value-offset", "1", "--value-scale", "1", "--tau", "1",
                 "--out", str(out)]) == 0
    return out, capsys.readouterr().err


def _plan(config: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], *extra: str) -> str:
    assert main(["plan", str(config), "--epsilon", "1", "--ledger", f"sqlite:///{tmp_path / 'l.sqlite'}",
                 *extra]) == 0
    return capsys.readouterr().out


def _zero_lines(text: str) -> list[str]:
    return [ln for ln in text.splitlines() if "enter the release as the zero record" in ln]


def test_plan_warns_with_the_count_of_zero_records_and_those_without_rows_in_the_domain(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config, _ = _init(tmp_path, _data(tmp_path, dense=30, sparse=8, outside=2), capsys)
    lines = _zero_lines(_plan(config, tmp_path, capsys))
    assert len(lines) == 1, lines
    line = lines[0]
    assert line.startswith("  warning: 10 of 40 units (25 %) enter the release as the zero record (the constant "
                           "value_offset 1): their readings do not reach from at most 1.5 to at least 8.5 (t; "
                           "dataset.max_end_gap 1)"), line
    assert "2 of them have no finite reading inside time_domain [0, 10]" in line
    assert "pulled towards the constant value_offset 1 by that share (25 %)" in line
    assert "the stated error (noise only) does not include this" in line
    for lever in ("dataset.max_end_gap", "--max-end-gap", "a shorter time_domain", "reference curve", "PACE"):
        assert lever in line, lever
    report = json.loads(_plan(config, tmp_path, capsys, "--json"))
    assert report["zero_records"] == {"count": 10, "n": 40, "share": 0.25, "without_rows_in_domain": 2}
    assert sum("10 of 40 units" in w for w in report["warnings"]) == 1


def test_no_warning_without_zero_records_or_below_five_percent(tmp_path: Path,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    for sparse, warned in ((0, False), (1, False), (2, True)):  # of 40 units: 0 %, 2.5 %, 5 %
        folder = tmp_path / str(sparse)
        folder.mkdir()
        config, err = _init(folder, _data(folder, dense=40 - sparse, sparse=sparse), capsys)
        assert bool(_zero_lines(err)) is warned, err
        assert bool(_zero_lines(_plan(config, folder, capsys))) is warned
        report = json.loads(_plan(config, folder, capsys, "--json"))
        assert report["zero_records"]["count"] == sparse and report["zero_records"]["n"] == 40
        assert not any("zero record" in w for w in report["warnings"]) or warned


def test_init_warns_on_stderr_and_writes_no_count_into_the_config(tmp_path: Path,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    config, err = _init(tmp_path, _data(tmp_path, dense=10, sparse=30), capsys)
    assert _zero_lines(err) == [next(ln for ln in err.splitlines() if ln.startswith("fdp: warning: 30 of 40 units "
                                                                                   "(75 %) enter the release"))]
    assert "30 of 40" not in config.read_text() and "zero record (" not in config.read_text()


def test_a_release_warns_on_its_terminal_and_publishes_no_zero_record_count(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The count is said on stderr before the charge (as by `fdp plan`; trial N); the release folder and stdout never
    carry it."""
    config, err = _init(tmp_path, _data(tmp_path, dense=10, sparse=30), capsys)
    assert release(config, tmp_path / "out", f"sqlite:///{tmp_path / 'l.sqlite'}", "sparse-1") == 0
    printed = capsys.readouterr()
    assert _zero_lines(printed.err) == _zero_lines(err) and len(_zero_lines(err)) == 1  # the words of fdp init
    assert printed.err.index(_zero_lines(err)[0]) < printed.err.index("budget charged")
    assert not _zero_lines(printed.out)
    manifest = json.loads((tmp_path / "out" / "manifest.json").read_text())
    assert "zero_records" not in manifest
    for f in (tmp_path / "out").rglob("*"):
        if f.suffix in (".json", ".md", ".txt", ".csv"):
            text = f.read_text()
            assert "zero_records" not in text and "30 of 40" not in text, f


def test_configuration_sparse_design_example_runs_as_written(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    text = CONFIGURATION.read_text()
    section = text.split("## Sparse and irregular designs")[1].split("\n## ")[0]
    python = re.search(r"<!-- example: sparse-growth -->\n```python\n(.*?)```", section, re.S)
    bash = re.search(r"```bash\n(.*?)```", section, re.S)
    assert python is not None and bash is not None
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("FDP_LEDGER_URL", f"sqlite:///{tmp_path / 'ledger.sqlite'}")
    (tmp_path / "examples").symlink_to(REPO / "examples")
    subprocess.run([sys.executable, "-c", python.group(1)], check=True, cwd=tmp_path)
    outputs = []
    for line in bash.group(1).replace("\\\n", " ").splitlines():
        if line.strip() and not line.lstrip().startswith("#"):
            words = line.split()
            assert words[0] == ".venv/bin/fdp", words
            assert main(words[1:]) == 0, capsys.readouterr().err
            captured = capsys.readouterr()
            outputs.append(captured.out + captured.err)
    # the page quotes the plan's warning as it is printed
    quoted = re.search(r"```text\n(.*?)```", section, re.S)
    assert quoted is not None
    excerpts = [e.strip() for e in quoted.group(1).split("…") if e.strip()]
    assert len(excerpts) == 2 and excerpts[0].startswith("warning: 70 of 93 units (75.3 %)")
    for excerpt in excerpts:
        assert excerpt in outputs[0] and excerpt in outputs[1], excerpt  # init (stderr) and plan say it alike
    # the drop-out rule links here, and troubleshooting's "flat at value_offset" entry points to this section
    assert '"Sparse and irregular designs" below' in text.split("## Sparse and irregular designs")[0]
    trouble = (REPO / "docs" / "troubleshooting.md").read_text()
    assert "the released mean is flat at `value_offset`" in trouble
    assert '[Configuration](configuration.md), "Sparse and irregular designs"' in trouble
