"""The ``fdp`` command line.

Exit codes (DESIGN.md): 0 success; 2 invalid config or input (the message names the
field, file or row); 3 the budget would be exceeded (nothing is spent); 1 anything else.
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import hashlib
import importlib.util
import json
import os
import re
import sqlite3
import sys
import tempfile
import threading
import time
import uuid
from datetime import UTC, datetime
from importlib import resources
from pathlib import Path
from typing import Any

import sqlalchemy

# Prefect and the flows are imported where a command needs them (``release``, ``demo``, ``serve``), so
# ``fdp schema``, ``fdp budget`` and ``fdp audit`` start without Prefect (benchmarks/README.md, CLI).
from fdp.flows.config import (
    DEFAULT_CRON,
    check_cron,
    config_sha256,
    format_validation_error,
    load_config,
    precheck_budget,
    series_name,
)
from fdp.flows.interrupts import exit_code, finish_quietly, interrupts, signal_name
from fdp.flows.registry import SUMMARIES
from fdp.flows.temporary_server import TemporaryServer, start_temporary_server
from fdp.schemas import BudgetSpec, LedgerEntry, PrivacyBudget, ReleaseManifest
from fdp.schemas.union import release_config_json_schema
from pydantic import ValidationError

from fdpcore.errors import (
    BudgetExceededError,
    ConcurrentRunError,
    ConfigError,
    DataError,
    FdpError,
    LedgerError,
    NotResumableError,
    OutOfMemoryError,
    ReleaseConflictError,
)
from fdpcore.io.files import PUBLISH_SUFFIX_BYTES, inside, replaceable, write_json_atomic
from fdpcore.io.provenance import operator_host
from fdpcore.ledger import (
    CHECKPOINT_FORMAT,
    DatasetBudget,
    Evidence,
    Ledger,
    LedgerURLError,
    OldLedgerError,
    backup_sqlite_ledger,
    check_ledger_directory,
    check_period,
    checkpoint_evidence,
    current_period,
    database_has_ledger,
    default_ledger_url,
    is_state_dir,
    load_private_key,
    manifest_evidence,
    owner_may_be_running,
    public_key_hex,
    release_owner,
    sign_statement,
    sqlite_ledger_file,
    wait_seconds,
    write_private_key,
)
from fdpcore.limits import ID_MAX_LENGTH, check_id, shown

EXIT_OK, EXIT_ERROR, EXIT_INPUT, EXIT_BUDGET = 0, 1, 2, 3
#: The manifest file of a release directory (fdp.tasks._publish.MANIFEST_FILE; that module loads Prefect).
MANIFEST_NAME = "manifest.json"
#: 128 + SIGPIPE, as a shell reports a command whose output pipe closed (`fdp audit export | head -1`)
EXIT_BROKEN_PIPE = 141
SCHEMAS: dict[str, Any] = {  # name -> a function returning the JSON Schema
    "release-config": release_config_json_schema, "manifest": ReleaseManifest.model_json_schema,
    "budget": PrivacyBudget.model_json_schema, "ledger-entry": LedgerEntry.model_json_schema,
    "lineage-facet": lambda: _lineage_facet_schema(),
}


def _lineage_facet_schema() -> Any:
    """The shipped JSON Schema of the OpenLineage ``fdp_privacy`` run facet (imported on use: openlineage is heavy)."""
    from fdpcore.io.lineage import FACET_SCHEMA_FILE

    return json.loads(FACET_SCHEMA_FILE.read_text())


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="fdp", description="Differentially private releases of functional summaries.")
    sub = p.add_subparsers(dest="command", required=True)

    r = sub.add_parser("release", help="run a release defined by a YAML config")
    r.add_argument("config", help="path of the release config (YAML)")
    r.add_argument("--out", default=None, help="output directory (default: ./releases/<release-id>)")
    r.add_argument("--ledger", default=None, help="ledger database URL (default: $FDP_LEDGER_URL or the state dir)")
    r.add_argument("--release-id", default=None, help="unique release id; re-running a published id charges nothing")
    r.add_argument("--period", default=None,
                   help="budget period YYYY-MM charged (default: the current month; never a later one)")

    d = sub.add_parser("demo", help="release the mean Adelaide Monday electricity-demand curve (shipped data, the default tuning and tau: auto)")
    d.add_argument("--out", default="fdp-demo", help="output directory (default: ./fdp-demo)")
    d.add_argument("--ledger", default=None, help="ledger database URL")

    sv = sub.add_parser("serve", help="serve each config as a scheduled Prefect deployment (runs until stopped)")
    sv.add_argument("configs", nargs="+",
                    help="release configs (YAML); one deployment each, scheduled-release/<series> (release.name, "
                         "default <dataset id>-<summary>)")
    sv.add_argument("--cron", default=DEFAULT_CRON, help=f"cron schedule, UTC (default {DEFAULT_CRON!r}: monthly)")
    sv.add_argument("--ledger", default=None, help="ledger database URL")
    sv.add_argument("--out-root", default="releases", help="files go to OUT_ROOT/<series>/<YYYY-MM>/")
    sv.add_argument("--notify", default=None,
                    help="webhook URL told when a scheduled run fails or crashes (default: $FDP_NOTIFY_URL)")

    b = sub.add_parser("budget", help="privacy budgets in the ledger")
    bsub = b.add_subparsers(dest="budget_command", required=True)
    bset = bsub.add_parser("set", help="set a dataset's total budget (the privacy officer's act)")
    bset.add_argument("dataset", help="dataset id")
    bset.add_argument("--epsilon", type=float, required=True, help="total epsilon")
    bset.add_argument("--delta", type=float, default=0.0, help="total delta (default 0)")
    bset.add_argument("--accounting", choices=["basic", "zcdp"], default="basic",
                      help="basic: epsilon and delta add; zcdp: rho adds, converted at --delta by OpenDP")
    bset.add_argument("--period", choices=["month"], default=None, help="add an allowance per calendar month (UTC)")
    bset.add_argument("--per-period", type=float, default=None, dest="per_period", help="epsilon allowance per period")
    bset.add_argument("--per-period-delta", type=float, default=None, dest="per_period_delta",
                      help="delta allowance per period (default 0)")
    bset.add_argument("--sign-key", default=None, dest="sign_key",
                      help="the privacy officer's Ed25519 key (PEM) signing this change (default: $FDP_OFFICER_KEY); "
                      "required once `fdp audit require-signed-budget` was run")
    bset.add_argument("--max-late-periods", type=int, default=None, dest="max_late_periods",
                      help="how many periods before the current one a late run may be charged to (default 1; never "
                           "before the month this policy is set)")
    bset.add_argument("--ledger", default=None, help="ledger database URL")
    bg = bsub.add_parser("grant", help="add to ONE month's allowance (the privacy officer's act; audited)")
    bg.add_argument("dataset", help="dataset id")
    bg.add_argument("--period", required=True, help="the calendar month YYYY-MM (UTC) the grant applies to")
    bg.add_argument("--epsilon", type=float, required=True, help="epsilon added to that month's allowance")
    bg.add_argument("--delta", type=float, default=0.0, help="delta added to that month's allowance (default 0)")
    bg.add_argument("--sign-key", default=None, dest="sign_key",
                    help="the privacy officer's Ed25519 key (PEM) signing this grant (default: $FDP_OFFICER_KEY)")
    bg.add_argument("--ledger", default=None, help="ledger database URL")
    bc = bsub.add_parser("cancel", help="give back the reservation of a release that stopped before drawing noise")
    bc.add_argument("release_id")
    bc.add_argument("--ledger", default=None, help="ledger database URL")
    bs = bsub.add_parser("show", help="total, spent and remaining budget per dataset")
    bs.add_argument("--dataset", default=None, help="only this dataset")
    bs.add_argument("--json", action="store_true", help="machine-readable JSON")
    bs.add_argument("--ledger", default=None, help="ledger database URL")

    cal = sub.add_parser("calendar", help="release calendar: series x month, state, epsilon/delta, release id, flow run")
    cal.add_argument("--dataset", default=None, help="only this dataset")
    cal.add_argument("--json", action="store_true", help="machine-readable JSON")
    cal.add_argument("--ledger", default=None, help="ledger database URL")

    a = sub.add_parser("audit", help="the hash-chained audit trail of the ledger")
    asub = a.add_subparsers(dest="audit_command", required=True)
    al = asub.add_parser("list", help="one line per release")
    al.add_argument("--json", action="store_true", help="machine-readable JSON")
    ash = asub.add_parser("show", help="a release's ledger entry and its audit events")
    ash.add_argument("release_id")
    ae = asub.add_parser("export", help="export the audit trail")
    ae.add_argument("--format", choices=["json", "csv"], default="json")
    av = asub.add_parser("verify", help="recompute the hash chain; exit 1 naming the first bad entry")
    for parser in (al, ash, ae, av, *_add_audit_evidence_parsers(asub, av)):
        parser.add_argument("--ledger", default=None, help="ledger database URL")

    _add_plan_parser(sub)
    _add_init_parser(sub)

    s = sub.add_parser("schema", help="print the JSON Schema of a config, a record or the lineage facet")
    s.add_argument("name", choices=sorted(SCHEMAS), help="which schema")
    return p


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``fdp``; returns the exit code."""
    try:
        return _main(_parser().parse_args(argv))
    except BrokenPipeError:  # `fdp audit export | head -1`: the reader has gone; end quietly
        with contextlib.suppress(OSError):
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())  # so the interpreter's final flush does not fail again
        return EXIT_BROKEN_PIPE
    except KeyboardInterrupt as exc:  # Ctrl-C / SIGTERM outside a release (a release explains its ledger state itself)
        code = exit_code(exc) or EXIT_ERROR
        _err(f"stopped by {signal_name(code - 128)}" if code > 128 else "interrupted")
        return code


def _main(args: argparse.Namespace) -> int:
    try:
        if args.command == "release":
            return _release(Path(args.config), args.out, args.ledger, args.release_id, args.period)
        if args.command == "demo":
            return _demo(args.out, args.ledger)
        if args.command == "serve":
            return _serve(args.configs, args.cron, args.ledger, args.out_root, args.notify)
        if args.command == "budget" and args.budget_command == "set":
            return _budget_set(args)
        if args.command == "budget" and args.budget_command == "grant":
            return _budget_grant(args)
        if args.command == "budget" and args.budget_command == "cancel":
            return _budget_cancel(args.release_id, args.ledger)
        if args.command == "budget":
            return _budget_show(args.dataset, args.json, args.ledger)
        if args.command == "calendar":
            return _calendar(args.dataset, args.json, args.ledger)
        if args.command == "audit":
            return _audit(args)
        if args.command == "plan":
            return _plan(args)
        if args.command == "init":
            return _init(args)
        if args.command == "schema":
            print(json.dumps(SCHEMAS[args.name](), indent=2))
            return EXIT_OK
    except BrokenPipeError:
        raise
    except ReleaseFailure as exc:
        _err(str(exc))
        return exc.exit_code
    except ValidationError as exc:
        _err(f"invalid arguments\n{format_validation_error(exc)}")
        return EXIT_INPUT
    except BudgetExceededError as exc:
        _err(f"{exc}\n  {_budget_next_step(exc)}")
        return EXIT_BUDGET
    except LedgerURLError as exc:  # a mistyped ledger path: invalid input, nothing created
        _err(str(exc))
        return EXIT_INPUT
    except LedgerError as exc:
        _err(str(exc))
        return EXIT_ERROR
    except FdpError as exc:
        _err(getattr(exc, "curator_message", None) or str(exc))  # a data task's row numbers: on this terminal only
        return EXIT_INPUT
    except MemoryError as exc:
        _err(_unexpected(exc))
        return EXIT_ERROR
    except Exception as exc:  # noqa: BLE001 - the documented catch-all exit code
        _err(_unexpected(exc))
        return EXIT_ERROR
    return EXIT_ERROR  # pragma: no cover - argparse requires a command


