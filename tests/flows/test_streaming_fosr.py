"""FoSR release on a streaming engine (`engine.name: local`): curves and covariates chunk by chunk give the in-memory
path's sufficient statistics exactly, the same plan, sensitivities and noise scale; config rules."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from fdp.flows.config import load_config
from fdp.tasks import clip_curves, load_curves
from fdp.tasks.covariance import center_curves
from fdp.tasks.fosr import fosr_reference, load_covariates, plan_fosr, summarise_fosr_data, summarise_fosr_stream
from fdp.tasks.mean import release_grid
from fdp.tasks.streaming import stream_curves
from flow_support import REPO, memory_and_local_manifests, partition_parquet, release, write_config
from prefect import flow

from fdpcore.data.accumulate import accumulate_curves
from fdpcore.summaries.fosr import clip_covariates

EXAMPLE = REPO / "examples" / "growth_fosr.yaml"
DATA = REPO / "examples" / "data" / "berkeley_growth.parquet"


@pytest.fixture
def partitioned(tmp_path: Path) -> Path:
    """The growth data split by child into 3 files (each sorted by child) with small row groups."""
    return partition_parquet(DATA, tmp_path / "growth", "child_id", 3, 100, order=["child_id", "age_years"])


@flow(persist_result=False)
def _both(stream_path: str, memory_path: str) -> tuple[object, object, object, object]:
    config, mem_config = load_config(stream_path), load_config(memory_path)
    here = str(Path(stream_path).parent)
    streamed = stream_curves(config, here, center=fosr_reference(config), covariates=True)
    curves = load_curves(mem_config, here)
    plan = plan_fosr(mem_config, curves.n_samples)
    mem = clip_curves(center_curves(curves, plan.reference), mem_config)
    cov = load_covariates(mem_config, here, curves.n_samples)
    return streamed, mem, cov, (summarise_fosr_stream(streamed, plan), summarise_fosr_data(mem, cov, plan))


@pytest.mark.parametrize("overrides", [{}, {"intercept": False, "centering": None, "covariate_bound": 0.5}])
def test_streamed_fosr_statistics_equal_the_in_memory_units(tmp_path: Path, partitioned: Path,
                                                            overrides: dict[str, object]) -> None:
    cfg = write_config(tmp_path, EXAMPLE, data=partitioned, engine={"name": "local", "chunk_rows": 45}, **overrides)
    mem_cfg = write_config(tmp_path, EXAMPLE, data=DATA, **overrides)
    streamed, mem, cov, (s_data, m_data) = _both(str(cfg), str(mem_cfg))
    bound = float(overrides.get("covariate_bound", 1.0))  # type: ignore[arg-type]
    z, _ = clip_covariates(cov.data_matrix, bound)  # type: ignore[attr-defined]
    exact = accumulate_curves(mem.data_matrix, 1.0, _weights(mem_cfg), covariates=z,  # type: ignore[attr-defined]
                              covariate_bound=bound)
    sums = streamed.sums  # type: ignore[attr-defined]
    assert streamed.n_samples == mem.n_samples == 93  # type: ignore[attr-defined]
    assert sums.sum == exact.sum and sums.design.sum == exact.design.sum
    assert sums.design.outer == exact.design.outer and sums.design.cross == exact.design.cross
    assert streamed.counts == {**mem.counts, **cov.counts}  # type: ignore[attr-defined]
    # sex is +-1 (on the lattice) and the heights are clipped the same way: the summaries agree to rounding
    assert np.allclose(s_data.t1, m_data.t1, rtol=0, atol=1e-15)  # type: ignore[attr-defined]
    assert np.allclose(s_data.t2, m_data.t2, rtol=1e-9, atol=1e-9)  # type: ignore[attr-defined]


def _weights(cfg: Path) -> np.ndarray:
    return release_grid(load_config(cfg)).weights  # type: ignore[arg-type]


def test_fosr_release_on_the_local_engine_matches_the_memory_plan(tmp_path: Path, partitioned: Path) -> None:
    m, s = memory_and_local_manifests(tmp_path, EXAMPLE, DATA, partitioned)
    assert s["n"] == m["n"] == 93
    # same plan, same noise scales; each coefficient's stated noise is a function of the release's own T1~ and curves
    assert s["sensitivity"] == m["sensitivity"] and {k: v for k, v in s["noise"].items() if k != "coefficients"} == {
        k: v for k, v in m["noise"].items() if k != "coefficients"}
    drawn = {"safe_inverse_pass_through"}  # a function of each release's own noisy T1~ (postprocess.fosr.safe_inverse@1)
    assert {k: v for k, v in s["parameters"].items() if k not in drawn} == {
        k: v for k, v in m["parameters"].items() if k not in drawn} and s["budget_splits"] == m["budget_splits"]
    assert len(s["parameters"]["safe_inverse_pass_through"]) == len(m["parameters"]["safe_inverse_pass_through"]) == 2
    assert set(s["formulas"]) - set(m["formulas"]) == {"preprocess.quantise_lattice@1"}
    out = pd.read_parquet(tmp_path / "s" / "release.parquet")
    assert list(out.columns) == ["t", "t_source", "beta_intercept", "beta_sex", "band_lower_intercept",
                                 "band_upper_intercept", "band_lower_sex", "band_upper_sex"] and len(out) == 31
    assert np.all(out["band_upper_sex"] > out["beta_sex"]) and np.allclose(
        out["band_upper_sex"] - out["beta_sex"], out["beta_sex"] - out["band_lower_sex"])  # symmetric T2-noise band
    assert np.all(np.isfinite(out[["beta_intercept", "beta_sex"]].to_numpy()))


def test_streaming_fosr_refuses_an_unsorted_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The example file is not sorted by child (boys, then girls): the streaming engine says so, never guesses."""
    cfg = write_config(tmp_path, EXAMPLE, data=DATA, engine={"name": "local"})
    assert release(cfg, tmp_path / "o", f"sqlite:///{tmp_path / 'l.sqlite'}", "u") != 0
    assert "rows are not sorted by 'child_id'" in capsys.readouterr().err
    assert not (tmp_path / "o" / "manifest.json").exists()


