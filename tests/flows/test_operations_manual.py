"""docs/operations.md recovery walk-throughs, run line by line as written (for the current month).

Each ``fdp`` line of a ```` ```bash ```` block marked ``<!-- walkthrough: STATE -->`` is run through
the CLI's ``main`` with ``2026-11`` replaced by the current month, ``/srv/releases`` by a temporary
folder, and the ledger given by ``FDP_LEDGER_URL``; every line must exit 0. The ledger is prepared as
the walk-through's first comment describes, through the ledger's own API.
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest
from fdp.flows.cli import main
from fdp.flows.config import config_sha256, load_config

from fdpcore.ledger import Ledger, current_period

REPO = Path(__file__).resolve().parents[2]
DATASET = "adelaide-electricity-monday"


def _walkthrough(state: str) -> list[list[str]]:
    text = (REPO / "docs" / "operations.md").read_text()
    block = re.search(rf"<!-- walkthrough: {state} -->\n```bash\n(.*?)```", text, re.S)
    assert block is not None, f"docs/operations.md has no walk-through for {state!r}"
    lines = block.group(1).replace("\\\n", " ").splitlines()
    commands = []
    for line in lines:
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        words = shlex.split(line)
        assert words[0] == ".venv/bin/fdp", line
        commands.append(words[1:])
    return commands


def _prepare(url: str, state: str) -> str:
    """The ledger as a month with a lost run leaves it: policy 12 / 2 a month, covariance published, mean ``state``."""
    led = Ledger(url)
    led.set_budget(DATASET, 12.0, period="month", epsilon_per_period=2.0, delta_per_period=0.0)
    period = current_period()
    kw = dict(dataset_id=DATASET, delta=0.0, summary="mean", mechanism="iclp_qr", sensitivity_formula="s",
              budget_splits=[{"name": "mean", "epsilon": 1.0, "delta": 0.0}], provenance={}, internal={}, period=period)
    led.reserve(release_id=f"{DATASET}-covariance-{period}", epsilon=1.0, config_sha256="c" * 64, **kw)
    mean_sha = config_sha256(load_config(REPO / "examples" / "electricity_mean.yaml"))
    rid = f"{DATASET}-mean-{period}"
    led.reserve(release_id=rid, epsilon=1.0, config_sha256=mean_sha, **kw)
    if state == "noised":
        led.mark_noised(rid)
    return rid


@pytest.mark.parametrize("state", ["noised", "reserved"])
def test_readme_recovery_walkthrough_runs_as_written(state: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    url = f"sqlite:///{tmp_path / 'ledger.sqlite'}"
    monkeypatch.setenv("FDP_LEDGER_URL", url)
    monkeypatch.chdir(REPO)
    rid = _prepare(url, state)
    period = current_period()
    commands = [[w.replace("2026-11", period).replace("/srv/releases", str(tmp_path / "releases")) for w in c]
                for c in _walkthrough(state)]
    if state == "noised":  # without the grant the re-run is refused: the lost run used the month's allowance
        release = next(c for c in commands if c[0] == "release")
        assert main(release) == 3
        assert f"allowance of period {period}" in capsys.readouterr().err
    for command in commands:
        assert main(command) == 0, (command, capsys.readouterr().err)
        out = capsys.readouterr().out
        if command[0] == "release":  # the summary names the month charged and that month's allowance (with the grant)
            assert f"  charged:   period {period}\n" in out and f"{period}: allowed 3, spent 3, remaining 0" in out
    led = Ledger(url)
    if state == "noised":
        assert led.get(f"{rid}-b").state == "published"
        assert led.get(rid).state == "noised"
        assert (tmp_path / "releases" / f"{DATASET}-mean" / f"{period}-b" / "manifest.json").is_file()
        usage = next(p for p in led.budgets(DATASET)[0].periods if p.period == period)
        assert usage.spent == (3.0, 0.0) and usage.allowance == (3.0, 0.0)
    else:
        assert led.get(rid).state == "cancelled"
    assert led.verify() == []


def test_steps_one_to_three_after_the_readme_demo_leave_room_for_both_series(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """README's `fdp demo` charged this dataset's month in the default ledger; the manual's steps, followed
    literally (its exports, its `fdp budget set`), must still let both served series release this month."""
    text = (REPO / "docs" / "operations.md").read_text()
    steps = re.search(r"```bash\n(# 1\. start the Prefect server.*?)```", text, re.S)
    assert steps is not None
    demo_sha = config_sha256(load_config(REPO / "examples" / "electricity_mean_auto.yaml"))
    demo = Ledger()
    demo.ensure_dataset(DATASET, 100.0)  # the demo config's proposal
    demo.reserve(release_id="demo", dataset_id=DATASET, epsilon=1.0, delta=0.0, config_sha256=demo_sha,
                     summary="mean", mechanism="iclp_qr", sensitivity_formula="s", budget_splits=[], provenance={},
                     internal={}, period=current_period())  # what `fdp demo` left in the default ledger
    for line in steps.group(1).replace("\\\n", " ").splitlines():
        line = line.replace("/srv", str(tmp_path / "srv"))
        if line.startswith("export "):
            name, value = line.removeprefix("export ").split("=", 1)
            monkeypatch.setenv(name, value)
        elif line.startswith("mkdir -p "):  # the ledger's directory: fdp creates the file, never the directory
            Path(line.removeprefix("mkdir -p ").strip()).mkdir(parents=True, exist_ok=True)
        elif line.startswith(".venv/bin/fdp budget set"):
            assert main(shlex.split(line)[1:]) == 0, capsys.readouterr().err
    led = Ledger()  # the ledger every fdp command of the steps uses
    for summary in ("mean", "covariance"):
        config = load_config(REPO / "examples" / f"electricity_{summary}.yaml")
        led.reserve(release_id=f"{DATASET}-{summary}-{current_period()}", dataset_id=DATASET,
                    epsilon=config.privacy.epsilon, delta=config.privacy.delta, config_sha256=config_sha256(config),
                    summary=summary, mechanism="m", sensitivity_formula="s", budget_splits=[], provenance={},
                    internal={}, period=current_period())  # refused (BudgetExceededError) if the demo's ledger