def _add_plan_parser(sub: Any) -> None:
    pl = sub.add_parser("plan", help="expected accuracy per epsilon from public inputs and n; charges nothing")
    pl.add_argument("config", help="path of the release config (YAML)")
    pl.add_argument("--epsilon", type=float, action="append", default=None, metavar="E",
                    help="epsilon to plan for (repeatable; default: the config's, x 1/4, 1/2, 2, 4)")
    pl.add_argument("--json", action="store_true", help="machine-readable JSON")
    pl.add_argument("--ledger", default=None, help="ledger database URL, opened read-only for the remaining budget")
    pl.add_argument("--out", default=None, metavar="PNG", help="also write a PNG of the expected error against epsilon")


def _add_init_parser(sub: Any) -> None:
    i = sub.add_parser("init", help="write a commented release config for a data file (no data value is used)")
    i.add_argument("data", help="Parquet or CSV file in long format (one row per unit and time; kde/erm: per point)")
    i.add_argument("--unit", required=True, help="column of the privacy unit")
    i.add_argument("--time", required=True, action="append",
                   help="column of the observation times (kde, erm: of a point's coordinate; give --time twice, each "
                        "with its --time-domain, for points in 2-D)")
    i.add_argument("--value", default=None, help="column of the observed values (erm: of the label; kde: none)")
    i.add_argument("--summary", default="mean", help="mean (default), covariance, fpca, fosr, kde or erm")
    i.add_argument("--loss", default="logistic", choices=["logistic", "hinge", "ridge"], help="erm: the loss")
    i.add_argument("--label-bound", type=float, default=None, help="erm ridge: PUBLIC bound on |response - "
                   "--value-offset| (--value-offset is then the responses' public centre, label_offset)")
    i.add_argument("--time-domain", type=float, nargs=2, required=True, action="append", metavar=("A", "B"),
                   help="PUBLIC time range the grid covers, source units, mapped onto [0, 1]. Readings every h at "
                        "t1..tN: give t1-h/2 tN+h/2 with --grid-size N, so each midpoint grid point is one reading time "
                        "(e.g. hours 0..23: --time-domain -0.5 23.5 --grid-size 24; half-hours 1..48: 0.5 48.5 "
                        "--grid-size 48). A unit's curve is aligned when its readings reach within one grid step "
                        "(dataset.max_end_gap, see --max-end-gap) of the first and last grid point; `fdp plan` states "
                        "the times")
    i.add_argument("--max-end-gap", type=float, default=None, metavar="G", dest="max_end_gap",
                   help="curves: PUBLIC dataset.max_end_gap, source time units, chosen from the study design: a curve "
                        "whose first (last) reading lies within G of the first (last) grid point is held at that "
                        "reading; a unit missing an end by more is released as the zero record (value_offset). "
                        "Default one grid step; for drop-outs, the longest early stop the release should carry "
                        "(docs/configuration.md)")
    i.add_argument("--value-offset", type=float, default=0.0,
                   help="PUBLIC typical level of the values, e.g. a published average or the middle of the plausible "
                        "range, source units (default 0); erm ridge: the responses' centre (label_offset)")
    i.add_argument("--value-scale", type=float, default=1.0,
                   help="PUBLIC bound on how far a value can plausibly lie from --value-offset, source units, so "
                        "(value - offset)/scale lies in [-1, 1] (default 1; docs/configuration.md)")
    i.add_argument("--tau", type=float, default=None,
                   help="PUBLIC clipping radius of a rescaled record (default: 'auto', bought with budget)")
    i.add_argument("--epsilon", type=float, default=1.0, help="epsilon of the release (default 1)")
    i.add_argument("--budget", type=float, default=None, help="proposed total epsilon of the dataset (default 10 x epsilon)")
    i.add_argument("--grid-size", type=int, default=50,
                   help="PUBLIC number of grid points (default 50; regular readings: their number, see --time-domain)")
    i.add_argument("--dataset-id", default=None, help="ledger name of the dataset (default: from the file name)")
    i.add_argument("--privacy-unit", default=None, help="what one record protects, in words (published)")
    i.add_argument("--covariate", action="append", default=None, help="fosr: a scalar covariate column (repeatable)")
    i.add_argument("--levels", action="append", default=None, metavar="COL=L1,L2,...",
                   help="fosr: PUBLIC categories of a text covariate COL, listed a priori (never read from the data), "
                        "the first one the reference level; written as encoding: one_hot (repeatable, e.g. "
                        "--levels season=winter,spring,summer,autumn). A non-numeric covariate needs it")
    i.add_argument("--covariate-bound", type=float, default=None,
                   help="fosr: PUBLIC Euclidean bound of a unit's encoded covariate vector; needed with a numeric "
                        "covariate (default when every covariate has --levels: sqrt(number of covariates), since each "
                        "one-hot block has norm <= 1)")
    i.add_argument("--n-components", type=int, default=None, metavar="K",
                   help="fpca: PUBLIC number of principal components released (default 1; K < --n-basis)")
    i.add_argument("--n-basis", type=int, default=None, metavar="M",
                   help="fpca: PUBLIC number of basis functions the components are drawn in (default 5)")
    i.add_argument("--csv-delimiter", default=",", metavar="CHAR", dest="csv_delimiter",
                   help="the CSV file's column delimiter, one character (default ','; \\t or tab for a tab), written "
                        "into dataset.csv_delimiter")
    i.add_argument("--out", default=None, metavar="CONFIG", help="write the config here (default: print it)")
    i.add_argument("--force", action="store_true", help="overwrite --out if it exists")


def _init(args: argparse.Namespace) -> int:
    """``fdp init``: a commented config; only column names/types and the unit count are read (fdp.flows.init_command)."""
    from fdp.flows.init_command import init_config, parse_levels

    out = Path(args.out) if args.out else None
    if out is not None and out.exists() and not args.force:
        _err(f"--out: {str(out)!r} exists; choose another path or add --force")
        return EXIT_INPUT
    text, facts = init_config(
        args.data, unit=args.unit, time=args.time, value=args.value, summary=args.summary,
        time_domain=[tuple(d) for d in args.time_domain], value_offset=args.value_offset, value_scale=args.value_scale,
        tau=args.tau, epsilon=args.epsilon, budget=args.budget, grid_size=args.grid_size, dataset_id=args.dataset_id,
        privacy_unit=args.privacy_unit, covariates=args.covariate, covariate_bound=args.covariate_bound,
        config_dir=out.parent if out is not None else Path.cwd(), loss=args.loss, label_bound=args.label_bound,
        levels=parse_levels(args.levels), n_components=args.n_components, n_basis=args.n_basis,
        max_end_gap=args.max_end_gap, csv_delimiter=args.csv_delimiter,
    )
    import yaml
    from fdp.flows.plan_command import data_warnings
    from fdp.tasks.preflight import read_inputs

    # the data read as `fdp plan` and `fdp release` will read it: what they would refuse (a text label, a column of
    # text, no unit alignable on --time-domain) is refused here, before a config is written; the same read counts
    # the zero records and the records outside the public value range for plan's warnings (data: on stderr only,
    # never written into the config)
    config = SUMMARIES[args.summary].config_model.model_validate(yaml.safe_load(text))
    inputs = read_inputs(config, str(out.parent if out is not None else Path.cwd()))
    for warning in data_warnings(config, inputs):
        print(f"fdp: warning: {warning}", file=sys.stderr)
    if out is None:
        print(text, end="")
        return EXIT_OK
    out.write_text(text, encoding="utf-8")
    print(f"wrote {out}: {args.summary} release of {facts['dataset_id']} ({facts['n']} privacy units, {facts['format']}); "
          f"every PUBLIC field is a choice to check. Next: fdp plan {out}")
    return EXIT_OK


def _plan(args: argparse.Namespace) -> int:
    """``fdp plan``: no charge, no ledger write, no Prefect (fdp.flows.plan_command)."""
    from fdp.flows.plan_command import plan_report, print_plan

    for e in args.epsilon or []:
        if not (e > 0 and e < float("inf")):
            _err(f"--epsilon ({e}) must be a positive finite number")
            return EXIT_INPUT
    report = plan_report(args.config, args.epsilon, args.ledger)
    if args.out:
        from fdp.tasks._plots import error_vs_epsilon_png

        Path(args.out).write_bytes(error_vs_epsilon_png(report))
        report["written"] = [args.out]
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        print_plan(report)
        if args.out:
            print(f"  written: {args.out}")
    return EXIT_OK


def _release(config_path: Path, out: str | None, ledger_url: str | None, release_id: str | None,
             period: str | None = None) -> int:
    if release_id is not None:
        check_id("--release-id", release_id)
    try:
        config, url, rid, out_dir, n = _preflight(config_path, out, ledger_url, release_id, period)
    except BaseException as exc:
        code = exit_code(exc)
        if code is None:
            raise
        # the pre-flight reads the config and the data; the ledger is not written before the release below
        raise ReleaseFailure(f"stopped by {signal_name(code - 128)} before anything was charged. Run again", code) from None
    try:
        with interrupts(lambda signum: _next_step(url, rid)):
            return _run_release(config, config_path, out_dir, url, rid, period, n)
    except BaseException as exc:
        code = exit_code(exc)
        if code is None:
            raise
        raise ReleaseFailure(f"stopped by {signal_name(code - 128)}\n{_next_step(url, rid)}", code) from None


def _preflight(config_path: Path, out: str | None, ledger_url: str | None, release_id: str | None,
               period: str | None) -> tuple[Any, str, str, Path, int | None]:
    """The release's config, ledger URL, release id, output directory and ``n``, after the checks that charge nothing.

    ``n`` is the units read by the pre-flight (``None`` for a re-run of a published id, which reads no data, and for a
    streaming engine's curves).
    """
    config = load_config(config_path)
    if period is not None:
        check_period(period)
    url = ledger_url or default_ledger_url()
    stamp = f"-{datetime.now(UTC):%Y%m%dT%H%M%S}-{uuid.uuid4().hex[:8]}"
    rid = release_id or config.dataset.id[:ID_MAX_LENGTH - len(stamp)] + stamp
    out_dir = Path(out) if out else inside(Path("releases"), rid)
    # pre-flight, in seconds, before Prefect's temporary server boots and before any data is read
    _check_writable(out_dir)
    try:  # a budget that cannot pay refuses before the data are read (the atomic charge still decides)
        precheck_budget(url, config, rid, period)
    except NotResumableError as exc:  # noised: by a run that stopped, or by one publishing it right now
        other_run = _wait_for_other_run(exc, Ledger(url, read_only=True), rid, None)
        if other_run is None:
            raise
        if other_run != "published":
            raise _explain_failure(exc, Ledger(url, read_only=True), rid, None, other_run) from None
    n = None
    if not _is_published_rerun(url, rid, config):  # a re-run of a published id never needs (or reads) the data
        _check_dataset_path(config, config_path)
        from fdp.flows.plan_command import check_release_plan, data_warnings  # loaded on use: budget/audit stay light
        from fdp.tasks.preflight import read_inputs

        inputs = read_inputs(config, str(config_path.resolve().parent))  # row numbers: terminal only, not Prefect
        for warning in data_warnings(config, inputs):  # data, before any charge or noise: this terminal only
            print(f"fdp: warning: {warning}", file=sys.stderr)
        n = inputs.n
        check_release_plan(config, config_path, n)  # tau/value_offset: auto that n * epsilon cannot pay for: exit 2
    _note_new_ledger(url, config)
    return config, url, rid, out_dir, n


