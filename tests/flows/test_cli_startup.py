"""CLI start-up: commands import only what they use (issue 8; timings in benchmarks/README.md, CLI).

Each check runs in a fresh interpreter, since this test process has long imported Prefect.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from fdp.flows.temporary_server import TemporaryServer, _free_port, start_temporary_server

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "examples" / "electricity_mean.yaml"
HEAVY = ("prefect", "matplotlib", "fastapi", "openlineage", "fdp.tasks", "fdp.flows.mean_release",
         "fdp.flows.fpca_release", "fdp.flows.kde_release", "fdp.flows.scheduled")


def _fresh(code: str) -> dict[str, object]:
    """Run ``code`` in a new interpreter; it sets ``out`` (a JSON-able dict), which is returned."""
    script = "import json, sys\n" + textwrap.dedent(code) + "\nprint('\\n' + json.dumps(out))\n"
    r = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300, cwd=REPO)
    assert r.returncode == 0, r.stderr[-3000:]
    result: dict[str, object] = json.loads(r.stdout.strip().splitlines()[-1])
    return result


def _loaded(prefixes: tuple[str, ...]) -> str:
    return f"sorted(m for m in sys.modules if m.split('.')[0] in {prefixes!r} or m in {prefixes!r})"


@pytest.mark.parametrize("argv", [
    ["schema", "release-config"],
    ["budget", "show", "--json"],
    ["budget", "set", "ds", "--epsilon", "2"],
    ["audit", "list"],
    ["audit", "verify"],
], ids=lambda a: " ".join(a[:2]))
def test_ledger_and_schema_commands_do_not_import_prefect(argv: list[str], tmp_path: Path) -> None:
    ledger = [] if argv[0] == "schema" else ["--ledger", f"sqlite:///{tmp_path / 'l.sqlite'}"]
    if argv[0] != "schema":  # read-only commands refuse a missing ledger: make it first, in another process
        from fdpcore.ledger import Ledger

        Ledger(ledger[1])
    out = _fresh(f"""
        import contextlib, io
        from fdp.flows.cli import main
        with contextlib.redirect_stdout(io.StringIO()):
            rc = main({argv + ledger!r})
        out = {{"rc": rc, "heavy": {_loaded(HEAVY)}}}
    """)
    assert out == {"rc": 0, "heavy": []}


def test_loading_a_config_imports_no_flow_and_the_registry_imports_only_the_one_run() -> None:
    out = _fresh(f"""
        from fdp.flows.config import load_config
        from fdp.flows.registry import SUMMARIES
        config = load_config({str(EXAMPLE)!r})
        before = {_loaded(HEAVY)}
        flow = SUMMARIES[config.summary].flow
        after = {_loaded(("fdp.flows.mean_release", "fdp.flows.fpca_release", "fdp.flows.kde_release",
                          "fdp.flows.covariance_release", "fdp.flows.erm_release", "fdp.flows.fosr_release",
                          "matplotlib"))}
        out = {{"before": before, "after": after, "flow": flow.name}}
    """)
    assert out == {"before": [], "after": ["fdp.flows.mean_release"], "flow": "mean-release"}


def test_every_registered_flow_resolves_to_its_prefect_flow() -> None:
    from fdp.flows.registry import SUMMARIES
    from prefect import Flow

    names = {key: summary.flow.name for key, summary in SUMMARIES.items()}
    assert all(isinstance(s.flow, Flow) for s in SUMMARIES.values())
    assert names == {"mean": "mean-release", "fpca": "fpca-release", "covariance": "covariance-release",
                     "fosr": "fosr-release", "kde": "kde-release", "erm": "erm-release"}


@pytest.mark.parametrize("submodule_first", [False, True])
def test_fdp_flows_mean_release_is_the_flow_whichever_import_comes_first(submodule_first: bool) -> None:
    out = _fresh(f"""
        import fdp.flows
        lazy = "prefect" not in sys.modules
        if {submodule_first!r}:
            import fdp.flows.mean_release  # binds the submodule's name on the package
        from fdp.flows import mean_release
        from prefect import Flow
        out = {{"lazy": lazy, "flow": isinstance(mean_release, Flow) and mean_release.name,
                "same": fdp.flows.mean_release is mean_release}}
    """)
    assert out == {"lazy": True, "flow": "mean-release", "same": True}


def test_task_names_resolve_on_access_and_plots_import_matplotlib_on_first_plot() -> None:
    out = _fresh(f"""
        import fdp.tasks.ledger
        import fdp.tasks._plots as plots
        first = {_loaded(("matplotlib", "fdp.tasks.mean"))}
        from fdp.tasks import clip_curves
        import numpy as np
        png = plots.curves_png(np.arange(3.0), {{"mean": np.ones(3)}}, xlabel="t", ylabel="y", title="t")
        try:
            fdp.tasks.not_a_task
            missing = None
        except AttributeError as exc:
            missing = str(exc)
        out = {{"first": first, "clip": clip_curves.name, "png": png[:4].hex(), "missing": missing,
                "mean_loaded": "fdp.tasks.mean" in sys.modules, "mpl": "matplotlib.pyplot" in sys.modules}}
    """)
    assert out == {"first": [], "clip": "clip-curves", "png": "89504e47", "mean_loaded": True, "mpl": True,
                   "missing": "module 'fdp.tasks' has no attribute 'not_a_task'"}


# --- the temporary Prefect server of a cold `fdp release` (fdp.flows.temporary_server) ---------------------------


def _cold_env(tmp_path: Path, **extra: str) -> dict[str, str]:
    """No Prefect API configured (a fresh Prefect home), so `fdp release` needs a temporary server."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_") and k != "FDP_LEDGER_URL"}
    return {**env, "PREFECT_HOME": str(tmp_path / "prefect-home"), "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
            "FDP_STATE_DIR": str(tmp_path / "state"), **extra}


