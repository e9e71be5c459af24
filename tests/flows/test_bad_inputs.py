"""Bad input, faults and operator mistakes through `fdp release` (issue 5): one row per case.

Every row asserts the exit code, that the message names the field / file / column / row and
says what to do, that no traceback is printed, and the ledger before/after: unchanged unless
noise was drawn. Rows run in-process (`fdp.flows.cli.main`) against one ledger whose dataset
budget was set by the privacy officer beforehand and which already holds a published release.
"""

from __future__ import annotations

import errno
import json
import os
import sqlite3
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import sqlalchemy as sa
import yaml
from fdp.flows.cli import main

import fdpcore.io.files
import fdpcore.ledger._store as ledger_store
from fdpcore.ledger import Ledger

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = yaml.safe_load((REPO / "examples" / "electricity_mean.yaml").read_text())
DATA = REPO / "examples" / "data" / "electricity_monday.parquet"
DATASET = EXAMPLE["dataset"]["id"]
DELETE = object()

# ------------------------------------------------------------------ helpers


def _config(directory: Path, name: str, overrides: dict[str, Any] | None = None, text: str | None = None) -> Path:
    """Write the example config with dotted-path overrides (``DELETE`` removes a key)."""
    path = directory / f"{name}.yaml"
    if text is not None:
        path.write_bytes(text.encode("latin-1") if text.startswith("#latin") else text.encode())
        return path
    cfg = yaml.safe_load(yaml.safe_dump(EXAMPLE))
    cfg["dataset"]["path"] = str(DATA)
    for dotted, value in (overrides or {}).items():
        node = cfg
        keys = dotted.split(".")
        for k in keys[:-1]:
            node = node[k]
        if value is DELETE:
            node.pop(keys[-1])
        else:
            node[keys[-1]] = value
    path.write_text(yaml.safe_dump(cfg))
    return path


def _example_text() -> str:
    """The example config as YAML text, reading the shipped data (for cases that edit the text itself)."""
    cfg = yaml.safe_load(yaml.safe_dump(EXAMPLE))
    cfg["dataset"]["path"] = str(DATA)
    return yaml.safe_dump(cfg, default_flow_style=False)


def _csv(directory: Path, name: str, content: bytes) -> dict[str, Any]:
    path = directory / name
    path.write_bytes(content)
    return {"dataset.path": str(path), "dataset.format": "csv"}


def _parquet(directory: Path, name: str, table: pa.Table) -> dict[str, Any]:
    path = directory / name
    pq.write_table(table, path)
    return {"dataset.path": str(path), "dataset.format": "parquet"}


def _text_ids(renamed: dict[int, str]) -> pa.Table:
    """The shipped data with text unit ids (sorted as text, as the streaming engine needs); ``renamed``: one row each
    of these units carries the given spelling instead (the unit written two ways)."""
    frame = pq.read_table(DATA).to_pandas()
    frame["monday_index"] = frame["monday_index"].astype(str)
    for unit, text in renamed.items():
        frame.loc[frame.index[frame["monday_index"] == str(unit)][0], "monday_index"] = text
    return pa.Table.from_pandas(frame.sort_values(["monday_index", "half_hour"], kind="stable"), preserve_index=False)


GOOD_CSV = b"monday_index,half_hour,demand_mw\n" + b"".join(
    f"{u},{h},{1500 + 10 * h}\n".encode() for u in range(3) for h in range(1, 49)
)


def _snapshot(url: str) -> tuple[Any, ...]:
    led = Ledger(url)
    releases = [(r.release_id, r.state, r.epsilon, r.updated_at) for r in led.releases()]
    return tuple(releases), tuple(b.as_dict().__repr__() for b in led.budgets()), len(led.audit_events()), led.verify()


def _run(config: Path, out: Path, url: str, rid: str) -> int:
    return main(["release", str(config), "--out", str(out), "--ledger", url, "--release-id", rid])