def _note_new_ledger(url: str, config: Any) -> None:
    """Say so when a release is about to create its ledger (a new SQLite file or an empty database: no policy, no charges).

    The directory must exist already (:class:`fdpcore.ledger.LedgerURLError`, exit 2, otherwise), but a mistyped
    file name in it would still start a new ledger silently; the budget then comes from the config's proposal.
    """
    path = sqlite_ledger_file(url)
    if path is None:
        if database_has_ledger(url) is False:  # PostgreSQL: a reachable database without an fdp ledger yet
            print(f"fdp: note: no ledger in the database {_safe_url(url)} yet: this release creates it, with the budget "
                  f"of {config.dataset.id!r} from the config's `budget:` proposal; if you meant an existing ledger, stop "
                  "and check --ledger / FDP_LEDGER_URL (the database name)", file=sys.stderr)
        return
    if path.exists():
        return
    if not path.parent.is_dir() and not is_state_dir(path.parent):
        return  # a mistyped directory: opening the ledger refuses it next (exit 2), creating nothing
    print(f"fdp: note: no ledger at {path} yet: this release creates it, with the budget of {config.dataset.id!r} "
          "from the config's `budget:` proposal; if you meant an existing ledger, stop and check --ledger / "
          "FDP_LEDGER_URL", file=sys.stderr)


def _run_release(config: Any, config_path: Path, out_dir: Path, url: str, rid: str, period: str | None,
                 n: int | None = None) -> int:
    _warn_before_release(config, config_path, url, rid, n)
    server = start_temporary_server()  # None when an API is configured; else it boots while the flow imports
    flow = SUMMARIES[config.summary].flow
    if server is None:
        _check_prefect_api()
    else:
        _wait_for(server)
    _quiet_expected_tracebacks()
    ledger = Ledger(url)
    before = ledger.get(rid)
    other_run = None
    from fdp.flows._steps import take_rewritten  # imports Prefect: not at module level (`fdp plan` never loads it)

    take_rewritten(rid)  # nothing left from an earlier run of the id in this process
    for attempt in range(2):
        try:
            with server.settings() if server is not None else contextlib.nullcontext():
                manifest = flow(
                    config=config, config_sha256=config_sha256(config), config_dir=str(config_path.resolve().parent),
                    out_dir=str(out_dir), ledger_url=url, release_id=rid, period=period,
                )
            break
        except Exception as exc:
            other_run = _wait_for_other_run(exc, ledger, rid, before)
            if other_run == "published" and attempt == 0:
                continue  # the other run published it: this run writes the files from the ledger, charging nothing
            raise _explain_failure(exc, ledger, rid, before, other_run, out_dir=out_dir) from exc
    # published and its files written: a signal from here on changes nothing recorded (noted once, exit 0)
    finish_quietly(lambda signum: f"fdp: note: {signal_name(signum)} after release {rid} was published: the "
                   "release is complete (the ledger holds it as published, charged once); finishing shutdown")
    waited = take_rewritten(rid)
    rewritten = waited is not None or other_run == "published"
    if waited or other_run == "published":
        print(f"note: another run of release {rid} published it at the same time; its files were written from the "
              "ledger and this run charged nothing")
    resumed = not rewritten and before is not None and before.state == "reserved"
    if resumed:  # trial U, L4: its `charged:` line read as a second charge
        print(f"note: release {rid} had been charged by an earlier run that did not finish; this run resumed its "
              "reservation and charged nothing more")
    budget = ledger.budgets(config.dataset.id)[0]
    record = ledger.get(rid)
    charged = record.period if record is not None and record.period else None
    _print_release(manifest, out_dir, budget, rerun=rewritten, period=charged, resumed=resumed)
    return EXIT_OK


def _warn_before_release(config: Any, config_path: Path, url: str, rid: str, n: int | None = None) -> None:
    """Config-time warnings, as ``fdp plan`` states them; nothing is charged yet.

    A covariance centre whose noise would dominate, FoSR's unreliable coefficients, a ``tau: auto`` that can
    only target a low quantile level. None for a re-run of a published id (it charges and reads nothing).
    """
    if config.summary in ("mean", "covariance", "fosr", "fpca") and not _is_published_rerun(url, rid, config):
        from fdp.flows.plan_command import release_warnings

        for w in release_warnings(config, config_path, url, n):
            print(f"fdp: warning: {w}", file=sys.stderr)


def _print_release(manifest: dict[str, Any], out_dir: Path, budget: DatasetBudget, *, rerun: bool,
                   period: str | None = None, resumed: bool = False) -> None:
    """What a release did: the guarantee, every file written (PNGs included) and the budget left."""
    head = f"release {manifest['release_id']}: {manifest['summary']} of {manifest['dataset_id']} (n = {manifest['n']})"
    print(f"{head}: already published — files re-written, nothing charged" if rerun else head)
    print(f"  guarantee: {manifest['privacy']['guarantee']}")
    files = [str(out_dir / o["path"]) for o in manifest.get("outputs", [])] + [str(out_dir / "manifest.json")]
    print(f"  written:   {files[0]}")
    for f in files[1:]:
        print(f"             {f}")
    from fdp.tasks._publish import (  # loaded by the release already
        accuracy_text,
        coefficient_noise_text,
        floor_shrunk_text,
        indistinct_text,
        low_tau_text,
        with_bias_text,
    )

    accuracy = accuracy_text(manifest)
    if accuracy is not None:
        bought = {c.get("name") for c in manifest.get("parameters", {}).get("public_choices") or ()
                  if c.get("epsilon", 0) > 0}
        print(f"  accuracy:  {accuracy}")
        print("             " + _as_planned(manifest, bought))
        biased = with_bias_text(manifest)
        if biased is not None:
            print(f"             {biased}")
        low = low_tau_text(manifest)
        if low is not None:
            print(f"             {low}")
        coefficients = coefficient_noise_text(manifest)
        if coefficients is not None:
            print(f"             {coefficients}")
        for caution in (floor_shrunk_text(manifest), indistinct_text(manifest)):
            if caution is not None:
                print(f"  caution:   {caution}")
    if period is not None:
        print(f"  charged:   period {period}" + (" (by the run that published it; nothing now)" if rerun else
                                                     " (by the earlier run whose reservation this one resumed; nothing "
                                                     "more now)" if resumed else ""))
    print(f"  budget:    {_budget_line(budget, period)}")


def _as_planned(manifest: dict[str, Any], bought: set[Any]) -> str:
    """How the accuracy figure relates to what ``fdp plan`` stated (public manifest values only)."""
    amp = ((manifest.get("parameters") or {}).get("tuning") or {}).get("t2_amplification")
    if isinstance(amp, (int, float)):  # FoSR, tuning.fosr.t2_given_t1@1
        return ("`fdp plan` stated T2's noise for a design with T1 = I" + (" and at tau = 1" if "tau" in bought else "")
                + f": this is T2's noise at the smoothing chosen from the released T1 (A = {amp:.3g}; "
                "tuning.fosr.t2_given_t1@1)" + (" and the tau released" if "tau" in bought else ""))
    if "tau" in bought and "signal_rms" in ((manifest.get("parameters") or {}).get("tuning") or {}):
        return ("`fdp plan` stated it at tau = 1: this is the error at the tau released, with the smoothing re-chosen "
                "there for the stated signal_rms (not that figure scaled)")
    if "tau" in bought:
        return "`fdp plan` stated it at tau = 1: this is that figure at the tau released"
    if "bandwidth" in bought:
        return "`fdp plan` stated it at the normal_reference bandwidth: this is the noise at the bandwidth released"
    return "as `fdp plan` stated"


def _quiet_expected_tracebacks() -> None:
    from fdp.tasks._settings import quiet_expected_tracebacks  # Prefect is loaded by now

    quiet_expected_tracebacks()


class ReleaseFailure(Exception):
    """A release that failed for a reason outside the config and data; the message says what the ledger holds."""

    def __init__(self, message: str, exit_code: int = EXIT_ERROR) -> None:
        super().__init__(message)
        self.exit_code = exit_code


def _check_writable(out_dir: Path) -> None:
    """Fail before anything is charged when the output directory cannot be created or written."""
    target = out_dir.absolute()
    _check_name_lengths(target, "--out", "output directory")
    if target.is_dir() and not replaceable(target):
        raise ReleaseFailure(
            f"--out: {str(out_dir)!r} holds files that are not a release's, and a release directory is replaced as a "
            "whole; choose a new or empty directory. Nothing was charged", EXIT_INPUT)
    _check_creatable(out_dir, "--out", "output directory")


def _check_name_lengths(target: Path, option: str, what: str) -> None:
    too_long = next((part for part in target.parts if len(os.fsencode(part)) + PUBLISH_SUFFIX_BYTES > 255), None)
    if too_long is not None:
        raise ReleaseFailure(
            f"{option}: the folder name {shown(too_long)} is too long ({len(os.fsencode(too_long))} bytes; at most "
            f"{255 - PUBLISH_SUFFIX_BYTES}); choose a shorter {what}. Nothing was charged", EXIT_INPUT)


def _check_creatable(path: Path, option: str, what: str) -> None:
    """``path`` exists as a directory or can be created, and its nearest existing directory is writable."""
    target = path.absolute()
    existing = next((p for p in (target, *target.parents) if p.exists()), None)
    if existing is None or not existing.is_dir():
        raise ReleaseFailure(
            f"{option}: {str(path)!r} cannot be created ({str(existing)!r} is not a directory); "
            f"choose another {what}. Nothing was charged", EXIT_INPUT)
    try:
        fd, probe = tempfile.mkstemp(dir=existing, prefix=".fdp-write-check-")
        os.close(fd)
        os.unlink(probe)
    except OSError as exc:
        raise ReleaseFailure(
            f"{option}: {str(existing)!r} is not writable ({exc.strerror}); choose a writable {what}. "
            "Nothing was charged", EXIT_INPUT) from None


def _check_out_root(out_root: Path, series: list[str], period: str) -> None:
    """``fdp serve``'s out-root: refuse only what a run could not write, or would write into a release directory.

    It may hold earlier releases (``<series>/<YYYY-MM>/``, also a manual re-run's ``<YYYY-MM>-b``) and any other files.
    """
    root = out_root.absolute()
    if (root / MANIFEST_NAME).is_file():
        raise ReleaseFailure(
            f"--out-root: {str(out_root)!r} is itself a release directory (it holds a manifest.json); the runs would "
            "put series folders inside a published release. Choose its parent or another directory", EXIT_INPUT)
    for name in series:
        folder, month = root / name, root / name / period
        _check_name_lengths(month, "--out-root", "--out-root")
        if folder.exists() and not folder.is_dir():
            raise ReleaseFailure(
                f"--out-root: {str(out_root / name)!r} is a file, where series {name!r} keeps its months' folders; "
                "move it away or choose another --out-root", EXIT_INPUT)
        if (folder / MANIFEST_NAME).is_file():
            raise ReleaseFailure(
                f"--out-root: {str(out_root / name)!r} is a release directory (it holds a manifest.json), where "
                f"series {name!r} keeps its months' folders; move it away or choose another --out-root", EXIT_INPUT)
        if not replaceable(month):
            raise ReleaseFailure(
                f"--out-root: {str(out_root / name / period)!r}, where this month's run of series {name!r} publishes, "
                "holds files that are not a release's (a release directory is replaced as a whole); move them away "
                "or choose another --out-root", EXIT_INPUT)
        _check_creatable(folder, "--out-root", "--out-root")
    _check_creatable(out_root, "--out-root", "--out-root")