@flow(persist_result=False)
def _stream(config_path: str) -> object:
    config = load_config(config_path)
    return stream_curves(config, str(Path(config_path).parent), center=fosr_reference(config), covariates=True)


def test_dask_and_local_engines_give_bit_identical_fosr_sums(tmp_path: Path, partitioned: Path) -> None:
    from distributed import LocalCluster

    local = write_config(tmp_path, EXAMPLE, data=partitioned, engine={"name": "local", "chunk_rows": 77})
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0") as cluster:
        dask = write_config(tmp_path, EXAMPLE, data=partitioned,
                            engine={"name": "dask", "address": cluster.scheduler_address, "chunk_rows": 500})
        d = _stream(str(dask))
        assert len(cluster.scheduler.task_prefixes) > 0  # the partitions ran on the cluster's workers
    loc = _stream(str(local))
    assert d.n_samples == loc.n_samples == 93  # type: ignore[attr-defined]
    a, b = d.sums, loc.sums  # type: ignore[attr-defined]
    assert a.sum == b.sum and a.design.sum == b.design.sum and a.design.outer == b.design.outer
    assert a.design.cross == b.design.cross and d.counts == loc.counts  # type: ignore[attr-defined]


def test_a_covariate_varying_within_a_unit_is_averaged_alike_by_both_engines(tmp_path: Path) -> None:
    """Issue 17: the streaming engine no longer refuses what the in-memory path averages (record-wise, the default).

    Every 7th child's last row has the other sex: both engines use the mean of the child's rows and give the same
    exact sums and the same count of averaged units (internal only); ``covariates_within_unit: error`` refuses on both.
    """
    frame = pd.read_parquet(DATA)
    last = frame.groupby("child_id").tail(1).index[::7]
    frame.loc[last, "sex"] = frame.loc[last, "sex"].map({"M": "F", "F": "M"})
    varied = tmp_path / "varied.parquet"
    frame.to_parquet(varied, index=False)
    parts = partition_parquet(varied, tmp_path / "parts", "child_id", 3, 100, order=["child_id", "age_years"])
    cfg = write_config(tmp_path, EXAMPLE, data=parts, engine={"name": "local", "chunk_rows": 45})
    mem_cfg = write_config(tmp_path, EXAMPLE, data=varied)
    streamed, mem, cov, _ = _both(str(cfg), str(mem_cfg))
    z, _ = clip_covariates(cov.data_matrix, 1.0)  # type: ignore[attr-defined]
    exact = accumulate_curves(mem.data_matrix, 1.0, _weights(mem_cfg), covariates=z,  # type: ignore[attr-defined]
                              covariate_bound=1.0)
    sums = streamed.sums  # type: ignore[attr-defined]
    assert sums.design.sum == exact.design.sum and sums.design.outer == exact.design.outer
    assert sums.design.cross == exact.design.cross
    assert streamed.counts["n_units_covariate_averaged"] == cov.counts["n_units_covariate_averaged"] == len(last)  # type: ignore[attr-defined]
    strict = write_config(tmp_path, EXAMPLE, data=parts, engine={"name": "local", "chunk_rows": 45},
                          covariates_within_unit="error")
    assert release(strict, tmp_path / "out", f"sqlite:///{tmp_path / 'l.sqlite'}", "strict") == 2