def _cli_release(tmp_path: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "fdp.flows.cli", "release", str(EXAMPLE), "--out", str(tmp_path / "out"),
         "--ledger", f"sqlite:///{tmp_path / 'ledger.sqlite'}", "--release-id", "cold-1"],
        env=env, capture_output=True, text=True, timeout=600, check=False, cwd=tmp_path,
    )


def test_no_temporary_server_when_an_api_is_configured() -> None:
    from prefect.settings import PREFECT_API_URL

    assert PREFECT_API_URL.value()  # the session's test server
    assert start_temporary_server() is None


def test_temporary_server_settings_are_defaults_the_user_can_override() -> None:
    from prefect.settings import (
        PREFECT_API_URL,
        PREFECT_FLOWS_HEARTBEAT_FREQUENCY,
        PREFECT_UI_URL,
        get_current_settings,
        temporary_settings,
    )

    server = TemporaryServer.__new__(TemporaryServer)  # settings only: nothing launched
    server.port, server.process = 8123, None
    assert get_current_settings().flows.heartbeat_frequency == 180  # Prefect's default, not set by anyone
    assert PREFECT_UI_URL.value() == PREFECT_API_URL.value().removesuffix("/api")  # derived from the API URL
    with server.settings():
        s = get_current_settings()
        assert (s.api.url, s.flows.heartbeat_frequency, s.ui_url) == ("http://127.0.0.1:8123/api", None, "")
    with temporary_settings(updates={PREFECT_FLOWS_HEARTBEAT_FREQUENCY: 60, PREFECT_UI_URL: "http://ui.example"}):
        with server.settings():
            s = get_current_settings()
            assert (s.api.url, s.flows.heartbeat_frequency, s.ui_url) == ("http://127.0.0.1:8123/api", 60,
                                                                           "http://ui.example")
    assert PREFECT_API_URL.value() != server.api_url  # restored on exit


@pytest.mark.parametrize(("command", "message"), [
    ("raise SystemExit(7)", "exited with code 7 before it answered"),
    ("import time; time.sleep(60)", "did not answer within 0.5 s"),
])
def test_waiting_for_the_temporary_server_fails_when_it_exits_or_never_answers(command: str, message: str) -> None:
    server = TemporaryServer.__new__(TemporaryServer)
    server.port = _free_port()
    server.process = subprocess.Popen([sys.executable, "-c", command])
    try:
        with pytest.raises(RuntimeError, match=message):
            server.wait_until_healthy(0.5)
    finally:
        server.stop()
    assert server.process is None