def _is_published_rerun(url: str, release_id: str, config: Any) -> bool:
    """Whether ``release_id`` is already published with this config (read-only; a missing ledger: no)."""
    sa_url = sqlalchemy.engine.make_url(url)
    if sa_url.get_backend_name() == "sqlite" and sa_url.database and not Path(sa_url.database).exists():
        return False
    try:
        record = Ledger(url, read_only=True).get(release_id)
    except LedgerError:
        return False
    return record is not None and record.state == "published" and record.config_sha256 == config_sha256(config)


def _check_dataset_path(config: Any, config_path: Path) -> None:
    """Fail before anything starts when the config's data file (or directory of Parquet files) is missing."""
    path = Path(config.dataset.path)
    if not path.is_absolute():
        path = config_path.resolve().parent / path
    if not path.exists():
        raise DataError(f"dataset.path: file {str(path)!r} does not exist; check the path (relative paths are resolved "
                        "against the config file)")


#: How to start the Prefect server ``fdp serve`` needs (docs/operations.md, step 1).
_START_SERVER = ("start one and keep it running (`prefect server start --host 127.0.0.1 --port 4200`) and set "
                 "PREFECT_API_URL to its API (http://127.0.0.1:4200/api; docs/operations.md, step 1); a temporary "
                 "local server runs no scheduler. Nothing was served or charged")


def _check_prefect_api(*, serving: bool = False) -> None:
    """Fail before the ledger is touched when a configured Prefect API does not answer."""
    from prefect.client.orchestration import get_client
    from prefect.settings import PREFECT_API_URL

    api = PREFECT_API_URL.value()
    if not api:
        return  # no API configured: the flow starts Prefect's temporary local server
    with get_client(sync_client=True) as client:
        problem = client.api_healthcheck()
    if problem is not None and serving:
        raise ReleaseFailure(f"the Prefect API at {api} cannot be reached ({type(problem).__name__}); fdp serve needs "
                             f"a running Prefect server whose scheduler creates the runs: {_START_SERVER}")
    if problem is not None:
        raise ReleaseFailure(
            f"the Prefect API at {api} cannot be reached ({type(problem).__name__}); start it (`prefect server start`), "
            "fix PREFECT_API_URL, or unset PREFECT_API_URL to use a temporary local server. Nothing was charged")


def _wait_for(server: TemporaryServer) -> None:
    """Wait for the temporary Prefect server (Prefect's start-up limit); fail before the ledger is touched."""
    from prefect.settings import PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS

    try:
        server.wait_until_healthy(PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS.value())
    except RuntimeError as exc:
        raise ReleaseFailure(f"{exc}. Nothing was charged") from None


def _wait_for_other_run(exc: Exception, ledger: Ledger, rid: str, before: Any) -> str | None:
    """When another run of the same id took the release over (it drew the noise first), wait for its outcome.

    Returns the state it reached: ``published``, ``cancelled``, or ``noised`` when the run that drew the noise
    stopped (same host: its process is gone) or did not publish within ``$FDP_WAIT_SECONDS`` (default 600);
    None when ``exc`` is not about another live run.
    """
    if isinstance(exc, NotResumableError):
        try:
            record = ledger.get(rid)
        except LedgerError:
            return None
        if record is not None and record.state == "published":
            return "published"  # the run that drew the noise has published it meanwhile
        if record is None or not _may_be_running(record):
            return None  # left by a run that stopped: the id cannot be resumed (exit 2)
    elif not isinstance(exc, ConcurrentRunError):
        return None
    deadline = time.monotonic() + wait_seconds()
    while True:
        try:
            record = ledger.get(rid)
        except LedgerError:
            return None
        state = record.state if record is not None else "cancelled"
        if state in ("published", "cancelled") or time.monotonic() > deadline:
            return state
        if state == "noised" and not _may_be_running(record):
            return state
        time.sleep(0.5)


def _may_be_running(record: Any) -> bool:
    """Whether the process that drew a noised release's noise may still be running (and publish it)."""
    return record.state == "noised" and owner_may_be_running(release_owner(record))


def _explain_failure(exc: Exception, ledger: Ledger, rid: str, before: Any, other_run: str | None = None, *,
                     out_dir: Path | None = None) -> Exception:
    """Say what a failed run left in the ledger (and what to do), or pass fdp's own error on when it left nothing."""
    if other_run == "cancelled":
        return ReleaseFailure(
            f"another run of release {rid!r} at the same time gave its reservation back (it stopped before drawing "
            "noise); this run charged nothing. Run again")
    if other_run is not None and other_run != "published":
        return ReleaseFailure(
            f"another run of release {rid!r} at the same time drew its noise (its budget is spent) but did not publish "
            f"it (it stopped, or did not finish within FDP_WAIT_SECONDS = {wait_seconds():g} "
            f"s); this run charged nothing. If that run is still going, wait and re-run with --release-id {rid} to get "
            "its files; if it stopped, the noise is lost: run again with a new --release-id")
    if isinstance(exc, ReleaseConflictError):
        return exc  # raised before this run charged anything: exit 2 with its own next step
    try:
        after = ledger.get(rid)
    except LedgerError:
        return _ledger_lost(exc, rid)
    reason = str(exc) if isinstance(exc, FdpError) else _unexpected(exc, ledger_told=True)
    unchanged = after is None or (before is not None and after.updated_at == before.updated_at)
    if unchanged or after.state == "cancelled":
        if isinstance(exc, (FdpError, ValidationError)):
            return exc  # fdp's own refusal: its message and exit code say it
        return ReleaseFailure(f"{reason}\nrelease {rid!r}: this run charged nothing. Run again")
    if after.state == "published" and _files_published(out_dir, rid):
        return ReleaseFailure(
            f"{reason}\nrelease {rid!r} IS published and its files are written in {str(out_dir)!r}; the failure came "
            "after them (the Prefect server's artifacts or the run's final state). Nothing is lost: a re-run with "
            f"--release-id {rid} re-writes the files from the ledger and charges nothing")
    if after.state == "published":
        return ReleaseFailure(
            f"{reason}\nrelease {rid!r} IS published in the ledger (its budget is spent) but its files were not "
            f"written. Fix the problem (e.g. free disk space) and re-run with --release-id {rid}: the files are re-written from the ledger "
            "and nothing is charged again")
    if after.state == "noised":
        return ReleaseFailure(
            f"{reason}\nrelease {rid!r}: its noise draw started (the ledger marks a release noised just before its "
            "first draw), so its budget is spent and cannot be refunded, but it was not published (the noise is not "
            "kept). Fix the problem and run again with a new --release-id")
    return ReleaseFailure(
        f"{reason}\nrelease {rid!r} still holds a reservation in the ledger (it counts as spent; no noise was drawn). "
        f"Re-run with --release-id {rid} to resume it without charging again, or cancel it with "
        f"`fdp budget cancel {rid}`")


def _ledger_lost(exc: Exception, rid: str) -> ReleaseFailure:
    """A failed run whose ledger, open at its start, cannot be read now: every crash-table row it may have left.

    Trial P: PostgreSQL stopped after the charge; what the run recorded is unknown here (docs/audit.md, crash table).
    """
    reason = str(exc) if isinstance(exc, FdpError) else _unexpected(exc, ledger_told=True)
    reason = reason.replace("; check --ledger / FDP_LEDGER_URL", "")  # the URL worked when this run started
    return ReleaseFailure(
        f"{reason}\nrelease {rid!r}: the ledger became unreachable during this run (it was reachable when the run "
        f"started), so what the run recorded cannot be read now. When the ledger is back, `fdp audit show {rid}` says "
        f"it (docs/audit.md, crash table): reserved — the budget is held, no noise was drawn: re-run with --release-id "
        f"{rid} to resume without charging again, or `fdp budget cancel {rid}`; noised — the budget is spent and the "
        "noise lost: run again with a new --release-id; no such release — nothing was charged: run again. Do not start "
        "a new release id before checking: a held reservation counts as spent")


def _next_step(url: str, rid: str) -> str:
    """The crash-table row (docs/audit.md) for the state the ledger holds for ``rid``."""
    try:
        record = Ledger(url, read_only=True).get(rid)
    except (LedgerError, OSError) as exc:
        if "does not exist" in str(exc):
            return f"release {rid!r}: nothing was charged (the ledger was not created yet). Run again"
        return (f"the ledger cannot be read now; `fdp audit show {rid}` says what it holds (docs/audit.md, crash "
                "table); `fdp audit verify` checks it")
    if record is None:
        return f"release {rid!r}: nothing was charged. Run again"
    if record.state == "cancelled":  # the audit trail holds its `reserved` and `cancelled` entries (trial H, F9)
        return (f"release {rid!r}: its reservation was cancelled before any noise was drawn, so nothing counts as spent "
                "(the ledger keeps both entries, reserved and cancelled). Run again")
    if record.state == "reserved":
        return (f"release {rid!r} holds a reservation (it counts as spent; no noise was drawn). Re-run with "
                f"--release-id {rid} to resume it without charging again, or give it back with "
                f"`fdp budget cancel {rid}`")
    if record.state == "noised":
        return (f"release {rid!r}: its noise draw started (the ledger marks a release noised just before its first "
                "draw), so its budget is spent and cannot be refunded, but it was not published (the noise is not "
                "kept). Run again with a new --release-id")
    return (f"release {rid!r} IS published in the ledger. Re-run with --release-id {rid} to write its files "
            "from the ledger (nothing is charged again)")


def _files_published(out_dir: Path | None, rid: str) -> bool:
    """The release directory holds the manifest of ``rid`` (a publication that finished writing its files)."""
    if out_dir is None:
        return False
    try:
        return json.loads((out_dir / MANIFEST_NAME).read_text(encoding="utf-8")).get("release_id") == rid
    except (OSError, ValueError, AttributeError):
        return False


def _prefect_server_status(exc: BaseException) -> int | None:
    """The HTTP status (>= 500) of a Prefect server error in ``exc`` or what caused it (Prefect's version check wraps one)."""
    seen: BaseException | None = exc
    while seen is not None:
        status = getattr(getattr(seen, "response", None), "status_code", None)
        if type(seen).__name__ == "PrefectHTTPStatusError" and isinstance(status, int) and status >= 500:
            return status
        seen = seen.__cause__
    return None


