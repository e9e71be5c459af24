"""docs/cli.md's example block, run line by line as written, in order, on a new ledger (trial R, M2).

A new user ran the block on a fresh machine: its ``budget set … --per-period 1`` came after two lines that had spent
ε 2 this month and was refused (exit 2). Each ``fdp`` line of the block marked ``<!-- cli-examples -->`` is run
through the CLI's ``main`` in a new folder (``examples/`` linked to the repository's), with the default ledger in a
new state directory; every line must exit 0.
"""

from __future__ import annotations

import json
import os
import re
import shlex
from pathlib import Path

import pytest
from fdp.flows.cli import main

from fdpcore.ledger import Ledger, default_ledger_url

REPO = Path(__file__).resolve().parents[2]


def _examples() -> list[list[str]]:
    text = (REPO / "docs" / "cli.md").read_text()
    block = re.search(r"<!-- cli-examples -->\n```bash\n(.*?)```", text, re.S)
    assert block is not None, "docs/cli.md has no block marked <!-- cli-examples -->"
    commands = []
    for line in block.group(1).replace("\\\n", " ").splitlines():
        words = shlex.split(line, comments=True)
        if not words:
            continue
        assert words[0] == ".venv/bin/fdp", line
        if ">" in words:  # a shell redirection: the command is what comes before it
            words = words[: words.index(">")]
        commands.append([os.path.expandvars(w) for w in words[1:]])
    return commands


def test_the_cli_examples_run_in_order_on_a_new_ledger(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "examples").symlink_to(REPO / "examples")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PWD", str(tmp_path))
    monkeypatch.delenv("FDP_LEDGER_URL", raising=False)
    commands = _examples()
    assert [c[:2] for c in commands][:4] == [["demo", "--out"], ["release", "examples/electricity_mean.yaml"],
                                            ["release", "examples/electricity_mean.yaml"], ["budget", "set"]]
    for command in commands:
        assert main(command) == 0, (command, capsys.readouterr().err[-3000:])
        out = capsys.readouterr().out
        if command[:2] == ["budget", "show"] and "--json" in command:
            assert json.loads(out)  # the budgets set and spent by the lines above
    budget = {b.dataset_id: b for b in Ledger(default_ledger_url()).budgets()}
    assert budget["adelaide-electricity-monday"].spent == (2.0, 0.0)  # demo + the release; its re-run charged nothing
    assert not (tmp_path / "new-ledger.sqlite").exists()  # `budget show` on a new ledger creates nothing
