"""`fdp release` through the erm_release flow: ridge, logistic and 2-D SVM examples; solver record; bad labels."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pyarrow.parquet as pq
from flow_support import REPO, release, write_config

from fdpcore.ledger import Ledger
from fdpcore.privacy.formulas import FORMULAS


def _config(tmp_path: Path, example: str, **overrides: object) -> Path:
    return write_config(tmp_path, REPO / "examples" / example, prefix="cfg", **overrides)


def test_ridge_example_manifest_states_solver_assumption(tmp_path: Path) -> None:
    ledger = f"sqlite:///{tmp_path / 'l.sqlite'}"
    out = tmp_path / "out"
    assert release(_config(tmp_path, "erm_ridge.yaml", grid__size=40), out, ledger, "ridge-1") == 0
    m = json.loads((out / "manifest.json").read_text())
    assert m["summary"] == "erm" and m["mechanism"] == "iclp" and m["n"] == 1000
    assert m["sensitivity"]["bound"] == "sensitivity.erm.iclp_one_c@1"
    assert m["sensitivity"]["value"] > m["sensitivity"]["paper_bound"]  # the solver's certified slack is added
    assert "exact minimiser" in m["solver"]["assumption"] and m["solver"]["tolerance"] == 1e-9
    assert m["parameters"]["loss"] == "ridge" and m["parameters"]["label_bound"] == 1.5
    assert m["unit_bounding"]["rule"] == "average"
    assert set(m["formulas"]) <= set(FORMULAS) and "estimator.erm.rkhs@1" in m["formulas"]
    table = pq.read_table(out / "release.parquet").to_pandas()
    assert list(table.columns) == ["t", "x1", "value", "band_lower", "band_upper"]
    assert Ledger(ledger).get("ridge-1").state == "published"  # type: ignore[union-attr]


def test_logistic_and_svm_2d(tmp_path: Path) -> None:
    ledger = f"sqlite:///{tmp_path / 'l.sqlite'}"
    assert release(_config(tmp_path, "erm_logistic.yaml", grid__size=30), tmp_path / "a", ledger, "logit") == 0
    assert "predicted_label" in pq.read_table(tmp_path / "a" / "release.parquet").column_names
    assert release(_config(tmp_path, "erm_svm_2d.yaml", grid__size=10), tmp_path / "b", ledger, "svm") == 0
    m = json.loads((tmp_path / "b" / "manifest.json").read_text())
    assert m["mechanism"] == "gp" and m["sensitivity"]["bound"] == "sensitivity.erm.gp_cm@1" and m["privacy"]["delta"] == 1e-5
    assert m["solver"]["certificate"].startswith("gradient bound") and "accelerated gradient" in m["solver"]["method"]


def test_labels_not_pm1_for_svm_become_their_sign_by_default(tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    """Record-wise by default (issue 17): one unit's 0/1 label never decides whether a release exists."""
    frame = pd.read_parquet(REPO / "examples" / "data" / "erm_points.parquet")
    frame["label01"] = (frame["label"] > 0).astype(int)
    data = tmp_path / "p.parquet"
    frame.to_parquet(data)
    cfg = _config(tmp_path, "erm_svm_2d.yaml", grid__size=8, dataset__label_column="label01", dataset__path=str(data))
    ledger = f"sqlite:///{tmp_path / 'l.sqlite'}"
    assert release(cfg, tmp_path / "s", ledger, "signed") == 0
    internal = Ledger(ledger).get("signed").internal  # type: ignore[union-attr]
    assert internal["counts"]["n_labels_to_sign"] == int((frame["label01"] == 0).sum()) > 0  # the 0s become -1
    assert "n_labels_to_sign" not in (tmp_path / "s" / "manifest.json").read_text()  # internal only


def test_labels_not_pm1_for_svm_exit_2_naming_the_row_when_strict(tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    frame = pd.read_parquet(REPO / "examples" / "data" / "erm_points.parquet")
    frame["label01"] = (frame["label"] > 0).astype(int)
    data = tmp_path / "p.parquet"
    frame.to_parquet(data)
    cfg = _config(tmp_path, "erm_svm_2d.yaml", grid__size=8, dataset__label_column="label01", dataset__path=str(data),
                  dataset__labels="error")
    ledger = f"sqlite:///{tmp_path / 'l.sqlite'}"
    assert release(cfg, tmp_path / "o", ledger, "bad") == 2
    err = capsys.readouterr().err
    assert "label01" in err and "row" in err and "-1 or +1" in err
    assert Ledger(ledger).get("bad") is None
    assert release(_config(tmp_path, "erm_ridge.yaml", label_bound=None), tmp_path / "o", ledger, "nb") == 2


def test_ridge_label_offset_centres_the_responses_and_is_added_back(tmp_path: Path) -> None:
    """Responses near 300 with label_bound 1.5: label_offset 300 (public) subtracts the centre before the clipping and
    adds it to the released function; without it every response would be clipped to 1.5. Logistic refuses it."""
    frame = pd.read_parquet(REPO / "examples" / "data" / "erm_points.parquet")
    frame["response"] = frame["response"] + 300.0
    data = tmp_path / "shifted.parquet"
    frame.to_parquet(data)
    ledger = f"sqlite:///{tmp_path / 'l.sqlite'}"
    cfg = _config(tmp_path, "erm_ridge.yaml", grid__size=40, dataset__path=str(data), label_offset=300.0)
    assert release(cfg, tmp_path / "o", ledger, "offset") == 0
    m = json.loads((tmp_path / "o" / "manifest.json").read_text())
    assert m["parameters"]["label_offset"] == 300.0
    values = pq.read_table(tmp_path / "o" / "release.parquet").to_pandas()
    band = m["noise"]["band_half_width_max"]
    assert (values["value"] - 300.0).abs().max() < 1.5 + 3 * band  # centred on 300, not clipped at 1.5
    assert ((values["band_upper"] - values["value"]) > 0).all()
    bad = _config(tmp_path, "erm_logistic.yaml", grid__size=10, label_offset=1.0)
    assert release(bad, tmp_path / "x", ledger, "bad-offset") == 2