def _unexpected(exc: BaseException, *, ledger_told: bool = False) -> str:
    """Name an unexpected error without its text (which may quote data), unless FDP_DEBUG is set.

    ``ledger_told``: the caller goes on to say what the ledger holds for the run (so this does not point there).
    """
    tb = exc.__traceback__
    while tb is not None and tb.tb_next is not None:
        tb = tb.tb_next
    where = f" at {Path(tb.tb_frame.f_code.co_filename).name}:{tb.tb_lineno}" if tb is not None else ""
    if isinstance(exc, OutOfMemoryError):
        return str(exc)
    if isinstance(exc, MemoryError):
        return (f"memory ran out{where}; give the process more memory, or use a smaller grid or less data "
                "(engine: local reads the data in chunks)")
    status = _prefect_server_status(exc)
    if status is not None:
        return (f"the Prefect server answered HTTP {status}{where}: it is overloaded or failing (e.g. its own SQLite "
                "database locked on a busy machine; a PostgreSQL-backed server holds more load). Check the server's "
                "log and run again" + ("" if ledger_told else "; what this run charged, if anything, is in the ledger "
                                       "(`fdp audit show` the release id; docs/audit.md, crash table)"))
    if os.environ.get("FDP_DEBUG"):
        return f"unexpected {type(exc).__name__}{where}: {exc}"
    return (f"unexpected {type(exc).__name__}{where}; this is a bug in fdp or its environment. Its text is withheld "
            "because it may quote data; set FDP_DEBUG=1 to show it")


def _serve(configs: list[str], cron: str, ledger_url: str | None, out_root: str, notify: str | None = None) -> int:
    """Deploy one ``scheduled-release/<series>`` per config and run them until stopped (docs/operations.md)."""
    url = ledger_url or default_ledger_url()
    first_run = check_cron(cron)  # exit 2 before anything is read or served: a schedule that never fires
    served: dict[str, tuple[str, Any, str]] = {}  # series -> (config path, config, config sha256)
    for path in configs:
        config = load_config(path)  # fail fast (exit 2) on a bad config, before anything is served
        series = series_name(config)
        if series in served:
            raise ReleaseFailure(
                f"series {series!r} is named by both {served[series][0]!r} and {path!r}; give one of them its own "
                "`release: {name: ...}`", EXIT_INPUT)
        served[series] = (path, config, config_sha256(config))
    _check_out_root(Path(out_root), list(served), current_period())
    from prefect.settings import PREFECT_API_URL

    if not PREFECT_API_URL.value():
        raise ReleaseFailure(f"fdp serve needs a running Prefect server whose scheduler creates the runs: {_START_SERVER}")
    _check_prefect_api(serving=True)
    _check_series_deployments(served, url)  # before the ledger is opened: a refusal changes nothing
    _check_series_in_ledger(served, url)
    from fdp.flows.scheduled import (
        MISSED_HEARTBEATS,
        announce_scheduled_runs,
        ensure_failure_automations,
        heartbeat_seconds,
        scheduled_release,
    )
    from prefect import serve
    from prefect.deployments.runner import EntrypointType

    heartbeat = heartbeat_seconds()
    notify_url = notify or os.environ.get("FDP_NOTIFY_URL") or None
    deployments = []
    for series, (path, config, digest) in served.items():
        deployments.append(scheduled_release.to_deployment(
            name=series, cron=cron, entrypoint_type=EntrypointType.MODULE_PATH,
            parameters={"config_path": str(Path(path).resolve()), "series": series, "config_sha256_served": digest,
                        "ledger_url": url, "out_root": str(Path(out_root).resolve()),
                        "notify_url": notify_url,
                        "dataset_id": config.dataset.id},
            description=f"{config.summary} release of {config.dataset.id} ({config.dataset.privacy_unit}); "
                        f"release ids {series}-<YYYY-MM>",
            tags=["fdp", config.summary, f"dataset:{config.dataset.id}", _serve_owner_tag()],
        ))
    ids = []
    for series, deployment in zip(served, deployments, strict=True):  # registered first: the automations name its id
        ids.append(deployment.apply())
        ensure_failure_automations(series, ids[-1], heartbeat=heartbeat, notify_url=notify_url)
    stop = threading.Event()  # the scheduler's runs are announced as soon as it creates them (flows/scheduled.py)
    threading.Thread(target=announce_scheduled_runs, args=(ids, stop), name="fdp-announce-scheduled",
                     daemon=True).start()
    names = ", ".join(f"scheduled-release/{s}" for s in served)
    print(f"serving {len(deployments)} scheduled release series on {cron!r} (UTC; first run {first_run:%Y-%m-%d %H:%M} "
          f"UTC): {names}; ledger {url}; runs silent for {MISSED_HEARTBEATS * heartbeat} s are set Crashed", flush=True)
    try:
        serve(*deployments, print_starting_message=False, heartbeat_seconds=heartbeat)
    finally:
        stop.set()
    return EXIT_OK


def _check_series_in_ledger(served: dict[str, tuple[str, Any, str]], url: str) -> None:
    """Refuse a series whose past releases in the ledger were made with another config (no ledger yet: none)."""
    if _no_ledger_yet(url):
        return  # the first charge creates it
    ledger = Ledger(url)
    for series, (path, config, digest) in served.items():
        pattern = re.compile(rf"^{re.escape(series)}-\d{{4}}-\d{{2}}$")
        other = [r for r in ledger.releases(config.dataset.id)
                 if pattern.match(r.release_id) and r.config_sha256 != digest and r.state != "cancelled"]
        if other:
            raise ReleaseFailure(
                f"series {series!r} already has releases made with another config in the ledger "
                f"({other[0].release_id!r}, config sha256 {other[0].config_sha256[:12]}...); {path!r} would replace "
                "that definition. Give it its own `release: {name: ...}`, or restore the old config", EXIT_INPUT)


def _check_series_deployments(served: dict[str, tuple[str, Any, str]], url: str) -> None:
    """Refuse to replace a deployed series that serves another config or another ledger (never a silent replacement)."""
    from prefect.client.orchestration import get_client
    from prefect.exceptions import ObjectNotFound

    with get_client(sync_client=True) as client:
        for series, (path, _config, digest) in served.items():
            try:
                existing = client.read_deployment_by_name(f"scheduled-release/{series}")
            except ObjectNotFound:
                continue
            if existing.parameters.get("config_sha256_served") != digest:
                served_digest = str(existing.parameters.get("config_sha256_served") or "?")
                raise ReleaseFailure(
                    f"series {series!r} is already deployed (scheduled-release/{series}) with another config: it "
                    f"serves {existing.parameters.get('config_path')!r} as it was when served (config sha256 "
                    f"{served_digest[:12]}...), and {path!r} has config sha256 {digest[:12]}... now (the same file "
                    "edited since, or another file; `fdp audit config-hash CONFIG` prints it). A series keeps one "
                    f"definition: give the new one its own `release: {{name: ...}}`, restore the served config, or, "
                    f"if the series has no releases yet, delete the old deployment (`prefect deployment delete "
                    f"scheduled-release/{series}`)", EXIT_INPUT)
            deployed = existing.parameters.get("ledger_url")
            if deployed and not _same_ledger(deployed, url):
                raise ReleaseFailure(
                    f"series {series!r} is already deployed (scheduled-release/{series}) with the ledger "
                    f"{_safe_url(deployed)}; this `fdp serve` names the ledger {_safe_url(url)}. Serving it would "
                    "switch the deployment to that ledger, so the same data would be charged in two ledgers, and "
                    "stopping either `fdp serve` would pause the one deployment. Serve it with "
                    f"--ledger {_safe_url(deployed)}, give this config its own `release: {{name: ...}}`, or delete the "
                    f"old deployment first (`prefect deployment delete scheduled-release/{series}`). Nothing was "
                    "changed", EXIT_INPUT)
            _check_not_served_elsewhere(series, existing.last_polled, existing.tags)


_SERVED_BY = "served-by:"


def _serve_owner_tag() -> str:
    """The deployment tag naming the ``fdp serve`` process that serves it: ``served-by:<pid>@<host>``."""
    return f"{_SERVED_BY}{os.getpid()}@{operator_host()[1]}"


def _check_not_served_elsewhere(series: str, last_polled: datetime | None, tags: list[str]) -> None:
    """Refuse a series whose deployment another live ``fdp serve`` polls.

    Two serves would share the one deployment, and stopping either pauses it for both (Prefect pauses a served
    deployment when its ``serve`` stops). A serve polls the server for its runs every poll interval; a poll within
    three intervals is a live serve, unless the serve its ``served-by`` tag names ran on this host and is gone
    (``kill -9``, a crash: it may be restarted at once). A serve of another host is taken as live until it has
    not polled for those three intervals.
    """
    from prefect.settings import PREFECT_RUNNER_POLL_FREQUENCY

    if last_polled is None:
        return
    owner = next((t.removeprefix(_SERVED_BY) for t in tags if t.startswith(_SERVED_BY)), "")
    pid, _, host = owner.partition("@")
    if pid.isdigit() and not owner_may_be_running({"host": host, "pid": int(pid)}) and host == operator_host()[1]:
        return
    window = 3 * int(PREFECT_RUNNER_POLL_FREQUENCY.value())
    age = (datetime.now(UTC) - last_polled).total_seconds()
    if age < window:
        raise ReleaseFailure(
            f"series {series!r} is being served by another live `fdp serve` (scheduled-release/{series} was polled "
            f"for runs {max(age, 0):.0f} s ago): two serves would share the one deployment, and stopping either "
            "would pause it for both. Stop the other `fdp serve` first (it may run on another machine); if it is "
            f"gone (kill -9, a crash), start this one again in {window - max(age, 0):.0f} s. Nothing was changed",
            EXIT_INPUT)


def _safe_url(url: str) -> str:
    try:
        return sqlalchemy.engine.make_url(url).render_as_string(hide_password=True)
    except sqlalchemy.exc.ArgumentError:
        return repr(url)


def _same_ledger(a: str, b: str) -> bool:
    """Whether two ledger URLs name one database (a SQLite path resolved; the driver aside)."""

    def key(url: str) -> tuple[Any, ...]:
        try:
            u = sqlalchemy.engine.make_url(url)
        except sqlalchemy.exc.ArgumentError:
            return (url,)
        database = u.database
        if u.get_backend_name() == "sqlite" and database and not database.startswith("file:"):
            database = str(Path(database).resolve())
        return (u.get_backend_name(), u.username, u.host, u.port, database, tuple(sorted(u.query.items())))

    return key(a) == key(b)


def _demo(out: str, ledger_url: str | None) -> int:
    config = resources.files("fdp.examples") / "electricity_mean_auto.yaml"
    with resources.as_file(config) as path:
        return _release(Path(path), out, ledger_url, None)


def _budget_set(args: argparse.Namespace) -> int:
    check_id("dataset id", args.dataset)
    spec = BudgetSpec(  # same validation as a config's budget proposal
        epsilon=args.epsilon, delta=args.delta, accounting=args.accounting, period=args.period,
        epsilon_per_period=args.per_period, delta_per_period=args.per_period_delta,
        max_late_periods=args.max_late_periods,
    )
    ledger = Ledger(args.ledger or default_ledger_url())
    signed = _officer_signature(ledger, "budget.set", args.dataset, spec.epsilon, spec.delta, spec.policy(), args.sign_key)
    try:
        b = ledger.set_budget(args.dataset, spec.epsilon, spec.delta, signed=signed, **spec.policy())
    except BudgetExceededError as exc:
        # set_budget's error has the spent amount as "requested" and the new total as "remaining" (trial U, L4)
        spent, total = (", ".join(f"{m}={v:.6g}" for m, v in zip(exc.measures, values, strict=True))
                        for values in (exc.requested, exc.remaining))
        _err(f"budget of {args.dataset!r} cannot be set below what is already spent; nothing changed. Already spent: "
             f"{spent}; the new total: {total}")
        return EXIT_INPUT
    print(f"dataset {args.dataset}: {_budget_line(b)}")
    return EXIT_OK


