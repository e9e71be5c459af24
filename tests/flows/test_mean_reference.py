"""The mean release with a public reference curve (`centering`, preprocess.public_reference@1): shifted data
centred on the reference give the records of the original data; manifest, release note and plan say so; the local
streaming engine gives the in-memory sums exactly, a unit that cannot be aligned included."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from fdp.flows.cli import main
from fdp.flows.config import load_config
from fdp.tasks import clip_curves, load_curves
from fdp.tasks.mean import mean_reference, release_grid
from fdp.tasks.streaming import stream_curves
from flow_support import REPO, artifacts, memory_and_local_manifests, partition_parquet, release, write_config
from prefect import flow

from fdpcore.data.accumulate import accumulate_curves

EXAMPLE = REPO / "examples" / "electricity_mean.yaml"
DATA = REPO / "examples" / "data" / "electricity_monday.parquet"
REF = {"time": [0.5, 24.5, 48.5], "value": [1300.0, 1900.0, 1400.0], "source": "a published Monday profile"}


def _r(t: np.ndarray) -> np.ndarray:
    return np.interp(t, REF["time"], REF["value"])


@pytest.fixture
def data(tmp_path: Path) -> tuple[Path, Path]:
    """The electricity curves with one unit cut short (unalignable), and the same shifted by r(t) - value_offset."""
    df = pd.read_parquet(DATA)
    first = df["monday_index"].min()
    df = df[~((df["monday_index"] == first) & (df["half_hour"] > 10))]
    plain, shifted = tmp_path / "plain.parquet", tmp_path / "shifted.parquet"
    df.to_parquet(plain, index=False)
    df.assign(demand_mw=df["demand_mw"] + _r(df["half_hour"].to_numpy()) - 1500.0).to_parquet(shifted, index=False)
    return plain, shifted


@flow(persist_result=False)
def _records(plain: str, centred: str) -> tuple[object, object]:
    here = str(Path(plain).parent)
    return load_curves(load_config(plain), here), load_curves(load_config(centred), here)


def test_shifted_data_centred_on_the_reference_give_the_records_of_the_original(tmp_path: Path,
                                                                             data: tuple[Path, Path]) -> None:
    plain = write_config(tmp_path, EXAMPLE, data=data[0])
    centred = write_config(tmp_path, EXAMPLE, data=data[1], centering=REF)
    a, b = _records(str(plain), str(centred))
    assert a.counts == b.counts and a.counts["n_unalignable_units"] == 1  # type: ignore[attr-defined]
    assert np.allclose(a.data_matrix, b.data_matrix, rtol=0, atol=1e-12)  # type: ignore[attr-defined]
    assert not np.any(b.data_matrix[0])  # type: ignore[attr-defined]  # the unaligned unit stays 0: it contributes r
    # hence the same plan and the same summary: the release is the plain one plus r, in distribution
    ref = mean_reference(load_config(centred))  # type: ignore[arg-type]
    assert np.allclose(ref * 1000.0 + 1500.0, _r(release_grid(load_config(centred)).grid_points * 48.0 + 0.5))
    assert mean_reference(load_config(plain)) is None  # type: ignore[arg-type]


def test_release_with_a_reference_publishes_it_and_plan_and_note_say_so(
        tmp_path: Path, data: tuple[Path, Path], capsys: pytest.CaptureFixture[str]) -> None:
    ledger = f"sqlite:///{tmp_path / 'l.sqlite'}"
    # epsilon 200 (noise ~12 MW, plan below): the release's shape is then a check that cannot fail by chance
    cfg = write_config(tmp_path, EXAMPLE, data=data[1], centering=REF, release={"name": "ref-mean"},
                       privacy__epsilon=200.0, budget__epsilon=1000.0)
    assert main(["plan", str(cfg), "--json", "--epsilon", "1", "--ledger", ledger]) == 0
    report = json.loads(capsys.readouterr().out)
    assert "centred on the public reference curve (a published Monday profile" in report["rows"][0]["note"]
    assert any("released as the public reference curve (centering: a published Monday profile)" in a
               for a in report["assumptions"])
    assert release(cfg, tmp_path / "out", ledger, "ref-1") == 0
    m = json.loads((tmp_path / "out" / "manifest.json").read_text())
    c = m["parameters"]["centering"]
    assert (c["time"], c["value"], c["source"]) == (REF["time"], REF["value"], REF["source"])
    assert c["formula"] == "preprocess.public_reference@1" and "preprocess.public_reference@1" in m["formulas"]
    assert "contributes the public reference curve" in m["parameters"]["alignment"]
    out = pd.read_parquet(tmp_path / "out" / "release.parquet")
    assert np.allclose(out["band_upper"] - out["value"], out["value"] - out["band_lower"])
    # the release follows r + mean(plain) - value_offset (correlation 0.85 with r without noise; the noise's
    # E L2 error is ~12 MW against that curve's 300 MW spread), not the plain mean (correlation 0.51 with r)
    assert np.corrcoef(out["value"], _r(out["t_source"].to_numpy()))[0, 1] > 0.75
    (note,) = artifacts("ref-mean-release-note")
    assert "**Reference curve.** The curves were centred on a public reference curve (a published Monday profile)" in note
    assert note.index("**Reference curve.**") < note.index("**Accuracy")


def test_release_without_a_reference_is_unchanged(tmp_path: Path, data: tuple[Path, Path]) -> None:
    ledger = f"sqlite:///{tmp_path / 'l.sqlite'}"
    assert release(write_config(tmp_path, EXAMPLE, data=data[0]), tmp_path / "out", ledger, "plain-1") == 0
    m = json.loads((tmp_path / "out" / "manifest.json").read_text())
    assert "centering" not in m["parameters"] and "preprocess.public_reference@1" not in m["formulas"]
    assert "contributes the zero curve (the public reference)" in m["parameters"]["alignment"]


@flow(persist_result=False)
def _both(stream_path: str, memory_path: str) -> tuple[object, object]:
    config, mem_config = load_config(stream_path), load_config(memory_path)
    here = str(Path(stream_path).parent)
    streamed = stream_curves(config, here, center=mean_reference(config))  # type: ignore[arg-type]
    return streamed, clip_curves(load_curves(mem_config, here), mem_config)


def test_streamed_sums_with_a_reference_equal_the_in_memory_records(tmp_path: Path, data: tuple[Path, Path]) -> None:
    parts = partition_parquet(data[1], tmp_path / "parts", "monday_index", 3, 200, order=["monday_index", "half_hour"])
    cfg = write_config(tmp_path, EXAMPLE, data=parts, centering=REF, engine={"name": "local", "chunk_rows": 500})
    mem_cfg = write_config(tmp_path, EXAMPLE, data=data[1], centering=REF)
    streamed, mem = _both(str(cfg), str(mem_cfg))
    exact = accumulate_curves(mem.data_matrix, 1.0, release_grid(load_config(mem_cfg)).weights)  # type: ignore[attr-defined, arg-type]
    assert streamed.n_samples == mem.n_samples and streamed.sums.sum == exact.sum  # type: ignore[attr-defined]
    assert streamed.counts["n_unalignable_units"] == 1 == mem.counts["n_unalignable_units"]  # type: ignore[attr-defined]
    (tmp_path / "rel").mkdir()
    m, s = memory_and_local_manifests(tmp_path / "rel", write_config(tmp_path, EXAMPLE, centering=REF), data[1], parts)
    assert s["parameters"] == m["parameters"] and s["noise"] == m["noise"] and s["sensitivity"] == m["sensitivity"]
    assert set(s["formulas"]) - set(m["formulas"]) == {"preprocess.quantise_lattice@1"}
