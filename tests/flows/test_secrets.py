"""Secrets scan: several releases, then every public file, artifact, stored log line and console line
is searched for the non-private mean, raw values (canary values and unit ids planted in the data),
input fingerprints (hashes, exact min/max, row counts) and seeds. None may appear (MATH.md §12.4).
"""

from __future__ import annotations

import hashlib
import json
import re
import zlib
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest
import yaml
from fdp.flows.cli import main
from prefect.client.orchestration import get_client
from prefect.client.schemas.filters import ArtifactFilter, ArtifactFilterKey, LogFilter, LogFilterFlowRunId

from fdpcore.ledger import Ledger

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = yaml.safe_load((REPO / "examples" / "electricity_mean.yaml").read_text())
DATA = REPO / "examples" / "data" / "electricity_monday.parquet"
CANARY_UNIT = "canary-unit-7f3a9c"
CANARY_VALUES = [1777.123457, 2345.987651, 1234.567891]


def _canary_csv(path: Path) -> pd.DataFrame:
    """The electricity data as CSV with a curve column, plus one unit of planted, recognisable values."""
    frame = pd.read_parquet(DATA)
    frame["monday_index"] = "m" + frame["monday_index"].astype(str)
    frame["curve"] = 0
    h = np.arange(1, 49)
    canary = pd.DataFrame({"monday_index": CANARY_UNIT, "half_hour": h,
                           "demand_mw": np.resize(CANARY_VALUES, 48), "curve": 1})
    frame = pd.concat([frame, canary], ignore_index=True)
    frame.to_csv(path, index=False)
    return frame


def _config(tmp: Path, name: str, **dataset: Any) -> Path:
    cfg = yaml.safe_load(yaml.safe_dump(EXAMPLE))
    cfg["dataset"].update({"path": str(DATA), **dataset})
    path = tmp / f"{name}.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


def _numbers(text: str) -> set[str]:
    """Every decimal number in ``text`` with >= 4 significant digits, at 5 significant digits."""
    out = set()
    # numbers delimited as numbers (not digit runs inside ids, hashes, UUIDs or timestamps)
    for x in re.findall(r"(?<![\w.:-])-?(?:\d+\.\d+(?:[eE][-+]?\d+)?|\d{4,})(?![\w:-])", text):
        digits = x.lstrip("-").replace(".", "").split("e")[0].split("E")[0].lstrip("0")
        if len(digits) >= 4:
            out.add(f"{float(x):.5g}")
    return out


def _prefect_text(flow_run_ids: list[str], keys: list[str]) -> str:
    with get_client(sync_client=True) as client:
        logs = client.read_logs(log_filter=LogFilter(flow_run_id=LogFilterFlowRunId(any_=flow_run_ids)))
        arts = client.read_artifacts(artifact_filter=ArtifactFilter(key=ArtifactFilterKey(any_=keys)))
    assert logs and arts  # the scan must see something
    return "\n".join([*(log.message for log in logs), *(str(a.data) + str(a.description) for a in arts)])


def test_public_outputs_logs_and_artifacts_hold_no_secret(tmp_path: Path, capfd: pytest.CaptureFixture[str]) -> None:
    url = f"sqlite:///{tmp_path / 'ledger.sqlite'}"
    csv_path = tmp_path / "canary.csv"
    frame = _canary_csv(csv_path)
    runs = [
        (_config(tmp_path, "pq"), tmp_path / "out-pq", "sec-pq"),
        (_config(tmp_path, "csv", path=str(csv_path), format="csv", curve_column="curve"), tmp_path / "out-csv", "sec-csv"),
        (_config(tmp_path, "csv", path=str(csv_path), format="csv", curve_column="curve"), tmp_path / "out-csv2", "sec-csv"),
    ]
    for config, out, rid in runs:  # the third run re-publishes sec-csv from the ledger
        assert main(["release", str(config), "--out", str(out), "--ledger", url, "--release-id", rid]) == 0
    console = "".join(capfd.readouterr())

    # ---- what must stay secret
    wide = frame.pivot_table(index="monday_index", columns="half_hour", values="demand_mw").to_numpy()
    base = pd.read_parquet(DATA).pivot(index="monday_index", columns="half_hour", values="demand_mw").to_numpy()
    secrets = set()
    for w in (wide, base):
        mean = w.mean(axis=0)
        secrets |= {f"{v:.5g}" for v in np.r_[mean, (mean - 1500.0) / 1000.0, w.mean(), w.std(), np.median(w)]}
        secrets |= {f"{v:.5g}" for v in (w.min(), w.max()) if v not in (1000.0, 1500.0)}
    secrets |= {f"{v:.5g}" for v in CANARY_VALUES}
    secrets |= {str(len(frame)), str(len(pd.read_parquet(DATA)))}  # exact row counts
    secrets -= _numbers(yaml.safe_dump(EXAMPLE))  # public parameters (value_offset 1500, ...) may equal a statistic
    fingerprints = []
    for p in (DATA, csv_path):
        raw = p.read_bytes()
        fingerprints += [hashlib.sha256(raw).hexdigest(), hashlib.md5(raw).hexdigest(), hashlib.sha1(raw).hexdigest(),
                         f"{zlib.crc32(raw):08x}"]

    # ---- everything public
    public = [console]
    flow_run_ids = []
    for _, out, _ in runs:
        manifest_text = (out / "manifest.json").read_text()
        manifest = json.loads(manifest_text)
        flow_run_ids.append(manifest["provenance"]["flow_run_id"])
        table = pq.read_table(out / "release.parquet")
        public += [manifest_text, json.dumps({k.decode(): v.decode() for k, v in (table.schema.metadata or {}).items()})]
        released = table.to_pandas()
        # the released curve is private: never equal to a non-private mean, in source or scaled units
        for w in (wide, base):
            assert not np.allclose(released["value"].to_numpy(), w.mean(axis=0), rtol=1e-6)
        assert manifest["n"] in (508, 509)
    keys = ["adelaide-electricity-monday-mean-release-note", "adelaide-electricity-monday-mean-budget-splits"]
    public.append(_prefect_text(sorted(set(flow_run_ids)), keys))
    for record in Ledger(url).releases():
        public.append(json.dumps(record.public))  # what the ledger stores as published
    # binary files travel base64-encoded (ledger record, embedded plot); their contents are checked as
    # decoded tables above, and a 4-letter word or a 5-digit number turns up in random base64 by chance
    text = re.sub(r"[A-Za-z0-9+/]{120,}={0,2}", "<base64>", "\n".join(public))

    leaked = secrets & _numbers(text)
    assert not leaked, f"pre-noise values in public outputs: {sorted(leaked)[:5]}"
    assert CANARY_UNIT not in text
    for fp in fingerprints:
        assert fp not in text
    assert "seed" not in text.lower() and "random_state" not in text.lower()
    # the internal counts (data-dependent) reach the ledger only
    for key in ("n_unalignable_units", "n_clipped", "n_rows_nonfinite", "n_duplicates_merged"):
        assert key not in text
    assert Ledger(url).get("sec-csv").internal["counts"]["n_rows"] == len(frame)