def _budget_grant(args: argparse.Namespace) -> int:
    ledger = Ledger(args.ledger or default_ledger_url())
    signed = _officer_signature(ledger, "budget.grant", args.dataset, args.epsilon, args.delta, {"period": args.period},
                                args.sign_key)
    b = ledger.grant(args.dataset, args.period, args.epsilon, args.delta, signed=signed)
    usage = next(p for p in b.periods if p.period == args.period)
    allowance, remaining = usage.allowance or (0.0, 0.0), usage.remaining or (0.0, 0.0)  # set: a grant needs one
    print(f"dataset {args.dataset}: period {args.period} granted epsilon {args.epsilon:g}, delta {args.delta:g}; its "
          f"allowance is now epsilon {allowance[0]:g}, delta {allowance[1]:g}; spent epsilon {usage.spent[0]:.6g}; "
          f"remaining epsilon {remaining[0]:.6g} (other months unchanged)")
    return EXIT_OK


def _budget_line(b: DatasetBudget, period: str | None = None) -> str:
    """The budget in one line; the month shown is ``period`` (the one a release was charged to), else the current."""
    line = (f"total epsilon {b.total[0]:g}, delta {b.total[1]:g} ({b.accounting} accounting); "
            f"spent epsilon {b.spent[0]:.6g}, delta {b.spent[1]:.3g}; "
            f"remaining epsilon {b.remaining[0]:.6g}, delta {b.remaining[1]:.3g}")
    month = b.current if period is None else next((p for p in b.periods if p.period == period), None)
    if month is not None and b.per_period is not None and month.remaining is not None and month.allowance is not None:
        line += (f"; allowance per {b.period} epsilon {b.per_period[0]:g}, "
                 f"{month.period}: allowed {month.allowance[0]:g}, spent {month.spent[0]:.6g}, "
                 f"remaining {month.remaining[0]:.6g}; late runs up to {b.max_late_periods} period(s) back, not "
                 f"before {b.policy_since}")
    if b.n_non_private:
        line += f"; {_NON_PRIVATE_WARNING.format(n=b.n_non_private)}"
    return line


#: How ``budget show`` names releases charged as ``non_private`` (their epsilon guarantees nothing).
_NON_PRIVATE_WARNING = ("WARNING: {n} NON-PRIVATE release(s) (e.g. PCV tuning): their epsilon is counted in 'spent' "
                        "but is no privacy guarantee, so no epsilon holds for this dataset's releases together")


def _budget_show(dataset: str | None, as_json: bool, ledger_url: str | None) -> int:
    try:
        ledger = _read_only_ledger(ledger_url or default_ledger_url())
        budgets = ledger.budgets(dataset)
    except NoLedgerYet as exc:
        return _nothing_yet(exc, dataset, "{}" if as_json else None)
    # trial Y: a damaged ledger's figures were shown as fact. Read twice: a release writing between the check's reads
    # can make one read look inconsistent; a damaged trail stays so
    problems = ledger.verify() and ledger.verify()
    if problems:
        print(f"fdp: warning: the ledger's audit trail does not verify ({_count(len(problems), 'problem')}; the first: "
              f"{problems[0]}): the figures below cannot be trusted and no new release will be charged on it; run "
              "`fdp audit verify`, and restore the ledger from its backup (docs/operations.md)", file=sys.stderr)
    if dataset is not None and not budgets:
        _err(f"dataset {shown(dataset)} is not in the ledger")
        return EXIT_INPUT
    if as_json:
        print(json.dumps({b.dataset_id: PrivacyBudget.model_validate(b.as_dict()).model_dump(mode="json")
                          for b in budgets}, indent=2))
        return EXIT_OK
    print(f"{'dataset':30} {'accounting':10} {'total eps':>10} {'spent eps':>10} {'remaining':>10} "
          f"{'delta total':>12} {'delta spent':>12} {'delta left':>12} {'releases':>8}")
    for b in budgets:
        print(f"{_cell(b.dataset_id):30} {b.accounting:10} {b.total[0]:10.4g} {b.spent[0]:10.4g} {b.remaining[0]:10.4g} "
              f"{b.total[1]:12.3g} {b.spent[1]:12.3g} {b.remaining[1]:12.3g} {b.n_releases:8d}")
        if b.n_non_private:
            print(f"  {_NON_PRIVATE_WARNING.format(n=b.n_non_private)}")
        for p in b.periods:
            allowance = "" if p.allowance is None or p.remaining is None else (
                f" of {p.allowance[0]:g} allowed{'' if p.granted is None else f' (incl. a grant of {p.granted[0]:g})'}, "
                f"remaining {p.remaining[0]:.4g}")
            print(f"  period {p.period}: spent epsilon {p.spent[0]:.4g}{allowance} ({_count(p.n_releases, 'release')})")
    return EXIT_OK


def _budget_next_step(exc: BudgetExceededError) -> str:
    """How to go on after a refused charge: more budget (a privacy officer's decision) or a cheaper release."""
    ds = exc.dataset_id
    left = dict(zip(exc.measures, exc.remaining, strict=True))
    smaller = ("or release at a smaller privacy.epsilon (privacy.delta for Gaussian noise) that fits the remaining "
               "budget: `fdp plan CONFIG --epsilon E` shows the accuracy there"
               if left.get("epsilon", 1.0) > 1e-12 else "nothing is left for a smaller release")
    if exc.period is not None:
        return (f"To go on: a privacy officer may add to this period's allowance with `fdp budget grant {ds} --period "
                f"{exc.period} --epsilon E`, or raise every period's with `fdp budget set {ds} --epsilon TOTAL "
                "--period month --per-period E` (repeating the other settings: a set replaces the whole policy) — "
                f"governance decisions, recorded in the ledger's audit chain; wait for the next period; {smaller}.")
    short = [m for m, req, rem in zip(exc.measures, exc.requested, exc.remaining, strict=True) if req > rem + 1e-15]
    if short == ["delta"]:  # trial M: only delta was short, and the first remedy named epsilon
        return (f"Only delta is short. To go on: a privacy officer may raise the dataset's delta with `fdp budget set "
                f"{ds} --epsilon TOTAL --delta DELTA`, repeating its epsilon total and other settings (--accounting, "
                f"--period: a set replaces the whole policy; `fdp budget show --dataset {ds}` shows them and what is "
                f"spent) — a governance decision, recorded in the ledger's audit chain; or release with a smaller "
                "privacy.delta, or with Laplace (ICLP) noise, which spends no delta.")
    return (f"To go on: a privacy officer may raise the dataset's total with `fdp budget set {ds} --epsilon TOTAL`, "
            "repeating its other settings (--delta, --accounting, --period: a set replaces the whole policy; "
            f"`fdp budget show --dataset {ds}` shows them and what is spent) — a governance decision, recorded in the "
            f"ledger's audit chain; {smaller}.")


def _budget_cancel(release_id: str, ledger_url: str | None) -> int:
    check_id("release id", release_id)  # as `fdp release --release-id` and `fdp audit show`: before the ledger opens
    ledger = Ledger(ledger_url or default_ledger_url())
    record = ledger.get(release_id)
    if record is None:
        _err(f"release {shown(release_id)} is not in the ledger")
        return EXIT_INPUT
    if record.state != "reserved":
        _err(f"release {release_id!r} is {record.state!r}: only a reservation whose noise was never drawn can be "
             "given back (a noised or published release's charge is final)")
        return EXIT_INPUT
    ledger.cancel(release_id)
    print(f"release {release_id}: reservation cancelled; epsilon {record.epsilon:g}, delta {record.delta:g} given back "
          f"to {record.dataset_id}")
    return EXIT_OK


#: ``<series>-<YYYY-MM>`` (a scheduled release) or ``<series>-<YYYY-MM>-<suffix>`` (a manual re-run of that month).
_SERIES_ID = re.compile(r"^(?P<series>.+?)-(?P<month>\d{4}-(0[1-9]|1[0-2]))(?P<suffix>-.+)?$")


def _nothing_yet(exc: NoLedgerYet, dataset: str | None, json_text: str | None) -> int:
    """``budget show`` / ``calendar`` without a ledger: say so (exit 0; 2 when a dataset was asked for)."""
    if dataset is not None:
        _err(f"dataset {shown(dataset)} is not in the ledger: {exc}")
        return EXIT_INPUT
    if json_text is None:
        print(exc)
    else:
        print(json_text)  # stdout stays valid JSON; the explanation goes to stderr
        _err(str(exc))
    return EXIT_OK


def _calendar(dataset: str | None, as_json: bool, ledger_url: str | None) -> int:
    """Series x month from the ledger: the monthly check at a glance (docs/operations.md)."""
    try:
        ledger = _read_only_ledger(ledger_url or default_ledger_url())
    except NoLedgerYet as exc:
        return _nothing_yet(exc, dataset, "[]" if as_json else None)
    rows = []
    for r in ledger.releases(dataset):
        m = _SERIES_ID.match(r.release_id)
        series, month = (m.group("series"), m.group("month")) if m else ("(manual)", r.period)
        published = ((r.public or {}).get("manifest") or {}).get("provenance", {}).get("flow_run_id")
        runs = ledger.flow_runs(r.release_id)
        spent = r.state != "cancelled"  # a cancelled reservation was given back: it spent nothing (budget show agrees)
        rows.append({"dataset_id": r.dataset_id, "series": series, "month": month, "state": r.state,
                     "epsilon": r.epsilon if spent else 0.0, "delta": r.delta if spent else 0.0,
                     "release_id": r.release_id, "period_charged": r.period if spent else None,
                     "flow_run_id": published or (runs[-1] if runs else None), "flow_runs": runs})
    rows += _missing_months(rows, current_period())
    rows.sort(key=lambda x: (x["dataset_id"], x["series"], x["month"], x["release_id"]))
    if as_json:
        print(json.dumps(rows, indent=2))
        return EXIT_OK
    if not rows:
        print("no releases in the ledger" + (f" for dataset {dataset!r}" if dataset else ""))
        return EXIT_OK
    print(f"{'series':40} {'month':7}  {'state':9} {'epsilon':>8} {'delta':>8}  {'release id':50} flow run")
    for x in rows:
        print(f"{x['series']:40} {x['month']:7}  {x['state']:9} {x['epsilon']:8.4g} {x['delta']:8.2g}  "
              f"{x['release_id']:50} {x['flow_run_id'] or '-'}")
    return EXIT_OK


#: How many months back ``fdp calendar`` lists a known series' months without an entry (a retired series drops out).
MISSING_MONTHS_SHOWN = 12


def _month_index(month: str) -> int:
    return int(month[:4]) * 12 + int(month[5:7]) - 1


def _missing_months(rows: list[dict[str, Any]], now: str) -> list[dict[str, Any]]:
    """Rows for the months without an entry of each series the ledger knows: ``missing`` (past) or ``due`` (this month).

    From the series' first month, within the last :data:`MISSING_MONTHS_SHOWN` months (this one included); a series
    with no entry in those months is taken as retired and gets none. A series is known from its release ids ``<series>-<YYYY-MM>``; one whose runs never charged anything is not.
    """
    first: dict[tuple[str, str], int] = {}
    seen: set[tuple[str, str, int]] = set()
    for r in rows:
        if r["series"] == "(manual)":
            continue
        key, month = (r["dataset_id"], r["series"]), _month_index(r["month"])
        first[key] = min(first.get(key, month), month)
        seen.add((*key, month))
    end = _month_index(now)
    window = range(end - MISSING_MONTHS_SHOWN + 1, end + 1)
    missing = []
    for (dataset_id, series), start in first.items():
        if not any((dataset_id, series, month) in seen for month in window):
            continue  # no entry for a year: taken as retired
        for month in range(max(start, window.start), end + 1):
            if (dataset_id, series, month) in seen:
                continue
            name = f"{month // 12:04d}-{month % 12 + 1:02d}"
            missing.append({"dataset_id": dataset_id, "series": series, "month": name,
                            "state": "due" if month == end else "missing", "epsilon": 0.0, "delta": 0.0,
                            "release_id": f"{series}-{name}", "period_charged": None, "flow_run_id": None,
                            "flow_runs": []})
    return missing


