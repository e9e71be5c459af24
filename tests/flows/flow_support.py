"""Helpers shared by the flow tests (importable: pyproject's pytest `pythonpath` lists tests/flows)."""

from __future__ import annotations

import json
import math
import re
import shlex
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import yaml
from fdp.flows.cli import main
from fdp.tasks._publish import unit_noun
from prefect.client.orchestration import get_client
from prefect.client.schemas.filters import ArtifactFilter, ArtifactFilterKey

REPO = Path(__file__).resolve().parents[2]


def write_config(tmp_path: Path, example: Path, *, data: Path | None = None, prefix: str = "cfg",
                 **overrides: object) -> Path:
    """Write a variant of an example config: absolute data path, ``a__b=v`` overrides (missing levels created)."""
    cfg = yaml.safe_load(example.read_text())
    cfg["dataset"]["path"] = str(data if data is not None else example.parent / cfg["dataset"]["path"])
    for dotted, value in overrides.items():
        node = cfg
        keys = dotted.split("__")
        for k in keys[:-1]:
            node = node.setdefault(k, {})
        node[keys[-1]] = value
    path = tmp_path / f"{prefix}-{len(list(tmp_path.glob(f'{prefix}-*.yaml')))}.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


def partition_parquet(source: Path, dest: Path, unit: str, parts: int, row_group_size: int,
                      order: list[str] | None = None) -> Path:
    """Split a long table by unit into ``parts`` Parquet files (disjoint unit ranges, small row groups).

    ``order`` sorts each file's rows (e.g. by unit then time) for a source that is not in streaming order.
    """
    df = pd.read_parquet(source)
    dest.mkdir()
    for i, part in enumerate(np.array_split(np.sort(df[unit].unique()), parts)):
        sub = df[df[unit].isin(part)]
        if order is not None:
            sub = sub.sort_values(order, kind="stable")
        sub.to_parquet(dest / f"part-{i}.parquet", row_group_size=row_group_size, index=False)
    return dest


def memory_and_local_manifests(tmp_path: Path, example: Path, data: Path, partitioned: Path) -> tuple[dict, dict]:
    """Release ``example`` in memory (on ``data``) and streamed (``engine: local`` on ``partitioned``); both manifests.

    Outputs go to ``tmp_path/m`` and ``tmp_path/s``; both runs charge one ledger in ``tmp_path``.
    """
    ledger = f"sqlite:///{tmp_path / 'l.sqlite'}"
    mem_cfg = write_config(tmp_path, example, data=data)
    loc_cfg = write_config(tmp_path, example, data=partitioned, engine={"name": "local", "chunk_rows": 1000})
    assert release(mem_cfg, tmp_path / "m", ledger, "m") == 0
    assert release(loc_cfg, tmp_path / "s", ledger, "s") == 0
    return tuple(json.loads((tmp_path / d / "manifest.json").read_text()) for d in ("m", "s"))  # type: ignore[return-value]


def run_walkthrough(name: str, tmp_path: Path, monkeypatch: Any, capsys: Any) -> tuple[str, list[str]]:
    """Run docs/getting-started.md's ``<!-- walkthrough: NAME -->`` bash block as written, in ``tmp_path`` with its own
    ledger; return the page's text and each command's stdout (every command must exit 0)."""
    text = (REPO / "docs" / "getting-started.md").read_text()
    block = re.search(rf"<!-- walkthrough: {name} -->\n```bash\n(.*?)```", text, re.S)
    assert block is not None, name
    commands = [shlex.split(ln) for ln in block.group(1).replace("\\\n", " ").splitlines()
                if ln.strip() and not ln.lstrip().startswith("#")]
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("FDP_LEDGER_URL", f"sqlite:///{tmp_path / 'ledger.sqlite'}")
    (tmp_path / "examples").symlink_to(REPO / "examples")
    outputs = []
    for words in commands:
        assert words[0] == ".venv/bin/fdp", words
        assert main(words[1:]) == 0, (words, capsys.readouterr().err)
        outputs.append(capsys.readouterr().out)
    return text, outputs


def release(config: Path, out: Path, ledger: str, release_id: str) -> int:
    """``fdp release`` in process; returns the exit code."""
    return main(["release", str(config), "--out", str(out), "--ledger", ledger, "--release-id", release_id])


def artifacts(key: str) -> list[str]:
    """The data of every Prefect artifact with ``key``."""
    with get_client(sync_client=True) as client:
        arts = client.read_artifacts(artifact_filter=ArtifactFilter(key=ArtifactFilterKey(any_=[key])))
    return [str(a.data) for a in arts]


def assert_claims_agree(manifest: dict[str, Any], record: Any) -> None:
    """The manifest's privacy block, its guarantee text, its budget splits and the ledger's charge state one cost."""
    assert record is not None and record.state == "published"
    p = manifest["privacy"]
    eps, delta = p["epsilon"], p["delta"]
    # ledger charge == privacy block == sum of the budget splits (same parts in both)
    assert (record.epsilon, record.delta) == (eps, delta)
    assert record.budget_splits == manifest["budget_splits"]
    assert math.fsum(s["epsilon"] for s in manifest["budget_splits"]) == eps
    assert math.fsum(s["delta"] for s in manifest["budget_splits"]) == delta
    assert record.public is not None and record.public["manifest"] == manifest
    text = p["guarantee"]
    non_private = bool(manifest["parameters"].get("non_private"))
    assert record.non_private == non_private
    if non_private:
        assert text.startswith("NOT differentially private")
        return
    assert "NOT" not in text
    if delta == 0:
        assert f"pure {eps:g}-differential privacy" in text and record.rho is None
    else:
        assert f"({eps:g}, {delta:g})-differential privacy" in text and "pure" not in text
        assert record.rho is not None and record.rho > 0  # a zCDP form exists (Gaussian mechanism)
    assert "replace-one" in text and p["adjacency"] == "replace-one" and f"for each {unit_noun(p['privacy_unit'])}" in text
    assert "Gibbs" not in text and "MCMC" not in text  # every published state is an exact draw
    sampler = manifest.get("sampler")
    if sampler is not None:
        assert sampler["exact"] is True and "exact draw" in text


def small_csv_release(tmp_path: Path, name: str, **extra: object) -> Path:
    """A small CSV dataset (30 units x 6 times) and its release config ``<name>.yaml`` (dataset id ``name``,
    tau 1, epsilon 1 of a proposed 3); ``extra`` adds top-level config blocks (e.g. ``release``)."""
    rows = ["unit,t,value"]
    for u in range(30):
        rows += [f"u{u},{t},{(u % 7) / 10 + t / 10}" for t in range(6)]
    (tmp_path / "curves.csv").write_text("\n".join(rows) + "\n")
    cfg = {
        "dataset": {"id": name, "path": "curves.csv", "format": "csv", "unit_column": "unit", "time_column": "t",
                    "value_column": "value", "privacy_unit": "one unit", "time_domain": [0.0, 5.0]},
        "grid": {"rule": "midpoint", "size": 8, "domain": [0.0, 1.0]},
        "estimator": "iclp_qr",
        "kernel": {"name": "matern", "nu": 1.5, "rho": 0.2},
        "clipping": {"tau": 1.0},
        "privacy": {"epsilon": 1.0},
        "budget": {"epsilon": 3.0},
        **extra,
    }
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path