@pytest.fixture(scope="module")
def shared(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """A ledger with an officer-set budget and one published release (`existing`)."""
    root = tmp_path_factory.mktemp("bad-inputs")
    url = f"sqlite:///{root / 'ledger.sqlite'}"
    assert main(["budget", "set", DATASET, "--epsilon", "50", "--ledger", url]) == 0
    led = Ledger(url)
    led.reserve(release_id="existing", dataset_id=DATASET, epsilon=1.0, delta=0.0, config_sha256="f" * 64,
                summary="mean", mechanism="iclp_qr", sensitivity_formula="sensitivity.mean.iclp_qr.exact_l2@1",
                budget_splits=[{"name": "mean", "epsilon": 1.0, "delta": 0.0}], provenance={}, internal={})
    led.mark_noised("existing")
    led.publish("existing", {"manifest": {"n": 1}, "files": {}})
    return {"root": root, "url": url}


# ------------------------------------------------------------------ the table
# (case id, builder(dir) -> (overrides | text), expected exit code, substrings of the message)

Builder = Callable[[Path], dict[str, Any]]
ROWS: list[tuple[str, Builder, int, list[str]]] = [
    # --- config
    ("config-missing-file", lambda d: {"__path__": str(d / "nope.yaml")}, 2, ["config file", "does not exist"]),
    ("config-not-yaml", lambda d: {"__text__": "dataset: [1,\n"}, 2, ["not valid YAML at line", "column"]),
    ("config-not-mapping", lambda d: {"__text__": "- 1\n- 2\n"}, 2, ["must be a YAML mapping"]),
    ("config-not-utf8", lambda d: {"__text__": "#latin \xe9\n"}, 2, ["not UTF-8", "save it as UTF-8"]),
    ("config-deeply-nested", lambda d: {"__text__": "[" * 3000 + "]" * 3000}, 2, ["nested too deeply"]),
    ("config-unknown-key", lambda d: {"privacy.epsilion": 1.0}, 2, ["privacy.epsilion", "Extra inputs are not permitted",
                                                                      "(did you mean 'epsilon'?)"]),  # trial Y
    ("config-unknown-nested-key", lambda d: {"tuning.signal_rsm": 0.2}, 2, ["tuning.signal_rsm", "(did you mean 'signal_rms'?)"]),
    ("config-unknown-top-key", lambda d: {"budgett": 1}, 2, ["budgett", "Extra inputs"]),
    ("config-missing-section", lambda d: {"privacy": DELETE}, 2, ["privacy", "Field required"]),
    ("config-wrong-type-epsilon", lambda d: {"privacy.epsilon": "one"}, 2, ["privacy.epsilon", "must be a number, not text"]),
    ("config-wrong-type-grid", lambda d: {"grid": [1, 2]}, 2, ["grid", "valid dictionary"]),
    ("config-summary-list", lambda d: {"summary": ["mean"]}, 2, ["summary", "must be one of"]),
    ("config-epsilon-zero", lambda d: {"privacy.epsilon": 0}, 2, ["privacy.epsilon", "greater than 0"]),
    ("config-epsilon-negative", lambda d: {"privacy.epsilon": -1.0}, 2, ["privacy.epsilon", "greater than 0"]),
    ("config-epsilon-vanishing", lambda d: {"privacy.epsilon": 1e-300}, 2, ["privacy.epsilon", "must be at least 1e-09"]),
    ("config-epsilon-nan", lambda d: {"privacy.epsilon": float("nan")}, 2, ["privacy.epsilon", "finite number"]),
    ("config-epsilon-inf", lambda d: {"privacy.epsilon": float("inf")}, 2, ["privacy.epsilon", "finite number"]),
    ("config-delta-one", lambda d: {"privacy.delta": 1.0}, 2, ["privacy.delta", "less than 1"]),
    ("config-delta-negative", lambda d: {"privacy.delta": -0.1}, 2, ["privacy.delta", "greater than or equal to 0"]),
    ("config-delta-with-pure-dp", lambda d: {"privacy.delta": 1e-6}, 2, ["privacy.delta", "must be 0", "iclp_qr"]),
    ("config-budget-negative", lambda d: {"budget.epsilon": -5}, 2, ["budget.epsilon", "greater than 0"]),
    ("config-tau-zero", lambda d: {"clipping.tau": 0}, 2, ["clipping.tau", "greater than 0"]),
    ("config-tau-negative", lambda d: {"clipping.tau": -1.0}, 2, ["  clipping.tau: Input should be greater than 0 — or: Input should be 'auto'\n"]),  # one line, no pydantic form names
    ("config-grid-one-point", lambda d: {"grid.size": 1}, 2, ["grid.size", "greater than or equal to 2"]),
    ("config-grid-not-increasing", lambda d: {"grid": {"rule": "trapezoid", "points": [0.0, 0.5, 0.5, 1.0]}}, 2, ["grid.points", "strictly increasing"]),
    ("config-grid-rule-mismatch", lambda d: {"grid": {"rule": "midpoint", "points": [0.0, 1.0]}}, 2, ["grid", "midpoint rule needs 'size'"]),
    ("config-kernel-rho-negative", lambda d: {"kernel": {"name": "matern", "nu": 1.5, "rho": -0.1}}, 2, ["kernel", "rho", "> 0"]),
    ("config-kernel-nu-zero", lambda d: {"kernel": {"name": "matern", "nu": 0.0, "rho": 0.1}}, 2, ["kernel", "nu", "> 0"]),
    ("config-kernel-missing-param", lambda d: {"kernel": {"name": "matern", "nu": 1.5}}, 2, ["kernel", "rho"]),
    ("config-kernel-unknown", lambda d: {"kernel": {"name": "rbf2"}}, 2, ["kernel.name", "must be one of"]),
    ("config-tuning-eta-alone", lambda d: {"tuning": {"eta": 1.5}}, 2, ["tuning", "eta and psi must be given together"]),
    ("config-tuning-psi-negative", lambda d: {"tuning": {"eta": 1.5, "psi": -1.0}}, 2, ["tuning.psi", "greater than 0"]),
    ("config-tuning-unknown-rule", lambda d: {"tuning": {"rule": "magic"}}, 2, ["tuning.rule", "must be one of"]),
    ("config-time-domain-reversed", lambda d: {"dataset.time_domain": [48.5, 0.5]}, 2, ["dataset.time_domain", "a < b"]),
    ("config-value-scale-zero", lambda d: {"dataset.value_scale": 0}, 2, ["dataset.value_scale", "greater than 0"]),
    ("config-format-unknown", lambda d: {"dataset.format": "xlsx"}, 2, ["dataset.format", "'parquet' or 'csv'"]),
    ("config-dataset-id-bad", lambda d: {"dataset.id": "../etc"}, 2, ["dataset.id", "pattern"]),
    # mechanism feasibility (MATH.md §4): rows for the estimators beyond iclp_qr
    ("config-iclp-ar-eta-below-1", lambda d: {"estimator": "iclp_ar", "tuning": {"eta": 0.5, "psi": 0.01}}, 2, ["tuning.eta (0.5) must be >= 1", "iclp_ar"]),
    ("config-classical-epsilon-above-1", lambda d: {"estimator": "gp", "privacy": {"epsilon": 2.0, "delta": 1e-6, "calibration": "classical"}}, 2, ["privacy.epsilon (2.0) must be <= 1", "'classical'", "analytic"]),
    ("config-gp-delta-zero", lambda d: {"estimator": "gp"}, 2, ["privacy.delta (0.0) must be > 0", "gp"]),
    ("config-calibration-with-pure-dp", lambda d: {"privacy.calibration": "classical"}, 2, ["privacy.calibration", "applies to estimator 'gp' only"]),
    ("config-budget-split-exceeds-total", lambda d: {"tuning": {"rule": "dp_select", "select_epsilon": 1.0}}, 2, ["tuning.select_epsilon (1.0) must be < privacy.epsilon"]),
    ("config-release-id-reused", lambda d: {"__rid__": "existing"}, 2, ["release id 'existing'", "different config", "new --release-id"]),
    # --- files
    ("file-missing", lambda d: {"dataset.path": str(d / "absent.parquet")}, 2, ["dataset.path", "does not exist"]),
    ("file-is-directory", lambda d: {"dataset.path": str(d)}, 2, ["dataset.path", "is not a file"]),
    ("file-corrupt-parquet", lambda d: _csv(d, "corrupt.parquet", b"PAR1garbage") | {"dataset.format": "parquet"}, 2, ["corrupt.parquet", "not a readable Parquet file", "dataset.format"]),
    ("file-csv-declared-parquet", lambda d: _csv(d, "data.csv", GOOD_CSV) | {"dataset.format": "parquet"}, 2, ["data.csv", "not a readable Parquet file"]),
    ("file-parquet-declared-csv", lambda d: {"dataset.format": "csv"}, 2, ["electricity_monday.parquet", "NUL bytes", "not a CSV text file", "dataset.format"]),
    ("file-csv-wrong-delimiter", lambda d: _csv(d, "semi.csv", GOOD_CSV.replace(b",", b";")), 2, ["semi.csv", "missing column", "dataset.csv_delimiter"]),
    ("file-csv-latin1", lambda d: _csv(d, "latin.csv", GOOD_CSV + "9,1,\u00e9\n".encode("latin-1")), 2, ["latin.csv", "not UTF-8", "re-encode"]),
    ("file-csv-empty", lambda d: _csv(d, "empty.csv", b""), 2, ["empty.csv", "is empty"]),
    ("file-csv-header-only", lambda d: _csv(d, "header.csv", b"monday_index,half_hour,demand_mw\n"), 2, ["header.csv", "zero data rows"]),
    ("file-parquet-zero-rows", lambda d: _parquet(d, "zero.parquet", pq.read_table(DATA).slice(0, 0)), 2, ["zero.parquet", "zero data rows"]),
    ("file-zero-rows-after-filtering", lambda d: {"dataset.time_domain": [100.0, 200.0]}, 2, ["no privacy unit could be aligned", "dataset.time_domain"]),
    ("file-zero-rows-after-filtering-streaming", lambda d: {"dataset.time_domain": [100.0, 200.0], "engine": {"name": "local"}}, 2, ["no privacy unit could be aligned", "readings reach from at most", "dataset.max_end_gap"]),
    ("file-all-values-nan", lambda d: _csv(d, "nan.csv", b"monday_index,half_hour,demand_mw\n" + b"".join(f"{u},{h},nan\n".encode() for u in range(3) for h in range(1, 49))), 2, ["nan.csv", "no privacy unit could be aligned"]),
    ("file-missing-column", lambda d: {"dataset.value_column": "demand"}, 2, ["missing column(s) ['demand']", "dataset.value_column"]),
    ("file-duplicate-columns", lambda d: _csv(d, "dup.csv", GOOD_CSV.replace(b"demand_mw\n", b"demand_mw,demand_mw\n", 1).replace(b"0\n", b"0,1\n")), 2, ["dup.csv", "duplicate column names ['demand_mw']"]),
    ("file-non-numeric-value", lambda d: _csv(d, "text.csv", GOOD_CSV.replace(b"0,1,1510\n", b"0,1,SECRET-1510\n")), 2, ["text.csv", "column 'demand_mw'", "non-numeric entry at row 1"]),
    ("file-decimal-comma", lambda d: _csv(d, "comma.csv", GOOD_CSV.replace(b",", b";").replace(b"1510", b"1510,5")) | {"dataset.csv_delimiter": ";"}, 2, ["comma.csv", "non-numeric entry at row 1", "decimal separator"]),
    ("file-mixed-types-time", lambda d: _csv(d, "mixed.csv", GOOD_CSV.replace(b"\n2,48,", b"\n2,forty-eight,")), 2, ["column 'half_hour'", "non-numeric entry at row 144"]),
    ("file-clock-times-as-text", lambda d: _csv(d, "clock.csv", GOOD_CSV.replace(b"\n0,1,", b"\n0,00:30,")), 2, ["clock.csv", "column 'half_hour'", "non-numeric entry at row 1", "reads as a date or a clock time", "dataset.time_domain"]),
    ("file-missing-unit-id", lambda d: _csv(d, "nounit.csv", GOOD_CSV.replace(b"\n1,5,", b"\n,5,")), 2, ["column 'monday_index'", "missing privacy-unit id at row 53"]),
    # trial P: a CSV after a spreadsheet round trip, one subject as "1" and "1.0": two units, each person at 2 epsilon
    ("file-unit-id-written-two-ways", lambda d: _csv(d, "ids.csv", GOOD_CSV.replace(b"\n1,5,", b"\n1.0,5,")), 2, ["ids.csv", "column 'monday_index'", "differ only in surrounding spaces, in how a number is written or in Unicode form", "(rows 49 and 53)", "twice the stated epsilon"]),
    ("file-unit-id-written-two-ways-streaming", lambda d: _parquet(d, "ids.parquet", _text_ids({1: " 1"})) | {"engine": {"name": "local"}}, 2, ["ids.parquet", "column 'monday_index'", "privacy-unit id at row", "differ only in surrounding spaces, in how a number is written or in Unicode form"]),
    ("file-csv-ragged-row", lambda d: _csv(d, "ragged.csv", GOOD_CSV.replace(b"\n1,7,1570\n", b"\n1,7,1570,999\n")), 2, ["ragged.csv", "row 56 (the header is row 1) has 4 fields"]),
    ("file-timestamp-times", lambda d: _parquet(d, "ts.parquet", pa.table({"monday_index": [0, 0], "half_hour": pa.array([0, 10**9], pa.timestamp("s")), "demand_mw": [1.0, 2.0]})), 2, ["ts.parquet", "column 'half_hour' has type timestamp[", "must be numeric"]),
    ("file-nested-unit", lambda d: _parquet(d, "nested.parquet", pa.table({"monday_index": [[0], [0]], "half_hour": [1.0, 48.0], "demand_mw": [1.0, 2.0]})), 2, ["nested.parquet", "column 'monday_index' has type list"]),
    ("file-boolean-values", lambda d: _parquet(d, "bool.parquet", pa.table({"monday_index": [0, 0], "half_hour": [1.0, 48.0], "demand_mw": [True, False]})), 2, ["bool.parquet", "column 'demand_mw' is boolean"]),
    ("file-time-domain-infinite-width", lambda d: {"dataset.time_domain": [-1e308, 1e308]}, 2, ["time_domain", "finite width"]),
    # --- identifiers (issue 18, item 1): one pattern for release ids, dataset ids and series names
    ("id-release-traversal", lambda d: {"__rid__": "../../escaped"}, 2, ["--release-id ('../../escaped') must be 1-128 letters"]),
    ("id-release-slashes", lambda d: {"__rid__": "a/b/c"}, 2, ["--release-id ('a/b/c')", "starting with a letter or digit"]),
    ("id-release-newline", lambda d: {"__rid__": "ok\nfake-row"}, 2, ["--release-id ('ok\\nfake-row')"]),
    ("id-release-4000-chars", lambda d: {"__rid__": "a" * 4000}, 2, ["--release-id", "(4000 characters)", "1-128"]),
    ("id-release-dot-dot", lambda d: {"__rid__": ".."}, 2, ["--release-id ('..')"]),
    ("id-dataset-newline", lambda d: {"dataset.id": "ok\nfake"}, 2, ["dataset.id", "pattern"]),
    ("id-dataset-too-long", lambda d: {"dataset.id": "d" * 129}, 2, ["dataset.id", "at most 128 characters"]),
    # --- periods (item 2): never before the dataset's policy, never further back than the policy allows
    ("period-before-policy", lambda d: {"__period__": "2001-01"}, 2, ["period ('2001-01') is before the budget policy", "in force since"]),
    # --- limits measured on this machine (item 3) and unbounded reads (item 4), refused at config time
    ("limit-grid-size-schema-max", lambda d: {"grid.size": 20000}, 2, ["grid.size", "less than or equal to 4000"]),
    ("limit-grid-points-5000", lambda d: {"grid": {"rule": "trapezoid", "points": [i / 5000 for i in range(5001)]}}, 2, ["grid.points: a list of 5001 entries; at most 4000"]),
    ("limit-grid-points-200000", lambda d: {"grid": {"rule": "trapezoid", "points": [i / 2e5 for i in range(200_000)]}}, 2, ["larger than 256 KiB"]),
    ("limit-text-10000-chars", lambda d: {"dataset.privacy_unit": "x" * 10_000}, 2, ["dataset.privacy_unit: text of 10000 characters; at most 4096"]),
    ("limit-text-50MB", lambda d: {"__text__": "dataset:\n  privacy_unit: " + "x" * 50_000_000 + "\n"}, 2, ["larger than 256 KiB"]),
    ("limit-config-dev-zero", lambda d: {"__path__": "/dev/zero"}, 2, ["config file '/dev/zero' is larger than 256 KiB"]),
    ("yaml-alias-bomb-summary", lambda d: {"__text__": _BOMB + "summary: *l9\n"}, 2, ["aliases (*l0) are not allowed", "line 2"]),
    ("yaml-alias-bomb-kernel-nu", lambda d: {"__text__": _BOMB + "kernel: {name: matern, nu: *l9, rho: 0.1}\n"}, 2, ["aliases (*", "not allowed"]),
    ("yaml-merge-key-alias", lambda d: {"__text__": "a: &x {k: 1}\nb:\n  <<: *x\n"}, 2, ["aliases (*x) are not allowed"]),
    # a second block pasted below the first: YAML keeps the last silently, which would charge epsilon 2 (trial G)
    ("yaml-repeated-top-level-key", lambda d: {"__text__": _example_text() + "privacy: {epsilon: 2.0}\n"}, 2,
     ["the key 'privacy' appears twice in one mapping (first at line", "remove or merge one"]),
    ("yaml-repeated-nested-key", lambda d: {"__text__": _example_text().replace("  epsilon: 1.0\n", "  epsilon: 1.0\n  epsilon: 2.0\n", 1)}, 2,
     ["the key 'epsilon' appears twice"]),
    # --- messages never quote data (item 5): no header row, or a file that is not a table
    ("data-csv-without-header", lambda d: _csv(d, "nohead.csv", GOOD_CSV.split(b"\n", 1)[1].replace(b"0,1,1510", b"SECRET-0,1,999")), 2, ["nohead.csv", "missing column(s) ['monday_index', 'half_hour', 'demand_mw']", "header has 3 column(s)"]),
    ("data-csv-numeric-first-row", lambda d: _csv(d, "nums.csv", GOOD_CSV.split(b"\n", 1)[1]), 2, ["nums.csv", "does the file have a header row?"]),
    ("data-not-a-table", lambda d: _csv(d, "notes.txt", b"SECRET first line of a letter, 999 words\nsecond line\n"), 2, ["notes.txt", "missing column(s)", "header has 2 column(s)"]),
    ("data-duplicate-in-first-row", lambda d: _csv(d, "dupfirst.csv", b"999,999,SECRET\n" + GOOD_CSV.split(b"\n", 1)[1]), 2, ["dupfirst.csv", "missing column(s)"]),
    # --- ledger that is not one (item 6)
    ("ledger-random-bytes", lambda d: {"__ledger__": _ledger_file(d, os.urandom(8192))}, 1, ["cannot be opened: not an fdp ledger", "file is not a database"]),
    ("ledger-text-file", lambda d: {"__ledger__": _ledger_file(d, b"SECRET not a database\n" * 100)}, 1, ["cannot be opened: not an fdp ledger"]),
    ("ledger-half-truncated", lambda d: {"__ledger__": _ledger_file(d, _half_ledger(d))}, 1, ["cannot be opened: not an fdp ledger"]),
    ("ledger-version-not-a-number", lambda d: {"__ledger__": _ledger_with(d, "UPDATE fdp_meta SET value='two' WHERE key='schema_version'")}, 1, ["not an fdp ledger (its schema version is not a number)"]),
    ("ledger-other-database", lambda d: {"__ledger__": _ledger_file(d, _other_sqlite(d))}, 1, ["not an fdp ledger (the database has other tables"]),
    ("ledger-in-memory", lambda d: {"__ledger__": "sqlite:///:memory:"}, 1, ["in-memory database", "give a file"]),
    ("ledger-in-memory-default", lambda d: {"__ledger__": "sqlite://"}, 1, ["in-memory database"]),
    # --- output directory (item 8)
    ("out-holds-other-files", lambda d: {"__out__": str(_dir_with(d, "notes.txt"))}, 2, ["--out", "holds files that are not a release's", "Nothing was charged"]),
    ("out-name-too-long", lambda d: {"__out__": str(d / ("o" * 250))}, 2, ["--out", "is too long", "Nothing was charged"]),
    # --- environment (before anything is charged)
    ("env-out-not-writable", lambda d: {"__out__": str(_file(d) / "sub")}, 2, ["--out", "is not a directory", "Nothing was charged"]),
    ("env-ledger-unreachable", lambda d: {"__ledger__": f"sqlite:///{_file(d)}/sub/l.sqlite"}, 2, ["ledger directory", "does not exist", "check --ledger"]),
    ("env-ledger-bad-url", lambda d: {"__ledger__": "nosuchdb://x"}, 2, ["names a nosuchdb database", "SQLite", "PostgreSQL"]),
]


_BOMB = "".join(f"l{i}: &l{i} [{', '.join([f'*l{i - 1}'] * 9)}]\n" if i else "l0: &l0 [lol, lol, lol, lol, lol, lol, lol, lol, lol]\n"
                for i in range(10))


def _ledger_file(d: Path, content: bytes) -> str:
    path = d / "bad-ledger.sqlite"
    path.write_bytes(content)
    return f"sqlite:///{path}"


def _good_ledger(d: Path) -> Path:
    path = d / "good-ledger.sqlite"
    Ledger(f"sqlite:///{path}").set_budget(DATASET, 5.0)
    return path


def _half_ledger(d: Path) -> bytes:
    data = _good_ledger(d).read_bytes()
    return data[: len(data) // 2]


def _ledger_with(d: Path, sql: str) -> str:
    path = _good_ledger(d)
    with sqlite3.connect(path) as conn:
        conn.execute(sql)
    return f"sqlite:///{path}"


def _other_sqlite(d: Path) -> bytes:
    path = d / "other.sqlite"
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE customers (name TEXT)")
    return path.read_bytes()


def _dir_with(d: Path, name: str) -> Path:
    out = d / "busy-out"
    out.mkdir()
    (out / name).write_text("mine")
    return out


def _file(d: Path) -> Path:
    blocker = d / "a-file"
    blocker.write_text("")
    return blocker


@pytest.mark.parametrize(("case", "build", "code", "needles"), ROWS, ids=[r[0] for r in ROWS])
def test_bad_input_table(shared: dict[str, Any], tmp_path: Path, capfd: pytest.CaptureFixture[str],
                         case: str, build: Builder, code: int, needles: list[str]) -> None:
    url = shared["url"]
    spec = build(tmp_path)
    special = {k: spec.pop(k) for k in list(spec) if k.startswith("__")}
    if "__path__" in special:
        config = Path(special["__path__"])
    else:
        config = _config(tmp_path, case, spec, text=special.get("__text__"))
    out = Path(special.get("__out__", tmp_path / "out"))
    before = _snapshot(url)
    exit_code = main(["release", str(config), "--out", str(out), "--ledger", special.get("__ledger__", url),
                      "--release-id", special.get("__rid__", f"bad-{case}"),
                      *(["--period", special["__period__"]] if "__period__" in special else [])])
    captured = capfd.readouterr()
    err = captured.err
    assert exit_code == code, err
    message = err[err.rindex("fdp: error: "):]
    for needle in needles:
        assert needle in message, f"{needle!r} not in {message!r}"
    assert "Traceback" not in captured.err + captured.out
    assert "SECRET" not in captured.err + captured.out and "999" not in message
    assert _snapshot(url) == before  # nothing recorded was changed, nothing was charged
    assert not (out / "manifest.json").exists() and not (out / "release.parquet").exists()
    assert not (tmp_path.parent / "escaped").exists() and not (Path("releases") / "a").exists()
    if case in PLAN_REFUSES:  # read before Prefect starts: one clean message, no flow run and its task-failure logs
        assert "flow run" not in err.lower() and "Task run" not in err, err


#: The file and data cases `fdp plan` refuses too, with the release's message: it reads and aligns the data as the
#: release does (a new user's plan passed data with every time outside time_domain, which the release refused).
#: A streaming engine's parts are read by the release's own pass only.
PLAN_REFUSES = [r[0] for r in ROWS if r[0].startswith(("file-", "data-")) and not r[0].endswith("-streaming")]


@pytest.mark.parametrize("case", PLAN_REFUSES)
def test_plan_refuses_what_the_release_would_refuse_with_its_message(tmp_path: Path, capfd: pytest.CaptureFixture[str],
                                                                    case: str) -> None:
    """A new user's `fdp plan` exited 0 on a misspelled value column and on text in it; `fdp release` then refused."""
    _, build, code, needles = next(r for r in ROWS if r[0] == case)
    spec = build(tmp_path)
    assert not any(k.startswith("__") for k in spec), case
    assert main(["plan", str(_config(tmp_path, case, spec)), "--ledger", f"sqlite:///{tmp_path / 'l.sqlite'}"]) == code
    err = capfd.readouterr().err
    message = err[err.rindex("fdp: error: "):]
    for needle in needles:
        assert needle in message, f"{needle!r} not in {message!r}"
    assert "SECRET" not in err and not (tmp_path / "l.sqlite").exists()


# ------------------------------------------------------------------ handled value problems (one release)


def _messy_table() -> tuple[pa.Table, dict[str, int]]:
    """The electricity data plus units with every value-level problem the rules handle."""
    base = pd.read_parquet(DATA).astype({"half_hour": "float64"})
    h = np.arange(1.0, 49.0)
    curve = 1500.0 + 100.0 * np.sin(h / 8)
    extra: list[pd.DataFrame] = []

    def unit(uid: int, t: np.ndarray, v: np.ndarray) -> None:
        extra.append(pd.DataFrame({"monday_index": uid, "half_hour": t, "demand_mw": v}))

    v = curve.copy(); v[9] = np.nan; unit(9001, h, v)                                   # one NaN value
    v = curve.copy(); v[19], v[20] = np.inf, -np.inf; unit(9002, h, v)                  # +-inf values
    unit(9003, h, np.full(48, 1e308))                                                    # extreme magnitude: clipped
    unit(9004, h[::-1], curve[::-1])                                                     # unsorted times
    unit(9005, np.r_[h, 5.0, 5.0, 5.0], np.r_[curve, 1.0, 2.0, 3.0])                     # duplicate (unit, t), other values
    unit(9006, np.r_[h, 60.0, -3.0, 0.0, 49.0], np.r_[curve, 1.0, 1.0, 1.0, 1.0])       # times outside the domain
    unit(9007, np.array([10.0]), np.array([1500.0]))                                     # a single observation
    unit(9008, h, np.full(48, np.nan))                                                   # all values NaN
    unit(9009, np.array([1.0, 2.5, 7.25, 30.0, 48.0]), np.array([1.0, 2.0, 3.0, 4.0, 5.0]) + 1500)  # ragged
    unit(9010, np.r_[h, np.nan, np.nan], np.r_[curve, 1.0, 2.0])                         # NaN times
    unit(9011, h[:40], curve[:40])                                                       # does not cover the grid
    frame = pd.concat([base, *extra], ignore_index=True)
    # rows outside the time domain get a NaN time when rescaled, so n_rows_nonfinite counts them too
    expected = {"n": 508 + 11, "n_rows_nonfinite": 1 + 2 + 48 + 2 + 4, "n_rows_outside_time_domain": 4,
                "n_duplicates_merged": 3, "n_unalignable_units": 3}
    return pa.Table.from_pandas(frame, preserve_index=False), expected


def test_value_problems_are_handled_counted_internally_and_never_published(tmp_path: Path, capfd: pytest.CaptureFixture[str]) -> None:
    url = f"sqlite:///{tmp_path / 'ledger.sqlite'}"
    table, expected = _messy_table()
    spec = _parquet(tmp_path, "messy.parquet", table)
    out = tmp_path / "out"
    assert _run(_config(tmp_path, "messy", spec), out, url, "messy-1") == 0, capfd.readouterr().err
    manifest_text = (out / "manifest.json").read_text()
    manifest = json.loads(manifest_text)
    assert manifest["n"] == expected["n"]  # unalignable units stay in n (zero curve)
    (record,) = Ledger(url).releases()
    counts = record.internal["counts"]
    for key in ("n_rows_nonfinite", "n_rows_outside_time_domain", "n_duplicates_merged", "n_unalignable_units"):
        assert counts[key] == expected[key], key
    assert counts["n_clipped"] >= 1 and counts["n_rows"] == table.num_rows
    for key in counts:  # the counts go to the internal ledger entry only
        assert key not in manifest_text
    logs = "".join(capfd.readouterr())
    for key, value in counts.items():
        assert f"{key}" not in logs and f"{value} clipped" not in logs


# ------------------------------------------------------------------ faults during and after the charge


def test_ledger_locked_by_another_process_exits_1_and_changes_nothing(
    shared: dict[str, Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    url = shared["url"]
    real_engine = ledger_store._engine
    monkeypatch.setattr(ledger_store, "_engine", lambda u, **kw: sa.create_engine(u, connect_args={"timeout": 0.5}) if u.startswith("sqlite") else real_engine(u, **kw))
    before = _snapshot(url)
    blocker = sqlite3.connect(url.removeprefix("sqlite:///"), isolation_level=None)
    blocker.execute("BEGIN EXCLUSIVE")  # another process holds the database
    try:
        code = _run(_config(tmp_path, "locked"), tmp_path / "out", url, "locked-1")
    finally:
        blocker.execute("ROLLBACK")
        blocker.close()
    err = capfd.readouterr().err
    assert code == 1, err
    assert "ledger" in err and "locked" in err
    assert _snapshot(url) == before


def test_a_release_on_a_ledger_whose_trail_does_not_verify_exits_1_before_any_noise(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    """Trial U, M1: a release on a ledger with one audit payload damaged charged, drew noise and published. It now
    exits 1 with the first problem named and the way out, nothing charged, no folder written."""
    url = f"sqlite:///{tmp_path / 'ledger.sqlite'}"
    assert main(["budget", "set", DATASET, "--epsilon", "50", "--ledger", url]) == 0
    with sa.create_engine(url).begin() as conn:
        conn.execute(sa.text("UPDATE fdp_audit SET payload = '{\"epsilon\": ' WHERE seq = 1"))
    before = _snapshot(url)
    code = _run(_config(tmp_path, "damaged"), tmp_path / "out", url, "damaged-1")
    err = capfd.readouterr().err
    assert code == 1, err
    assert "audit trail does not verify" in err and "audit entry 1: content does not match its hash" in err
    assert "nothing was charged" in err and "fdp audit verify" in err and "Backing up the ledger" in err
    assert _snapshot(url) == before and not (tmp_path / "out").exists()
    assert "Flow run" not in err and "temporary server" not in err  # trial Y: refused before Prefect starts
    # trial Y: `budget show` still shows the figures, with a warning that they cannot be trusted (exit 0)
    assert main(["budget", "show", "--ledger", url]) == 0
    shown_err = capfd.readouterr().err
    assert shown_err.startswith("fdp: warning: the ledger's audit trail does not verify (")
    assert "the figures below cannot be trusted" in shown_err


def test_ledger_lost_after_the_charge_keeps_the_reservation_and_a_rerun_resumes_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    """The ledger becomes unavailable between the charge and the noise: nothing is lost or double-charged."""
    url = f"sqlite:///{tmp_path / 'ledger.sqlite'}"
    config = _config(tmp_path, "c")
    from fdpcore.errors import LedgerError

    def unavailable(self: Ledger, release_id: str) -> None:
        raise LedgerError("ledger sqlite:///... is unavailable (database is locked); nothing was changed")

    with monkeypatch.context() as m:
        m.setattr(Ledger, "mark_noised", unavailable)
        m.setattr(Ledger, "cancel", unavailable)
        assert _run(config, tmp_path / "out", url, "lost-1") == 1
    err = capfd.readouterr().err
    assert "still holds a reservation" in err and "--release-id lost-1" in err
    (row,) = Ledger(url).releases()
    assert row.state == "reserved"
    spent = Ledger(url).budgets()[0].spent
    capfd.readouterr()
    assert _run(config, tmp_path / "out", url, "lost-1") == 0  # resumes the reservation
    out = capfd.readouterr().out
    assert Ledger(url).budgets()[0].spent == spent  # charged once
    # trial U, L4: the resumed run says so; its `charged:` line is not read as a second charge
    assert "this run resumed its reservation and charged nothing more" in out
    assert "(by the earlier run whose reservation this one resumed; nothing more now)" in out
    assert [r.state for r in Ledger(url).releases()] == ["published"]
    assert Ledger(url).verify() == []


def test_ledger_unreachable_after_the_charge_names_every_state_it_may_hold(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    """Trial P (M1): PostgreSQL stopped right after the charge; the run said only 'cannot be opened ... check --ledger'
    (the URL had worked seconds before) while the ledger held the reservation. It now says the ledger went away during
    the run and gives each crash-table row it may have left, without the misleading hint."""
    url = f"sqlite:///{tmp_path / 'ledger.sqlite'}"
    config = _config(tmp_path, "c")
    from fdpcore.errors import LedgerError

    down = LedgerError("ledger postgresql://fdp@db/ledger cannot be opened (server closed the connection "
                       "unexpectedly); check --ledger / FDP_LEDGER_URL")
    real_get = Ledger.get
    state = {"down": False}

    def stopped(self: Ledger, release_id: str) -> None:
        state["down"] = True
        raise down

    def get(self: Ledger, release_id: str) -> Any:
        if state["down"]:
            raise down
        return real_get(self, release_id)

    with monkeypatch.context() as m:
        m.setattr(Ledger, "mark_noised", stopped)
        m.setattr(Ledger, "cancel", stopped)
        m.setattr(Ledger, "get", get)
        assert _run(config, tmp_path / "out", url, "lost-2") == 1
    err = capfd.readouterr().err
    message = err[err.rindex("fdp: error: "):]
    assert "the ledger became unreachable during this run (it was reachable when the run started)" in message
    assert "re-run with --release-id lost-2" in message and "`fdp budget cancel lost-2`" in message
    assert "run again with a new --release-id" in message and "check --ledger" not in message
    assert [r.state for r in Ledger(url).releases()] == ["reserved"]  # what the message told the operator to check


def test_disk_full_during_publish_keeps_the_charge_and_a_rerun_rewrites_the_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    url = f"sqlite:///{tmp_path / 'ledger.sqlite'}"
    out = tmp_path / "out"
    config = _config(tmp_path, "c")
    real_fsync = os.fsync

    def full(fd: int) -> None:  # the disk fills up while the second release file is being written
        if "fdp-publish" in os.readlink(f"/proc/self/fd/{fd}") and os.readlink(f"/proc/self/fd/{fd}").endswith(".png"):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        real_fsync(fd)

    with monkeypatch.context() as m:
        m.setattr(fdpcore.io.files.os, "fsync", full)
        assert _run(config, out, url, "full-1") == 1
    err = capfd.readouterr().err
    assert "the disk is full" in err and "No space left on device" in err and "no file of it was published" in err
    assert "IS published in the ledger" in err and "--release-id full-1" in err
    assert not out.exists()  # all or nothing: no release.parquet without its manifest
    assert [p.name for p in tmp_path.iterdir() if "fdp-publish" in p.name] == []  # no staging directory left
    (row,) = Ledger(url).releases()
    assert row.state == "published"  # noise was drawn: the charge is final
    spent = Ledger(url).budgets()[0].spent
    assert _run(config, out, url, "full-1") == 0
    assert Ledger(url).budgets()[0].spent == spent  # nothing charged again
    manifest = json.loads((out / "manifest.json").read_text())
    import hashlib

    assert manifest["outputs"][0]["sha256"] == hashlib.sha256((out / "release.parquet").read_bytes()).hexdigest()


def test_prefect_api_unreachable_exits_1_before_the_ledger_is_touched(tmp_path: Path) -> None:
    """In a subprocess: PREFECT_API_URL must be set before Prefect is imported."""
    url = f"sqlite:///{tmp_path / 'ledger.sqlite'}"
    config = _config(tmp_path, "c")
    env = {**os.environ, "PREFECT_API_URL": "http://127.0.0.1:9/api", "FDP_STATE_DIR": str(tmp_path / "state")}
    proc = subprocess.run(
        [sys.executable, "-c", "import sys; from fdp.flows.cli import main; sys.exit(main(sys.argv[1:]))",
         "release", str(config), "--out", str(tmp_path / "out"), "--ledger", url, "--release-id", "p-1"],
        env=env, capture_output=True, text=True, timeout=300, check=False,
    )
    assert proc.returncode == 1, proc.stderr
    assert "Prefect API at http://127.0.0.1:9/api cannot be reached" in proc.stderr
    assert "PREFECT_API_URL" in proc.stderr and "Nothing was charged" in proc.stderr
    assert "Traceback" not in proc.stderr
    assert not (tmp_path / "ledger.sqlite").exists()  # the ledger was never opened


def test_boolean_epsilon_is_rejected(tmp_path: Path, capfd: pytest.CaptureFixture[str]) -> None:
    url = f"sqlite:///{tmp_path / 'ledger.sqlite'}"
    assert _run(_config(tmp_path, "c", {"privacy.epsilon": True}), tmp_path / "out", url, "b-1") == 2


def test_failed_first_run_leaves_no_dataset_row(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'ledger.sqlite'}"
    assert _run(_config(tmp_path, "c", {"dataset.value_column": "nope"}), tmp_path / "out", url, "f-1") == 2
    assert Ledger(url).budgets() == []


# ------------------------------------------------------------------ issue 18: hardening, round 2


def _subprocess_env(tmp_path: Path, **extra: str) -> dict[str, str]:
    from prefect.settings import PREFECT_API_URL

    return {**os.environ, "PREFECT_API_URL": str(PREFECT_API_URL.value()), "FDP_STATE_DIR": str(tmp_path / "state"),
            "PREFECT_SERVER_ANALYTICS_ENABLED": "false", **extra}


def _fdp(*args: str) -> list[str]:
    return [sys.executable, "-c", "import sys; from fdp.flows.cli import main; sys.exit(main(sys.argv[1:]))", *args]


def test_past_periods_cannot_sidestep_the_monthly_allowance(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Item 2: with 1 per month set today, charging past months gives no extra release."""
    from fdpcore.errors import ConfigError
    from fdpcore.ledger import current_period

    url = f"sqlite:///{tmp_path / 'ledger.sqlite'}"
    led = Ledger(url)
    led.set_budget("ds", 12.0, period="month", epsilon_per_period=1.0)
    kw = dict(dataset_id="ds", epsilon=1.0, delta=0.0, config_sha256="0" * 64, summary="mean", mechanism="iclp_qr",
              sensitivity_formula="s", budget_splits=[{"name": "mean", "epsilon": 1.0, "delta": 0.0}], provenance={},
              internal={})
    now = current_period()
    led.reserve(release_id="r-now", period=now, **kw)
    year, month = map(int, now.split("-"))
    previous = f"{year - (month == 1)}-{(month - 2) % 12 + 1:02d}"
    for rid, period in (("r-prev", previous), ("r-1999", "1999-01"), ("r-2000", "2000-06")):
        with pytest.raises(ConfigError, match=r"is before the budget policy of dataset 'ds', in force since"):
            led.reserve(release_id=rid, period=period, **kw)
    assert [r.release_id for r in led.releases()] == ["r-now"]
    # a policy set in the past lets a late run go back max_late_periods (default 1), and no further
    with monkeypatch.context() as m:
        m.setattr(ledger_store, "_now", lambda: "2020-01-01T00:00:00.000000+00:00")
        led.set_budget("old", 12.0, period="month", epsilon_per_period=1.0)
    led.reserve(release_id="o-prev", period=previous, **{**kw, "dataset_id": "old"})
    too_late = f"{year - (month <= 2)}-{(month - 3) % 12 + 1:02d}"
    with pytest.raises(ConfigError, match=r"2 periods before the current one .* at most 1 .*--max-late-periods"):
        led.reserve(release_id="o-2", period=too_late, **{**kw, "dataset_id": "old"})
    # trial T: the read-only precheck (run before the data are read) refuses the same periods, not only the charge
    pre = {k: kw[k] for k in ("epsilon", "delta", "config_sha256")}
    with pytest.raises(ConfigError, match=r"2 periods before the current one"):
        led.precheck(release_id="o-2", dataset_id="old", period=too_late, **pre)
    with pytest.raises(ConfigError, match=r"is before the budget policy of dataset 'ds'"):
        led.precheck(release_id="r-1999", dataset_id="ds", period="1999-01", **pre)
    # the officer can allow more; the setting is part of the audited policy
    assert main(["budget", "set", "old", "--epsilon", "12", "--period", "month", "--per-period", "1",
                 "--max-late-periods", "3", "--ledger", url]) == 0
    events = [e for e in led.audit_events() if e["event"] == "budget.set"]
    assert events[-1]["payload"]["max_late_periods"] == 3
    assert led.verify() == []
    ledger_store_sql = sa.create_engine(url)
    with ledger_store_sql.begin() as conn:  # edited out of band: caught
        conn.execute(sa.text("UPDATE fdp_datasets SET max_late_periods = 600 WHERE dataset_id = 'old'"))
    assert led.verify() == ["dataset 'old': budget differs from its audit trail (edited out of band)"]


def test_read_only_commands_open_the_ledger_read_only(shared: dict[str, Any], tmp_path: Path,
                                                      capfd: pytest.CaptureFixture[str]) -> None:
    """Item 6: an auditor's read-only copy (file and directory read-only) can be verified, listed and exported,
    and the commands change no byte of it."""
    import hashlib
    import shutil

    copy_dir = tmp_path / "audit-copy"
    copy_dir.mkdir()
    copy = copy_dir / "ledger.sqlite"
    shutil.copy(shared["url"].removeprefix("sqlite:///"), copy)
    digest = hashlib.sha256(copy.read_bytes()).hexdigest()
    os.chmod(copy, 0o444)
    os.chmod(copy_dir, 0o555)
    url = f"sqlite:///{copy}"
    try:
        for args in (["audit", "verify"], ["audit", "list"], ["audit", "show", "existing"], ["audit", "export"],
                     ["audit", "export", "--format", "csv"], ["budget", "show"], ["budget", "show", "--json"]):
            assert main([*args, "--ledger", url]) == 0, capfd.readouterr().err
        out = capfd.readouterr().out
        assert "ledger intact" in out and "existing" in out
    finally:
        os.chmod(copy_dir, 0o755)
        os.chmod(copy, 0o644)
    assert hashlib.sha256(copy.read_bytes()).hexdigest() == digest
    assert sorted(p.name for p in copy_dir.iterdir()) == ["ledger.sqlite"]  # no journal or lock file left
    assert main(["budget", "show", "--ledger", f"sqlite:///{tmp_path / 'none.sqlite'}"]) == 0  # no ledger yet: empty


def test_ids_in_tables_print_on_one_line(tmp_path: Path, capfd: pytest.CaptureFixture[str]) -> None:
    """Item 1: `budget set` refuses an id that could fake a row; ids stored before the rule print escaped."""
    url = f"sqlite:///{tmp_path / 'ledger.sqlite'}"
    assert main(["budget", "set", "../x\nfake", "--epsilon", "1", "--ledger", url]) == 2
    assert "dataset id ('../x\\nfake') must be 1-128 letters" in capfd.readouterr().err
    led = Ledger(url)
    led.set_budget("ds", 1.0)
    with sa.create_engine(url).begin() as conn:  # a row written by an older fdp, before ids were checked
        conn.execute(sa.text("UPDATE fdp_datasets SET dataset_id = 'ds\nfake   1.0' WHERE dataset_id = 'ds'"))
    assert main(["budget", "show", "--ledger", url]) == 0
    out = capfd.readouterr().out
    assert len(out.strip().splitlines()) == 2 and "'ds\\nfake   1.0'" in out


def test_config_json_form_bounded_by_prefect_parameter_limit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                             capfd: pytest.CaptureFixture[str]) -> None:
    """Item 3: a config whose JSON form would not fit Prefect's parameter limit exits 2 at config time."""
    import fdp.flows.config

    monkeypatch.setattr(fdp.flows.config, "MAX_CONFIG_JSON_BYTES", 1024)
    url = f"sqlite:///{tmp_path / 'ledger.sqlite'}"
    assert _run(_config(tmp_path, "c"), tmp_path / "out", url, "json-1") == 2
    assert "its JSON form is 1 KiB; at most 1 KiB fit a Prefect flow-run parameter" in capfd.readouterr().err
    assert not (tmp_path / "ledger.sqlite").exists()


def test_publish_is_atomic_removes_stale_temporaries_and_follows_the_umask(tmp_path: Path,
                                                                         capfd: pytest.CaptureFixture[str]) -> None:
    """Item 8: a killed publish's staging directory and temporary files are removed by the re-run; the files
    get the user's umask (mkstemp alone gives 0600)."""
    url = f"sqlite:///{tmp_path / 'ledger.sqlite'}"
    out = tmp_path / "out"
    out.mkdir()
    (out / ".release.parquet.abc123.tmp").write_bytes(b"torn")  # left by a killed publish (old layout)
    (tmp_path / ".out.fdp-publish-deadbeef").mkdir()  # left by a killed publish
    (tmp_path / ".out.fdp-publish-deadbeef" / "release.parquet").write_bytes(b"torn")
    old = os.umask(0o022)
    try:
        assert _run(_config(tmp_path, "c"), out, url, "umask-1") == 0, capfd.readouterr().err
        assert _run(_config(tmp_path, "c"), out, url, "umask-1") == 0  # re-run: the directory is replaced whole
    finally:
        os.umask(old)
    assert sorted(p.name for p in out.iterdir()) == ["manifest.json", "release.parquet", "release.png"]
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".out.")] == []
    assert {oct(p.stat().st_mode & 0o777) for p in out.iterdir()} == {"0o644"}
    assert oct(out.stat().st_mode & 0o777) == "0o755"


def test_memory_running_out_is_named_as_such(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                             capfd: pytest.CaptureFixture[str]) -> None:
    """Item 10: Arrow running out of memory is reported as memory, not as an unreadable file (exit 1)."""
    import fdpcore.io.tables

    def no_memory(*args: Any, **kwargs: Any) -> None:
        raise pa.ArrowMemoryError("malloc of size 1048576 failed")

    url = f"sqlite:///{tmp_path / 'ledger.sqlite'}"
    monkeypatch.setattr(fdpcore.io.tables.pq, "read_table", no_memory)
    assert _run(_config(tmp_path, "c"), tmp_path / "out", url, "mem-1") == 1
    err = capfd.readouterr().err
    assert "electricity_monday.parquet: memory ran out while reading the file" in err
    assert "not a readable Parquet file" not in err and "Traceback" not in err


@pytest.mark.parametrize("command", [["audit", "export"], ["audit", "export", "--format", "csv"], ["audit", "list"],
                                     ["budget", "show"], ["schema", "release-config"]])
def test_output_to_a_closed_pipe_ends_quietly(shared: dict[str, Any], command: list[str]) -> None:
    """Item 10: `fdp … | head` — the reader has gone before fdp writes: no BrokenPipeError, no traceback."""
    args = [*command, "--ledger", shared["url"]] if command[0] != "schema" else command
    proc = subprocess.Popen(_fdp(*args), stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.close()  # the reader is gone
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=120) == 141, err
    assert err == ""


def test_messages_never_quote_data_in_stderr_prefect_logs_or_storage(tmp_path: Path) -> None:
    """Item 5: a CSV without a header row and a file that is not a table: the sentinel values appear nowhere —
    not in stderr, not in the Prefect database or its storage (a fresh PREFECT_HOME, temporary server)."""
    sentinel = "SENTINEL7731"
    (tmp_path / "nohead.csv").write_text(f"{sentinel}-a,1,{sentinel}1\n" + "".join(
        f"u{u},{h},{1500 + h}\n" for u in range(3) for h in range(1, 49)))
    (tmp_path / "letter.txt").write_text(f"Dear {sentinel}, your balance is 7731\nregards\n")
    home = tmp_path / "prefect-home"
    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_")}
    env.update(PREFECT_HOME=str(home), FDP_STATE_DIR=str(tmp_path / "state"), PREFECT_SERVER_ANALYTICS_ENABLED="false")
    errs = []
    for name in ("nohead.csv", "letter.txt"):
        config = _config(tmp_path, name, {"dataset.path": str(tmp_path / name), "dataset.format": "csv"})
        proc = subprocess.run(_fdp("release", str(config), "--out", str(tmp_path / "out"), "--release-id", f"s-{name[:6]}"),
                              env=env, capture_output=True, text=True, timeout=600, check=False)
        assert proc.returncode == 2, proc.stderr
        assert "missing column(s)" in proc.stderr
        errs.append(proc.stdout + proc.stderr)
    assert not any(sentinel in e for e in errs)
    stored = [p for p in home.rglob("*") if p.is_file()]
    assert not any(p.suffix == ".db" for p in stored)  # refused before Prefect's server started: no run, no database
    assert [str(p) for p in stored if sentinel.encode() in p.read_bytes()] == []


def test_dask_worker_logs_an_fdp_error_without_a_traceback(tmp_path: Path) -> None:
    """Item 10: unsorted units under engine dask: the worker's log line names the problem, with no traceback."""
    d = tmp_path / "unsorted"
    d.mkdir()
    pd.read_parquet(DATA).iloc[::-1].to_parquet(d / "rev.parquet", index=False)
    config = _config(tmp_path, "c", {"dataset.path": str(d), "engine": {"name": "dask", "n_workers": 1}})
    proc = subprocess.run(_fdp("release", str(config), "--out", str(tmp_path / "out"), "--ledger",
                               f"sqlite:///{tmp_path / 'l.sqlite'}"),
                          env=_subprocess_env(tmp_path), capture_output=True, text=True, timeout=600, check=False)
    assert proc.returncode == 2, proc.stderr[-3000:]
    assert "rev.parquet: rows are not sorted by 'monday_index'" in proc.stderr
    assert "Traceback" not in proc.stderr + proc.stdout


def test_a_run_that_loses_the_noise_to_another_run_waits_and_explains(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                      capfd: pytest.CaptureFixture[str]) -> None:
    """Item 7: another run of the same id drew the noise first and never publishes (it was stopped): this run
    waits (FDP_WAIT_SECONDS), then says so, charged nothing, and gives the next step."""
    url = f"sqlite:///{tmp_path / 'ledger.sqlite'}"
    real = Ledger.mark_noised

    def other_run_first(self: Ledger, release_id: str) -> None:
        real(self, release_id)  # the other run's transition
        real(self, release_id)  # this run's: the row is no longer reserved

    monkeypatch.setattr(Ledger, "mark_noised", other_run_first)
    monkeypatch.setenv("FDP_WAIT_SECONDS", "1")
    assert _run(_config(tmp_path, "c"), tmp_path / "out", url, "race-1") == 1
    err = capfd.readouterr().err
    message = err[err.rindex("fdp: error: "):]
    assert "another run of release 'race-1' at the same time drew its noise" in message
    assert "this run charged nothing" in message and "--release-id race-1" in message
    assert "cannot go from" not in message and "Traceback" not in err
    (row,) = Ledger(url).releases()
    assert row.state == "noised" and Ledger(url).verify() == []