#: ``fdp audit`` commands that only read: they open the ledger read-only (an auditor's read-only copy works).
READ_ONLY_AUDIT = ("verify", "list", "show", "export", "head")


class NoLedgerYet(LedgerError):
    """A read-only command found no ledger: the database does not exist yet or holds no tables at all."""

    def __init__(self, url: str) -> None:
        super().__init__(f"no fdp ledger at {_safe_url(url)} yet: it is created by the first `fdp budget set` or "
                         "`fdp release` (check --ledger / FDP_LEDGER_URL if you expected one); nothing was created")


def _no_ledger_yet(url: str) -> bool:
    """Whether the database at ``url`` does not exist yet or holds no tables at all; read-only, creates nothing.

    A database that cannot be read (unreachable, not SQLite, ...) is not "no ledger yet": opening it says why.
    """
    try:
        u = sqlalchemy.engine.make_url(url)
    except sqlalchemy.exc.ArgumentError:
        return False
    if u.get_backend_name() == "sqlite":
        db = u.database
        if not db or db == ":memory:" or db.startswith("file:") or u.query.get("uri") == "true":
            return False  # in memory or a URI: opening the ledger says what it is
        path = Path(db).absolute()
        if not path.exists():  # not there yet, if a writing command could create it (trial R: else it says why not)
            if not next(p for p in path.parents if p.exists()).is_dir():
                return False  # a file where a folder must be: opening the ledger says so
            check_ledger_directory(db)
            return True
        if path.is_file() and path.stat().st_size == 0:
            return False  # fdp never leaves an empty file: opening the ledger says so (trial U, H1)
        immutable = "" if os.access(path.parent, os.W_OK) else "&immutable=1"
        try:
            conn = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro{immutable}", uri=True, timeout=60)
            try:
                return conn.execute("SELECT count(*) FROM sqlite_master").fetchone()[0] == 0
            finally:
                conn.close()
        except sqlite3.Error:
            return False
    if u.get_backend_name() == "postgresql":
        if u.drivername == "postgresql" and importlib.util.find_spec("psycopg2") is None \
                and importlib.util.find_spec("psycopg") is not None:
            u = u.set(drivername="postgresql+psycopg")  # as the ledger does with psycopg 3 alone
        u = u.update_query_dict({"options": "-c default_transaction_read_only=on"})
    try:
        engine = sqlalchemy.create_engine(u)
        try:
            with engine.connect() as conn:
                return not sqlalchemy.inspect(conn).get_table_names()
        finally:
            engine.dispose()
    except (sqlalchemy.exc.SQLAlchemyError, ImportError):
        return False


def _read_only_ledger(url: str) -> Ledger:
    """The ledger opened read-only; an older schema is migrated first when the file may be written (one audited step, as any writing command would), else the error says what to do.

    Raises:
        NoLedgerYet: the database does not exist yet or is empty; nothing is created.
    """
    if _no_ledger_yet(url):
        raise NoLedgerYet(url)
    try:
        return Ledger(url, read_only=True)
    except OldLedgerError:
        db = sqlalchemy.engine.make_url(url).database
        if not db or not os.access(db, os.W_OK) or not os.access(Path(db).parent, os.W_OK):
            raise
    Ledger(url)
    return Ledger(url, read_only=True)


def _audit(args: argparse.Namespace) -> int:
    if args.audit_command in ("keygen", "config-hash"):  # no ledger involved
        return _audit_keygen(args.out) if args.audit_command == "keygen" else _audit_config_hash(args.config, args.canonical)
    if args.audit_command == "show":
        check_id("release id", args.release_id)  # as `fdp release --release-id`: before the ledger is opened (exit 2)
    # an auditor's commands never write (a read-only copy works); checkpoint and key registration do
    url = args.ledger or default_ledger_url()
    if args.audit_command == "backup":
        return _audit_backup(url, args.out)
    ledger = _read_only_ledger(url) if args.audit_command in READ_ONLY_AUDIT else Ledger(url)
    if args.audit_command == "verify":
        return _audit_verify(ledger, args.against, args.checkpoints, args.public_keys)
    if args.audit_command == "checkpoint":
        return _audit_checkpoint(ledger, args.key, args.out)
    if args.audit_command == "head":
        seq, head = ledger.head()
        print(f"ledger {ledger.ledger_id}\nentry  {seq}\nhead   {head}")
        return EXIT_OK
    if args.audit_command == "require-signed-budget":
        return _audit_require_signed_budget(ledger, args.key)
    if args.audit_command == "list":
        return _audit_list(ledger, args.json)
    if args.audit_command == "show":
        record = ledger.get(args.release_id)
        if record is None:
            _err(f"release {shown(args.release_id)} is not in the ledger")
            return EXIT_INPUT
        entry: dict[str, Any] = {k: v for k, v in record.__dict__.items() if k != "public"}
        try:
            entry = LedgerEntry.model_validate(entry).model_dump(mode="json")
        except ValidationError as exc:  # show the auditor what is there, and what does not fit the schema
            entry["schema_problems"] = format_validation_error(exc).splitlines()
        entry["published_manifest"] = (record.public or {}).get("manifest")
        entry["audit_events"] = ledger.audit_events(args.release_id)
        print(json.dumps(entry, indent=2, default=str))
        return EXIT_OK
    events = [_export_row(e) for e in ledger.audit_events()]
    if args.format == "json":
        print(json.dumps(events, indent=2, default=str))
    else:
        writer = csv.DictWriter(sys.stdout, fieldnames=list(EXPORT_COLUMNS))
        writer.writeheader()
        for e in events:
            writer.writerow({**e, "payload": json.dumps(e["payload"], sort_keys=True)})
    return EXIT_OK


# --------------------------------------------------------------------------- audit: what an auditor reads and
# the evidence kept outside the database (docs/audit.md; fdpcore/ledger/_evidence.py)

#: Columns of ``fdp audit export`` (CSV header; the JSON objects have the same keys).
EXPORT_COLUMNS = ("seq", "at", "actor", "host", "event", "dataset_id", "release_id", "state", "summary", "period",
                  "epsilon", "delta", "rho", "config_sha256", "git_sha", "signed_by", "payload", "prev_hash", "hash")
#: Audit events that change a budget policy (shown in ``fdp audit list`` beside the releases).
POLICY_EVENTS = ("dataset.created", "budget.set", "budget.granted", "audit.key_registered")


def _export_row(e: dict[str, Any]) -> dict[str, Any]:
    """An audit entry with the facts an auditor filters on as columns (the payload stays, whole)."""
    p = e["payload"] if isinstance(e["payload"], dict) else {}
    prov = p.get("provenance") if isinstance(p.get("provenance"), dict) else {}
    state = p.get("to") or ("reserved" if e["event"] == "release.reserved" else None)
    signed = p.get("signed") if isinstance(p.get("signed"), dict) else {}
    if e["event"] == "audit.key_registered" and p.get("signature"):  # signed by the key it registers
        signed = {"public_key": p.get("public_key")}
    return {
        "seq": e["seq"], "at": e["at"], "actor": e["actor"], "host": e["host"], "event": e["event"],
        "dataset_id": e["dataset_id"], "release_id": e["release_id"], "state": state, "summary": p.get("summary"),
        "period": p.get("period") or None, "epsilon": p.get("epsilon", p.get("epsilon_total")),
        "delta": p.get("delta", p.get("delta_total")), "rho": p.get("rho"), "config_sha256": p.get("config_sha256"),
        "git_sha": prov.get("git_sha"), "signed_by": signed.get("public_key"), "payload": e["payload"],
        "prev_hash": e["prev_hash"], "hash": e["hash"],
    }


def _audit_list(ledger: Ledger, as_json: bool) -> int:
    """Releases and budget-policy changes in one timeline (oldest first)."""
    rows: list[dict[str, Any]] = [
        {"at": r.created_at, "kind": "release", "release_id": r.release_id, "dataset_id": r.dataset_id,
         "period": r.period, "summary": r.summary, "epsilon": r.epsilon, "delta": r.delta, "state": r.state,
         "operator": r.provenance.get("operator"), "git_sha": r.provenance.get("git_sha"), "mechanism": r.mechanism,
         "sensitivity_formula": r.sensitivity_formula, "config_sha256": r.config_sha256, "created_at": r.created_at,
         "flow_run_id": r.provenance.get("flow_run_id"), "code_version": r.provenance.get("code_version"),
         "charge_kind": r.charge_kind}
        for r in ledger.releases()
    ]
    events = ledger.audit_events()
    first_seq: dict[str, int] = {}  # a release's place in the chain: its first event (trial Z: by time alone a release
    for e in events:                # created in the same transaction as its dataset sorted before the dataset)
        if e["release_id"] is not None:
            first_seq.setdefault(e["release_id"], e["seq"])
    for r in rows:
        r["seq"] = first_seq.get(r["release_id"])
    for e in events:
        if e["event"] in POLICY_EVENTS:
            x = _export_row(e)
            rows.append({"at": e["at"], "kind": "policy", "release_id": None, "dataset_id": e["dataset_id"],
                         "period": e["payload"].get("period"), "summary": e["event"],
                         "epsilon": None if x["epsilon"] is None else float(x["epsilon"]),
                         "delta": None if x["delta"] is None else float(x["delta"]),
                         "state": ("self-signed" if e["event"] == "audit.key_registered" else "signed")
                         if x["signed_by"] else "unsigned", "operator": e["actor"], "git_sha": None, "seq": e["seq"]})
    rows.sort(key=lambda r: (r["seq"] is None, r["seq"] or 0, r["at"]))  # chain order; a release without events last
    if as_json:
        print(json.dumps(rows, indent=2))
        return EXIT_OK
    print(f"{'time (UTC)':19}  {'release / policy change':34} {'dataset':26} {'period':8} {'summary':16} "
          f"{'epsilon':>8} {'delta':>8} {'state':11} {'operator':12} git sha")
    for r in rows:
        what = r["release_id"] if r["kind"] == "release" else \
            f"[{'key' if r['summary'] == 'audit.key_registered' else 'policy'} #{r['seq']}]"
        eps = "" if r["epsilon"] is None else f"{r['epsilon']:g}"
        delta = "" if r["delta"] is None else f"{r['delta']:g}"
        print(f"{r['at'][:19]:19}  {what:34} {r['dataset_id']:26} {r['period'] or '-':8} {r['summary']:16} "
              f"{eps:>8} {delta:>8} {r['state']:11} {r['operator'] or '-':12} {(r['git_sha'] or '-')[:12]}"
              + ("  NON-PRIVATE (epsilon is no guarantee)" if r.get("charge_kind") == "non_private" else ""))
    return EXIT_OK


