"""Task settings and task bodies (`task.fn()`, no Prefect server needed)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import yaml
from fdp import tasks
from fdp.schemas import ReleaseConfig
from prefect.cache_policies import NO_CACHE
from prefect.logging import disable_run_logger

from fdpcore.errors import DataError, LedgerError
from fdpcore.ledger import Ledger

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "electricity_mean.yaml"


def _config(tmp_path: Path, rows: str) -> tuple[ReleaseConfig, str]:
    raw = yaml.safe_load(EXAMPLE.read_text())
    (tmp_path / "d.csv").write_text(rows)
    raw["dataset"].update(path="d.csv", format="csv", unit_column="u", time_column="t", value_column="v",
                          time_domain=[0.0, 1.0], value_offset=0.0, value_scale=1.0)
    raw["grid"] = {"rule": "midpoint", "size": 4, "domain": [0.0, 1.0]}
    return ReleaseConfig.model_validate(raw), str(tmp_path)


@pytest.mark.parametrize("name", ["draw_noise", "load_curves", "clip_curves", "summarise_curves", "publish_release"])
def test_data_and_noise_tasks_never_cache_or_persist(name: str) -> None:
    t = getattr(tasks, name)
    assert t.cache_policy is NO_CACHE
    assert t.persist_result is False


@pytest.mark.parametrize("name", ["draw_noise", "choose_public_parameters", "select_parameters"])
def test_noise_tasks_have_no_retries_and_redact_rows_like_the_data_tasks(name: str) -> None:
    from fdp.tasks import mean as mean_tasks

    t = getattr(mean_tasks, name)
    assert t.retries == 0 and t.cache_policy is NO_CACHE and t.persist_result is False
    assert t.fn.__wrapped__.__name__ == name  # wrapped by the row redaction of data_task (issue 17)


def test_noise_task_redacts_the_row_numbers_of_a_data_error() -> None:
    from fdp.tasks._settings import noise_task

    @noise_task(name="probe")
    def probe() -> None:
        raise DataError("value 'x' in column 'v' at row 7 is not a number")

    with disable_run_logger(), pytest.raises(DataError) as raised:
        probe.fn()
    assert "row 7" not in str(raised.value) and "row 7" in raised.value.curator_message


@pytest.mark.parametrize("reference", [False, True])
def test_recentring_on_the_drawn_centre_is_the_read_at_that_offset(tmp_path: Path, reference: bool) -> None:
    """value_offset: auto re-centres the records it read at offset 0 (no second read): the same matrix as reading
    at the drawn centre, an unalignable unit included (it stays the zero record)."""
    from fdp.tasks.mean import _load, recentred

    rows = "u,t,v\na,0,1\na,1,3\nb,0,2\nb,0.5,7\nb,1,2\nc,0.5,9\nd,0.2,4\nd,0.8,6\n"
    config, cdir = _config(tmp_path, rows)
    config = config.model_copy(update={"dataset": config.dataset.model_copy(update={"value_scale": 2.5})})
    if reference:
        raw = config.model_dump(mode="json")
        raw["centering"] = {"time": [0.0, 1.0], "value": [0.5, 1.5], "source": "a public reference (test)"}
        config = ReleaseConfig.model_validate(raw)
    centre = 1.7
    with disable_run_logger():
        at_zero = _load(config, cdir, 0.0)
        at_centre = _load(config, cdir, centre)
    moved = recentred(at_zero, centre / 2.5)
    np.testing.assert_allclose(moved.data_matrix, at_centre.data_matrix, rtol=0, atol=1e-12)
    assert not np.all(at_zero.aligned) and np.all(moved.data_matrix[~np.asarray(at_zero.aligned)] == 0.0)
    assert moved.unit_ids == at_zero.unit_ids and moved.n_samples == at_zero.n_samples


def test_load_curves_aligns_and_counts_internally(tmp_path: Path) -> None:
    rows = "u,t,v\na,0,1\na,1,3\nb,0,2\nb,1,2\nc,0.5,9\n"
    config, cdir = _config(tmp_path, rows)
    with disable_run_logger():
        batch = tasks.load_curves.fn(config, cdir)
    assert batch.n_samples == 3
    np.testing.assert_allclose(batch.data_matrix[0], [1.25, 1.75, 2.25, 2.75])
    np.testing.assert_allclose(batch.data_matrix[1], [2, 2, 2, 2])
    np.testing.assert_allclose(batch.data_matrix[2], 0.0)  # single observation: unalignable -> zero curve
    assert batch.counts["n_unalignable_units"] == 1


def test_load_curves_holds_end_values_over_the_public_end_gap(tmp_path: Path) -> None:
    """preprocess.align_linear@2 in the release path: grid points 0.125 and 0.875, one grid step 0.25 by default.
    Unit a's readings start 0.2 in (within the gap: held at 4 over [0, 0.2]); unit b's start 0.5 in (beyond it);
    max_end_gap 0 restores the strict rule of @1."""
    from fdp.tasks.planning import alignment_requirement, end_gap

    rows = "u,t,v\na,0.2,4\na,0.8,6\nb,0.5,1\nb,1,2\n"
    config, cdir = _config(tmp_path, rows)
    assert end_gap(config) == (0.25, 0.25)
    assert "from at most 0.375 to at least 0.625" in alignment_requirement(config)
    with disable_run_logger():
        batch = tasks.load_curves.fn(config, cdir)
    np.testing.assert_allclose(batch.data_matrix[0], [4.0, 4.0 + 2.0 * 0.175 / 0.6, 4.0 + 2.0 * 0.425 / 0.6, 6.0])
    np.testing.assert_allclose(batch.data_matrix[1], 0.0)
    assert batch.counts["n_unalignable_units"] == 1
    strict = config.model_copy(update={"dataset": config.dataset.model_copy(update={"max_end_gap": 0.0})})
    with disable_run_logger(), pytest.raises(DataError, match="no privacy unit could be aligned"):
        tasks.load_curves.fn(strict, cdir)  # a is lost too


def test_load_curves_names_the_bad_column_and_row(tmp_path: Path) -> None:
    config, cdir = _config(tmp_path, "u,t,v\na,0,1\na,1,x\n")
    with disable_run_logger(), pytest.raises(DataError, match=r"'v'.*at a row") as raised:
        tasks.load_curves.fn(config, cdir)
    assert "row 2" not in str(raised.value)  # what Prefect would log and show
    assert "'v'" in raised.value.curator_message and "row 2" in raised.value.curator_message  # the terminal's copy


def test_cancel_only_before_noise(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'l.sqlite'}"
    led = Ledger(url)
    led.ensure_dataset("ds", 1.0)
    kw = dict(dataset_id="ds", epsilon=0.4, delta=0.0, config_sha256="0" * 64, summary="mean", mechanism="iclp_qr",
              sensitivity_formula="s", budget_splits=[], provenance={}, internal={})
    led.reserve(release_id="a", **kw)
    led.reserve(release_id="b", **kw)
    led.mark_noised("b")
    with disable_run_logger():
        assert tasks.cancel_reservation.fn(url, "a") is True
        assert tasks.cancel_reservation.fn(url, "b") is False  # noise drawn: never refunded
    assert led.budgets()[0].spent == (0.4, 0.0)
    with pytest.raises(LedgerError, match="cannot go from 'reserved'"):
        led.cancel("b")
