"""The manual (issue 21): it builds strictly, README stays a front page, and the manual covers the CLI.

``mkdocs build --strict`` fails on a broken link, a missing page, an unresolvable API reference or a
docstring the API reference cannot read; the other tests check what strict mode cannot see.
"""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
DOCS = REPO / "docs"


def _bash_blocks(text: str) -> list[str]:
    return re.findall(r"```bash\n(.*?)```", text, re.S)


def test_manual_builds_strictly(tmp_path: Path) -> None:
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    done = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-d", str(tmp_path / "site")],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-4000:]
    site = tmp_path / "site"
    for page in ("index.html", "summaries/covariance/index.html", "api/summaries/index.html", "api/schemas/index.html",
                 "schemas/fdp_privacy/1-0-0.json"):  # the lineage facet schema the _schemaURL names
        assert (site / page).is_file(), page
    # the API reference is generated from the docstrings, not empty headings
    api = (site / "api" / "summaries" / "index.html").read_text()
    assert "covariance_public_sensitivity" in api and "release_mean" in api
    assert not (site / "hooks.py").exists()  # the build's hook is not a page (trial R: it was published)


def test_docs_serve_stops_on_sigterm_and_leaves_nothing_behind(tmp_path: Path) -> None:
    """Trial R: SIGTERM to `dev.py docs serve` left `mkdocs serve` answering and its temporary folders in /tmp."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    temp = tmp_path / "tmp"
    temp.mkdir()
    env = {**os.environ, "TMPDIR": str(temp), "NO_MKDOCS_2_WARNING": "1"}
    proc = subprocess.Popen([sys.executable, str(REPO / "dev.py"), "docs", "serve", "-a", f"127.0.0.1:{port}"],
                            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=2).close()
                break
            except OSError:
                assert proc.poll() is None and time.monotonic() < deadline, proc.stderr.read() if proc.stderr else ""
                time.sleep(0.5)
        assert list(temp.iterdir())  # the served site and the hook's link tree
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
    with pytest.raises(OSError):
        urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=2)
    assert list(temp.iterdir()) == []


def test_readme_is_a_front_page_with_the_two_quick_start_commands() -> None:
    text = (REPO / "README.md").read_text()
    assert len(text.splitlines()) < 150
    quick = text.split("## Quick start", 1)[1].split("\n## ", 1)[0]
    assert _bash_blocks(quick) == ["python3 dev.py demo\npython3 dev.py test\n"]
    assert "python3 dev.py test -q" in (REPO / ".ci" / "run").read_text()
    for page in re.findall(r"`(docs/[\w/.-]+\.md)`", text):
        assert (REPO / page).is_file(), page


def _subcommands() -> set[str]:
    cli = (REPO / "flows" / "cli.py").read_text()
    return set(re.findall(r'add_parser\(\s*"([a-z-]+)"', cli))


def test_every_fdp_subcommand_has_a_runnable_example_in_the_manual() -> None:
    commands = []
    for page in DOCS.rglob("*.md"):
        for block in _bash_blocks(page.read_text()):
            for line in block.replace("\\\n", " ").splitlines():
                words = line.split("#", 1)[0].split()
                if words and words[0].endswith("fdp"):
                    commands.append(words[1:])
    used = {w for words in commands for w in words[:2]}
    missing = sorted(_subcommands() - used)
    assert not missing, f"no `fdp …` example in a ```bash block of docs/ for: {missing}"


@pytest.mark.parametrize("page,key", [("mean", "mean"), ("covariance", "cov"), ("fosr", "fosr"), ("kde", "kde"),
                                      ("erm", "erm"), ("fpca", "fpca")])
def test_each_summary_page_links_the_proof_note_of_each_of_its_formulas(page: str, key: str) -> None:
    from fdpcore.privacy.formulas import FORMULAS

    text = (DOCS / "summaries" / f"{page}.md").read_text()
    ids = [fid for fid in FORMULAS if fid.split(".")[1] == key]
    assert ids
    missing = [fid for fid in ids if f"](../proofs/{fid}.md)" not in text]
    assert not missing, missing


@pytest.mark.parametrize("page", ["covariance", "fosr", "fpca", "kde"])
def test_python_facade_examples_of_the_summary_pages_run(page: str) -> None:
    """Every ```python block of these pages is self-contained and runs (its asserts check the facade's ``tau="auto"``)."""
    path = DOCS / "summaries" / f"{page}.md"
    blocks = re.findall(r"```python\n(.*?)```", path.read_text(), re.S)
    assert blocks
    for block in blocks:
        exec(compile(block, str(path), "exec"), {"__name__": f"docs_{page}"})  # noqa: S102  # our own docs


def test_python_facade_page_blocks_run() -> None:
    """docs/python.md: every ```python block is self-contained and runs (the facades a methodologist starts from)."""
    blocks = re.findall(r"```python\n(.*?)```", (DOCS / "python.md").read_text(), re.S)
    assert len(blocks) >= 5
    for i, block in enumerate(blocks):
        exec(compile(block, f"docs/python.md block {i}", "exec"), {})  # noqa: S102 - the manual's own examples