def _add_audit_evidence_parsers(asub: Any, verify: argparse.ArgumentParser) -> list[argparse.ArgumentParser]:
    """Options of ``audit verify`` for outside evidence, and the audit commands that make or read it."""
    verify.add_argument("--against", nargs="+", default=[], metavar="PATH",
                        help="published manifests, or directories searched recursively for them: each one's "
                        "audit commitment must be a prefix of today's chain")
    verify.add_argument("--checkpoints", default=None, metavar="DIR",
                        help="directory of signed checkpoints (`fdp audit checkpoint`), searched recursively")
    verify.add_argument("--public-key", action="append", default=None, dest="public_keys", metavar="HEX",
                        help="accept checkpoints signed by this key only (repeatable; default: the checkpoint keys "
                        "recorded in the ledger)")
    cp = asub.add_parser("checkpoint", help="write a signed statement of the chain's head (kept outside the database)")
    cp.add_argument("--key", default=None, help="Ed25519 private key (PEM) kept outside the database (default: $FDP_AUDIT_KEY)")
    cp.add_argument("--out", default="audit-checkpoints", help="directory for the checkpoint file (default: ./audit-checkpoints)")
    hd = asub.add_parser("head", help="print the ledger id and the audit chain's head (entry and hash)")
    rs = asub.add_parser("require-signed-budget",
                         help="from now on every budget-policy change must be signed with this key (privacy officer)")
    rs.add_argument("--key", default=None, help="the privacy officer's Ed25519 key (PEM) (default: $FDP_OFFICER_KEY)")
    kg = asub.add_parser("keygen", help="make a new Ed25519 private key (PEM, mode 0600) and print its public key")
    kg.add_argument("--out", required=True, help="path of the new key file (never overwritten)")
    bk = asub.add_parser("backup", help="copy a SQLite ledger consistently, even while releases run (PostgreSQL: "
                         "pg_dump), and check the copy verifies")
    bk.add_argument("--out", required=True, help="path of the backup file (never overwritten; mode 0600)")
    ch = asub.add_parser("config-hash", help="recompute a config's hash as the ledger and the manifest record it")
    ch.add_argument("config", help="release config (YAML)")
    ch.add_argument("--canonical", action="store_true", help="also print the canonical JSON that is hashed")
    return [cp, hd, rs, bk]


def _key_path(path: str | None, env: str, option: str) -> str:
    chosen = path or os.environ.get(env)
    if not chosen:
        raise ConfigError(f"{option} (or ${env}) must name the Ed25519 key file")
    return chosen


def _officer_signature(ledger: Ledger, action: str, dataset: str, epsilon: float, delta: float,
                       policy: dict[str, Any], key_path: str | None) -> dict[str, Any] | None:
    """The privacy officer's signature of a budget-policy change, when a key is given (else None)."""
    path = key_path or os.environ.get("FDP_OFFICER_KEY")
    if not path:
        return None
    key = load_private_key(path)
    statement = ledger.policy_statement(action, dataset, epsilon, delta, **policy)
    return {"statement": statement, "public_key": public_key_hex(key), "signature": sign_statement(key, statement)}


def _audit_backup(url: str, out: str) -> int:
    """``fdp audit backup``: SQLite's online backup to a new file, then the copy's own verify (docs/operations.md)."""
    path = backup_sqlite_ledger(url, out)
    copy = Ledger(f"sqlite:///{path.resolve()}", read_only=True)
    problems = copy.verify()
    size = f"{_count(copy.head()[0], 'audit entry', 'audit entries')}, {_count(len(copy.releases()), 'release')}"
    if problems:
        _err(f"backup written to {out} ({size}), but the ledger it copies does not verify ({len(problems)} problem"
             f"{'s' if len(problems) > 1 else ''}; the first: {problems[0]}): keep your earlier backups, and run "
             "`fdp audit verify` on the ledger")
        return EXIT_ERROR
    print(f"backup written to {out} ({size}; mode 0600); it verifies. Restore it only while no release runs: copy it "
          "over the ledger file")
    return EXIT_OK


def _audit_keygen(out: str) -> int:
    public = write_private_key(out)
    print(f"wrote {out} (Ed25519 private key, mode 0600: keep it outside the ledger's machine and backups)")
    print(f"public key {public}")
    return EXIT_OK


def _audit_config_hash(config_path: str, canonical: bool) -> int:
    config = load_config(config_path)
    if canonical:
        print(json.dumps(config.model_dump(mode="json"), sort_keys=True, separators=(",", ":")))
    print(config_sha256(config))
    return EXIT_OK


def _register(ledger: Ledger, key: Any, purpose: str) -> str:
    public = public_key_hex(key)
    if ledger.register_key(public, purpose, sign_statement(key, ledger.key_statement(public, purpose))):
        print(f"recorded {purpose} key {public} in the audit chain (first use)")
    return public


def _audit_require_signed_budget(ledger: Ledger, key_path: str | None) -> int:
    key = load_private_key(_key_path(key_path, "FDP_OFFICER_KEY", "--key"))
    public = _register(ledger, key, "budget-policy")
    print(f"budget-policy changes (budget set, grants, new datasets) now require signatures by {public}")
    return EXIT_OK


def _audit_checkpoint(ledger: Ledger, key_path: str | None, out: str) -> int:
    key = load_private_key(_key_path(key_path, "FDP_AUDIT_KEY", "--key"))
    known = set(ledger.registered_keys("checkpoint"))
    doc = ledger.checkpoint(key)
    statement, public = doc["statement"], doc["public_key"]
    if public not in known:
        print(f"recorded checkpoint key {public} in the audit chain (first use)")
    directory = Path(out)
    try:
        directory.mkdir(parents=True, exist_ok=True)
        path = directory / f"checkpoint-{statement['seq']:08d}-{statement['at'][:19].replace(':', '')}Z.json"
        write_json_atomic(path, doc)
    except OSError as exc:
        raise ConfigError(f"--out ({out!r}) cannot be written ({exc.strerror})") from None
    print(f"checkpoint {path}: ledger {statement['ledger_id']}, entry {statement['seq']}, head {statement['head']}")
    print(f"signed by {public}")
    return EXIT_OK


def _json_files(path: Path) -> list[Path]:
    if path.is_dir():
        return sorted(p for p in path.rglob("*.json") if p.is_file())
    if path.is_file():
        return [path]
    raise ConfigError(f"{str(path)!r} does not exist")


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ConfigError(f"{str(path)!r} is not a readable JSON file ({type(exc).__name__})") from None


def _audit_verify(ledger: Ledger, against: list[str], checkpoints: str | None, public_keys: list[str] | None) -> int:
    """Plain verify, then each manifest's commitment and each checkpoint against today's chain."""
    problems = [f"audit: {p}" for p in ledger.verify()]
    evidence: list[Evidence] = []
    n_manifests = n_old = n_checkpoints = 0
    seen: set[str] = set()  # release ids whose manifest lies under --against
    for given in against:
        for path in _json_files(Path(given)):
            doc = _read_json(path)
            if not isinstance(doc, dict) or "release_id" not in doc or "privacy" not in doc:
                if not Path(given).is_dir():
                    raise ConfigError(f"{str(path)!r} is not a release manifest")
                continue
            problems += _output_problems(path, doc)
            seen.add(str(doc["release_id"]))
            ev = manifest_evidence(str(path), doc)
            if ev is None:
                n_old += 1  # published before manifests carried commitments
                continue
            evidence.append(ev)
            n_manifests += 1
    if checkpoints is not None:
        pinned = set(public_keys) if public_keys else set(ledger.registered_keys("checkpoint"))
        for path in _json_files(Path(checkpoints)):
            doc = _read_json(path)
            if isinstance(doc, dict) and doc.get("format") == CHECKPOINT_FORMAT:
                evidence.append(checkpoint_evidence(str(path), doc, pinned))
                n_checkpoints += 1
        if n_checkpoints == 0:
            raise ConfigError(f"--checkpoints: no checkpoint files in {checkpoints!r}")
    if against and n_manifests == 0:
        raise ConfigError(f"--against: no manifest with an audit commitment in {', '.join(against)}"
                          + (f" ({n_old} manifests predate commitments)" if n_old else ""))
    hashes = ledger.chain_hashes()
    problems += ledger.check_evidence(evidence)
    if problems:
        for p in problems:
            _err(p if p.startswith("audit:") else f"audit: {p}")
        return EXIT_ERROR
    line = f"audit: ledger intact ({_count(len(hashes), 'entry', 'entries')}, {_count(len(ledger.releases()), 'release')})"
    if evidence:
        latest = max(ev.seq for ev in evidence)
        line += (f"; a prefix of it is committed by {n_manifests} manifest(s) and {n_checkpoints} checkpoint(s), "
                 f"the latest at entry {latest}")
        if latest < len(hashes):
            rest = f"entry {latest + 1} is" if latest + 1 == len(hashes) else f"entries {latest + 1}..{len(hashes)} are"
            line += (f" ({rest} covered by no outside evidence yet: make a checkpoint, `fdp audit checkpoint --key PEM` "
                     "with a key from `fdp audit keygen`, docs/audit.md)")
    print(line)
    if against:  # trial U, L3: "published" in the ledger with no files (a run killed while writing them)
        absent = [r.release_id for r in ledger.releases() if r.state == "published" and r.release_id not in seen]
        if absent:
            print(f"audit: {_count(len(absent), 'published release')} of the ledger {'has' if len(absent) == 1 else 'have'} "
                  f"no manifest under {', '.join(against)}: {', '.join(_cell(a) for a in absent[:10])}"
                  + (f" and {len(absent) - 10} more" if len(absent) > 10 else "")
                  + " (published elsewhere, or their files were never written: `fdp release CONFIG --release-id ID` "
                    "re-writes them from the ledger, charging nothing)")
    return EXIT_OK


def _output_problems(manifest: Path, doc: dict[str, Any]) -> list[str]:
    """Each file a manifest lists in ``outputs`` must lie beside it with the sha256 the manifest states."""
    found = []
    for entry in doc.get("outputs") or []:
        name, stated = (entry.get("path"), entry.get("sha256")) if isinstance(entry, dict) else (None, None)
        if not isinstance(name, str) or not isinstance(stated, str):
            continue
        path = manifest.parent / name
        try:
            actual = hashlib.sha256(path.read_bytes()).hexdigest()
        except OSError as exc:
            found.append(f"{str(path)!r}, listed in {str(manifest)!r}, cannot be read ({exc.strerror or exc}): a "
                         "published file is missing or was moved")
            continue
        if actual != stated:
            found.append(f"{str(path)!r} has sha256 {actual[:16]}…, not the {stated[:16]}… that {str(manifest)!r} states: "
                         "the file was changed after publication (re-run the release id to re-write it from the ledger)")
    listed = {manifest.name} | {e["path"] for e in doc.get("outputs") or [] if isinstance(e, dict)
                                and isinstance(e.get("path"), str)}
    for extra in sorted(q.name for q in manifest.parent.iterdir() if q.name not in listed):  # trial U, L3
        found.append(f"{str(manifest.parent / extra)!r} lies in the release folder of {str(manifest)!r} but is not "
                     "among its outputs: it is not part of the release (added after publication?); move it elsewhere")
    return found


def _count(n: int, one: str, many: str | None = None) -> str:
    """``n`` and the noun in the number it takes.

    >>> _count(1, "release"), _count(2, "release"), _count(0, "entry", "entries")
    ('1 release', '2 releases', '0 entries')
    """
    return f"{n} {one if n == 1 else many or one + 's'}"


def _cell(text: str) -> str:
    """An id as one table cell: ids made before ids were checked may hold a newline or other control character."""
    return text if text.isprintable() else shown(text)


def _err(message: str) -> None:
    print(f"fdp: error: {message}", file=sys.stderr)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