def test_cold_release_exits_1_before_the_ledger_when_the_temporary_server_is_late(tmp_path: Path) -> None:
    proc = _cli_release(tmp_path, _cold_env(tmp_path, PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS="1"))
    assert proc.returncode == 1, proc.stderr[-3000:]
    assert "temporary Prefect server did not answer within 1 s" in proc.stderr
    assert "Nothing was charged" in proc.stderr and "Traceback" not in proc.stderr
    assert not (tmp_path / "ledger.sqlite").exists()  # the ledger was never opened


@pytest.mark.slow
def test_cold_release_starts_a_temporary_server_and_stops_it_at_exit(tmp_path: Path) -> None:
    """A brand-new Prefect home (the server migrates its database): ~20 s on an idle 2-core machine."""
    proc = _cli_release(tmp_path, _cold_env(tmp_path))
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "release cold-1: mean of adelaide-electricity-monday (n = 508)" in proc.stdout
    started = [line for line in proc.stderr.splitlines() if "Starting temporary server on http://127.0.0.1:" in line]
    assert len(started) == 1 and "Stopping temporary server" in proc.stderr
    assert "View at" not in proc.stderr  # the temporary server has no UI
    assert "Finished in state Completed()" in proc.stderr
    port = int(started[0].rsplit(":", 1)[1])
    with socket.socket() as s:
        assert s.connect_ex(("127.0.0.1", port)) != 0  # stopped with the CLI
    manifest = json.loads((tmp_path / "out" / "manifest.json").read_text())
    assert manifest["release_id"] == "cold-1" and manifest["n"] == 508


# --- fail fast: pre-flight checks before Prefect's temporary server and before any data (issue 15) ---------------


def test_a_budget_refusal_exits_3_before_the_temporary_server_and_prints_only_the_message(tmp_path: Path) -> None:
    from fdpcore.ledger import Ledger

    url = f"sqlite:///{tmp_path / 'ledger.sqlite'}"
    Ledger(url).set_budget("adelaide-electricity-monday", 12.0, period="month", epsilon_per_period=0.5,
                           delta_per_period=0.0)
    events = len(Ledger(url).audit_events())
    proc = _cli_release(tmp_path, _cold_env(tmp_path))
    assert proc.returncode == 3, proc.stderr[-3000:]
    error, next_step = proc.stderr.splitlines()  # the message and how to go on; nothing else (no traceback, no log)
    assert error == "fdp: error: allowance of period " + proc.stderr.split("allowance of period ")[1].splitlines()[0]
    assert next_step.startswith("  To go on: a privacy officer may add to this period's allowance with `fdp budget grant")
    assert "Requested: epsilon=1, delta=0. Remaining: epsilon=0.5, delta=0." in proc.stderr
    assert not (tmp_path / "prefect-home").exists()  # Prefect never started (no server, no database)
    assert len(Ledger(url).audit_events()) == events and Ledger(url).releases() == []


def test_a_missing_data_file_exits_2_before_the_temporary_server(tmp_path: Path) -> None:
    import yaml

    cfg = yaml.safe_load(EXAMPLE.read_text())
    cfg["dataset"]["path"] = "nowhere.parquet"
    (tmp_path / "c.yaml").write_text(yaml.safe_dump(cfg))
    proc = subprocess.run(
        [sys.executable, "-m", "fdp.flows.cli", "release", str(tmp_path / "c.yaml"), "--out", str(tmp_path / "out"),
         "--ledger", f"sqlite:///{tmp_path / 'ledger.sqlite'}"],
        env=_cold_env(tmp_path), capture_output=True, text=True, timeout=600, check=False, cwd=tmp_path)
    assert proc.returncode == 2
    assert proc.stderr.startswith("fdp: error: dataset.path: file ") and "nowhere.parquet' does not exist" in proc.stderr
    assert len(proc.stderr.splitlines()) == 1 and not (tmp_path / "prefect-home").exists()


