"""Covariance release on a streaming engine (`engine.name: local`): exact sums and outer products chunk by chunk give
the in-memory path's sufficient statistics, the same plan and noise scale; the streaming config rule (Parquet
only) for covariance and FoSR."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from fdp.flows.config import load_config
from fdp.tasks import clip_curves, load_curves
from fdp.tasks.covariance import center_curves, covariance_center
from fdp.tasks.streaming import stream_curves
from flow_support import REPO, memory_and_local_manifests, partition_parquet, write_config
from prefect import flow

from fdpcore.basis.grids import midpoint_grid
from fdpcore.data.accumulate import accumulate_curves
from fdpcore.errors import ConfigError

EXAMPLE = REPO / "examples" / "electricity_covariance.yaml"
DATA = REPO / "examples" / "data" / "electricity_monday.parquet"


@pytest.fixture
def partitioned(tmp_path: Path) -> Path:
    """The electricity data split by unit into 3 files (each sorted by unit) with small row groups."""
    return partition_parquet(DATA, tmp_path / "electricity", "monday_index", 3, 500)


@flow(persist_result=False)
def _both(stream_path: str, memory_path: str, ledger_url: str) -> tuple[object, object]:
    config, mem_config = load_config(stream_path), load_config(memory_path)
    here = str(Path(stream_path).parent)
    center, _ = covariance_center(config, ledger_url)
    streamed = stream_curves(config, here, center=center, outer=True)
    mem = clip_curves(center_curves(load_curves(mem_config, here), center), mem_config)
    return streamed, mem


@pytest.mark.parametrize("centering", [{"kind": "public"}, {"kind": "sample_mean"}])
def test_streamed_covariance_statistics_equal_the_in_memory_records(tmp_path: Path, partitioned: Path,
                                                                     centering: dict[str, str]) -> None:
    cfg = write_config(tmp_path, EXAMPLE, data=partitioned, centering=centering,
                       engine={"name": "local", "chunk_rows": 333})
    mem_cfg = write_config(tmp_path, EXAMPLE, data=DATA, centering=centering)
    streamed, mem = _both(str(cfg), str(mem_cfg), f"sqlite:///{tmp_path / 'l.sqlite'}")
    exact = accumulate_curves(mem.data_matrix, 0.5, midpoint_grid(48).weights, outer=True)  # type: ignore[attr-defined]
    assert streamed.n_samples == mem.n_samples == 508  # type: ignore[attr-defined]
    assert streamed.sums.sum == exact.sum and streamed.sums.outer == exact.outer  # type: ignore[attr-defined]
    assert streamed.counts == mem.counts  # type: ignore[attr-defined]


def test_covariance_release_on_the_local_engine_matches_the_memory_plan(tmp_path: Path, partitioned: Path) -> None:
    m, s = memory_and_local_manifests(tmp_path, EXAMPLE, DATA, partitioned)
    assert s["n"] == m["n"] == 508
    assert s["sensitivity"] == m["sensitivity"] and s["noise"] == m["noise"]  # same plan, same noise scale
    assert s["parameters"] == m["parameters"]
    assert set(s["formulas"]) - set(m["formulas"]) == {"preprocess.quantise_lattice@1"}
    surface = pd.read_parquet(tmp_path / "s" / "release.parquet")["value"].to_numpy()
    assert surface.shape == (48 * 48,) and np.all(np.isfinite(surface))


@pytest.mark.parametrize(("example", "data"), [
    (EXAMPLE, DATA),
    (REPO / "examples" / "growth_fosr.yaml", REPO / "examples" / "data" / "berkeley_growth.parquet"),
], ids=["covariance", "fosr"])
def test_streaming_needs_parquet(tmp_path: Path, example: Path, data: Path) -> None:
    csv = tmp_path / "x.csv"
    pd.read_parquet(data).to_csv(csv, index=False)
    cfg = write_config(tmp_path, example, data=csv, dataset__format="csv", engine={"name": "local"})
    with pytest.raises(ConfigError, match="streams Parquet only"):
        load_config(cfg)


def test_an_unaligned_unit_counts_as_the_reference_centre_in_memory_and_streamed(tmp_path: Path) -> None:
    """preprocess.public_reference@1 for the covariance: a unit without an alignable curve stays the zero centred
    record (it contributes the reference itself, not (value_offset - r)(value_offset - r)^T); both engines agree."""
    df = pd.read_parquet(DATA)
    first = df["monday_index"].min()
    cut = tmp_path / "cut.parquet"
    df[~((df["monday_index"] == first) & (df["half_hour"] > 10))].to_parquet(cut, index=False)
    parts = partition_parquet(cut, tmp_path / "parts", "monday_index", 3, 200, order=["monday_index", "half_hour"])
    centering = {"kind": "public", "reference": {"time": [0.5, 24.5, 48.5], "value": [1300.0, 1900.0, 1400.0],
                                                 "source": "a published Monday profile"}}
    cfg = write_config(tmp_path, EXAMPLE, data=parts, centering=centering, engine={"name": "local", "chunk_rows": 500})
    mem_cfg = write_config(tmp_path, EXAMPLE, data=cut, centering=centering)
    streamed, mem = _both(str(cfg), str(mem_cfg), f"sqlite:///{tmp_path / 'l.sqlite'}")
    assert mem.counts["n_unalignable_units"] == 1 == streamed.counts["n_unalignable_units"]  # type: ignore[attr-defined]
    assert not np.any(mem.data_matrix[0])  # type: ignore[attr-defined]  # the unaligned (first) unit: 0 after centring
    assert np.all(np.abs(mem.data_matrix[1:]).sum(axis=1) > 0)  # type: ignore[attr-defined]  # the aligned ones moved
    exact = accumulate_curves(mem.data_matrix, 0.5, midpoint_grid(48).weights, outer=True)  # type: ignore[attr-defined]
    assert streamed.sums.sum == exact.sum and streamed.sums.outer == exact.outer  # type: ignore[attr-defined]


@pytest.mark.parametrize(("centering", "says"), [
    ({"kind": "public"}, "contributes the zero curve (the public reference)"),
    ({"kind": "public", "reference": {"time": [0.5, 48.5], "value": [1400.0, 1400.0], "source": "flat 1400 MW"}},
     "contributes the public reference curve (centering: flat 1400 MW)"),
    ({"kind": "private_mean", "release_id": "mean-1"}, "contributes the released private mean (centering.release_id mean-1)"),
])
def test_the_manifest_names_the_centre_an_unaligned_unit_counts_as(tmp_path: Path, centering: dict[str, object],
                                                                  says: str) -> None:
    from fdp.tasks.planning import alignment_rule

    assert alignment_rule(load_config(str(write_config(tmp_path, EXAMPLE, centering=centering)))).endswith(says)


def test_plan_of_a_streaming_config_on_a_directory_of_parts_counts_every_part(
        tmp_path: Path, partitioned: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Trial O (L3): `fdp plan` refused a streaming config whose dataset.path is a directory of parts ("does not exist
    or is not a file") while `fdp release` of it worked; its n is the parts' units (each unit lies in one part)."""
    import json

    from fdp.flows.cli import main

    cfg = write_config(tmp_path, EXAMPLE, data=partitioned, engine={"name": "local", "chunk_rows": 1000})
    mem = write_config(tmp_path, EXAMPLE, data=DATA, prefix="mem")
    assert main(["plan", str(cfg), "--json", "--ledger", f"sqlite:///{tmp_path / 'l.sqlite'}"]) == 0
    streamed = json.loads(capsys.readouterr().out)
    assert main(["plan", str(mem), "--json", "--ledger", f"sqlite:///{tmp_path / 'l.sqlite'}"]) == 0
    assert streamed["n"] == json.loads(capsys.readouterr().out)["n"] == 508