# --- signals before a command runs (fdp.flows.console, the console script) -----------------------------------------

#: what pip's console script for ``fdp`` runs (pyproject.toml [project.scripts])
CONSOLE_SCRIPT = "import sys\nfrom fdp.flows.console import main\nsys.exit(main())"


def test_the_console_script_is_fdp_flows_console_and_imports_only_the_standard_library() -> None:
    import tomllib

    scripts = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["scripts"]
    assert scripts == {"fdp": "fdp.flows.console:main"}
    out = _fresh("""
        before = set(sys.modules)
        import fdp.flows.console
        out = {"new": sorted(m for m in set(sys.modules) - before if m.split('.')[0] in
                ("fdp", "fdpcore", "numpy", "pyarrow", "sqlalchemy", "pydantic", "prefect"))}
    """)
    assert out == {"new": ["fdp", "fdp.flows", "fdp.flows.console", "fdp.flows.interrupts"]}


def _catches(pid: int, signum: int) -> bool:
    """The process has a handler for ``signum`` (bit signum - 1 of SigCgt in /proc/PID/status)."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return False
    caught = int(next(line for line in status.splitlines() if line.startswith("SigCgt:")).split()[1], 16)
    return bool(caught >> (signum - 1) & 1)


def _start_release(tmp_path: Path, sigint: object) -> subprocess.Popen[str]:
    """`fdp release` through the console script, SIGINT set to ``sigint`` at exec (as a terminal or a script's `&`)."""
    import signal

    proc = subprocess.Popen(
        [sys.executable, "-c", CONSOLE_SCRIPT, "release", str(EXAMPLE), "--ledger", f"sqlite:///{tmp_path / 'l.sqlite'}",
         "--release-id", "early", "--out", str(tmp_path / "out")],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tmp_path,
        preexec_fn=lambda: signal.signal(signal.SIGINT, sigint))  # type: ignore[arg-type]
    import time

    deadline = time.monotonic() + 60
    while not _catches(proc.pid, signal.SIGTERM):  # fdp.flows.console.main has started: its first line ran
        assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
        time.sleep(0.001)
    return proc


@pytest.mark.parametrize(("name", "code"), [("SIGINT", 130), ("SIGTERM", 143)])
def test_a_signal_while_fdp_is_still_importing_ends_it_with_one_line_and_the_signals_exit_code(
        tmp_path: Path, name: str, code: int) -> None:
    """Finding 7 (trial G): no KeyboardInterrupt traceback (SIGINT), no silent exit (SIGTERM) in the first seconds."""
    import signal

    proc = _start_release(tmp_path, signal.SIG_DFL)
    proc.send_signal(getattr(signal, name))  # at once: the imports of fdp.flows.cli take over a second
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == code, err[-3000:]
    shown = "SIGINT (Ctrl-C)" if name == "SIGINT" else "SIGTERM"
    assert err == f"fdp: error: stopped by {shown} before anything was read or charged\n" and out == ""
    assert not (tmp_path / "l.sqlite").exists() and not (tmp_path / "out").exists()


def test_a_background_release_started_with_sigint_ignored_keeps_ignoring_it(tmp_path: Path) -> None:
    """POSIX: a script's `fdp release ... &` starts with SIGINT ignored; fdp keeps it so (docs/cli.md: use SIGTERM)."""
    import signal
    import time

    proc = _start_release(tmp_path, signal.SIG_IGN)
    proc.send_signal(signal.SIGINT)
    time.sleep(1.0)
    assert proc.poll() is None, proc.communicate()
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 143, err[-3000:]
    assert "stopped by SIGTERM" in err and "Traceback" not in err and "SIGINT" not in err


def test_a_release_keeps_a_signal_ignored_at_start_ignored_and_handles_the_other() -> None:
    """fdp.flows.interrupts.interrupts, the handler of a running release, leaves SIGINT ignored as the process got it."""
    import signal

    from fdp.flows.interrupts import interrupts

    old = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        with interrupts(lambda signum: ""):
            inside = (signal.getsignal(signal.SIGINT), getattr(signal.getsignal(signal.SIGTERM), "__name__", None))
        assert inside == (signal.SIG_IGN, "_raise")
        assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN
    finally:
        signal.signal(signal.SIGINT, old)


def test_a_signal_after_the_release_published_is_noted_and_the_process_exits_0(tmp_path: Path) -> None:
    """Trial J (L1): a SIGTERM while a published release shuts down (its temporary Prefect server stopping) neither
    kills it silently with 143 nor prints an atexit traceback: one note, exit 0, the ledger says published."""
    import signal

    from fdpcore.ledger import Ledger

    proc = _start_release(tmp_path, signal.SIG_DFL)
    assert proc.stdout is not None
    lines = []
    for line in proc.stdout:  # the summary's last line: the release is published and said so
        lines.append(line)
        if line.startswith("  budget:"):
            break
    assert proc.poll() is None, "".join(lines)  # the temporary server's shutdown is still to come
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err[-3000:]
    assert err.count("fdp: note: SIGTERM after release early was published: the release is complete") == 1, err[-3000:]
    assert "Traceback" not in err and "Exception ignored" not in err
    assert Ledger(f"sqlite:///{tmp_path / 'l.sqlite'}").get("early").state == "published"


_LATE_SIGNAL = """
import atexit, os, signal, sys, time
from fdp.flows.interrupts import finish_quietly
finish_quietly(lambda s: "fdp: note: after publication")
class Late:  # its __del__ runs in the interpreter's final teardown, after the atexit callbacks
    def __del__(self):
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(0.5)
sys.modules["__late__"] = Late()
atexit.register(lambda: (os.kill(os.getpid(), signal.SIGTERM), time.sleep(0.5)))  # one during the shutdown work
if sys.argv[1] == "end":
    from fdp.flows.console import end
    end(0)
sys.exit(0)
"""


@pytest.mark.parametrize(("how", "code"), [("exit", 143), ("end", 0)])
def test_the_console_script_ends_without_the_teardown_where_a_signal_killed_a_published_release(
        how: str, code: int) -> None:
    """Trial L (M1): a SIGTERM 0.2 s after the temporary server stopped ended a published release with 143 and no
    note: the interpreter's teardown, after the atexit callbacks, restores the default handlers. A normal exit
    (``exit``) shows it; ``fdp.flows.console.end`` runs the shutdown work with the handler in place and skips the
    teardown: one note, exit 0."""
    proc = subprocess.run([sys.executable, "-c", _LATE_SIGNAL, how], capture_output=True, text=True, timeout=60)
    assert proc.returncode in (code, -15 if code == 143 else code), proc.stderr[-2000:]
    assert proc.stderr.count("fdp: note: after publication") == 1 and "Traceback" not in proc.stderr


def test_a_signal_after_completion_inside_the_release_block_is_noted_not_raised(
        capsys: pytest.CaptureFixture[str]) -> None:
    """CI race (session 26): a SIGTERM right after the summary, while the release block (interrupts) still held the
    signals, ended a published release with 143. finish_quietly now makes every handler of the module note it, also
    the one the block restores on the way out; the next release block raises again."""
    import os
    import signal
    import time

    from fdp.flows.interrupts import Interrupted, finish_quietly, interrupts, stop_on_signals

    old = signal.getsignal(signal.SIGTERM)
    try:
        stop_on_signals()  # as the console script does first
        with interrupts(lambda signum: ""):
            finish_quietly(lambda signum: f"noted {signum}")
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(0.1)  # the handler runs here: no Interrupted
        os.kill(os.getpid(), signal.SIGTERM)  # after the block restored its predecessor's handler: still noted
        time.sleep(0.1)
        assert capsys.readouterr().err == f"noted {int(signal.SIGTERM)}\n"  # once
        with pytest.raises(Interrupted), interrupts(lambda signum: ""):
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(1.0)
    finally:
        signal.signal(signal.SIGTERM, old)
