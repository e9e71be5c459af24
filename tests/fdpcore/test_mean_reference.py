"""The mean's public reference curve (preprocess.public_reference@1): record-wise centring before the clip, the
reference added back after the noise; shift equivariance draw for draw with the seeded NumPy sampler."""

from __future__ import annotations

import numpy as np
import pytest

import fdpcore
from fdpcore.errors import DomainError
from fdpcore.summaries.mean import add_reference, centre_on_reference

T = np.linspace(0.0, 1.0, 24)
KERNEL = {"name": "matern", "nu": 1.5, "rho": 0.1}


def _data() -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(3)
    x = 0.3 * rng.normal(size=(120, T.size)) + 0.2 * np.sin(2 * np.pi * T)
    r = 40.0 + 170.0 * T**1.5  # a trend far from any constant (chick weights, 43 -> 214 g)
    return x, r


@pytest.mark.parametrize("kw", [
    {"estimator": "iclp_qr"},
    {"estimator": "iclp_ar"},
    {"estimator": "frl"},
    {"estimator": "gp", "delta": 1e-5},
    {"estimator": "bernstein", "sup_clip": 1.0, "lattice_k": 6},
])
def test_release_of_shifted_data_with_the_reference_is_the_release_without_it_plus_r(kw: dict[str, object]) -> None:
    x, r = _data()
    common = dict(epsilon=1.0, tau=0.8, kernel=KERNEL, secure=False, draws=3, **kw)
    plain = fdpcore.release_mean(x, T, rng=np.random.default_rng(11), **common)  # type: ignore[arg-type]
    centred = fdpcore.release_mean(x + r, T, reference=r, rng=np.random.default_rng(11), **common)  # type: ignore[arg-type]
    assert centred.sensitivity == plain.sensitivity and centred.plan.calibration == plain.plan.calibration
    assert centred.epsilon == plain.epsilon and centred.delta == plain.delta
    assert np.allclose(centred.values, plain.values + r, rtol=0, atol=1e-9)


def test_without_the_reference_the_release_is_pulled_towards_zero_and_with_it_towards_r() -> None:
    x, r = _data()
    common = dict(epsilon=1.0, tau=0.5, kernel=KERNEL, secure=False)
    shifted = x / 100.0 + r / 100.0  # rescaled units: a trend from 0.4 to 2.1 that tau = 0.5 clips
    flat = fdpcore.release_mean(shifted, T, rng=np.random.default_rng(0), **common)  # type: ignore[arg-type]
    centred = fdpcore.release_mean(shifted, T, reference=r / 100.0, rng=np.random.default_rng(0), **common)  # type: ignore[arg-type]
    truth = shifted.mean(axis=0)
    assert np.abs(centred.values[0] - truth).max() < 0.25 * np.abs(flat.values[0] - truth).max()


def test_centring_keeps_unaligned_rows_at_zero_so_they_contribute_the_reference() -> None:
    x = np.array([[3.0, 4.0], [0.0, 0.0], [1.0, 1.0]])
    r = np.array([1.0, 2.0])
    out = centre_on_reference(x, r, aligned=np.array([True, False, True]))
    assert out.tolist() == [[2.0, 2.0], [0.0, 0.0], [0.0, -1.0]]
    assert centre_on_reference(x, r).tolist() == [[2.0, 2.0], [-1.0, -2.0], [0.0, -1.0]]  # no mask: every row
    assert add_reference(np.zeros((2, 2)), r).tolist() == [[1.0, 2.0], [1.0, 2.0]]


@pytest.mark.parametrize("reference,aligned,match", [
    ([1.0], None, r"reference \(shape \(1,\)\) must hold 2 finite grid values"),
    ([1.0, np.nan], None, "must hold 2 finite grid values"),
    ([1.0, 2.0], [True], r"aligned \(shape \(1,\)\) must hold one boolean per row"),
    ([1.0, 2.0], [1, 0], "must hold one boolean per row"),
])
def test_centring_refuses_a_bad_reference_or_mask(reference: list[float], aligned: list[object] | None,
                                                  match: str) -> None:
    with pytest.raises(DomainError, match=match):
        centre_on_reference(np.ones((2, 2)), reference, aligned=None if aligned is None else np.asarray(aligned))


def test_facade_refuses_a_reference_off_the_grid() -> None:
    x, _ = _data()
    with pytest.raises(DomainError, match="reference"):
        fdpcore.release_mean(x, T, epsilon=1.0, tau=1.0, kernel=KERNEL, secure=False, reference=np.ones(3))


def test_the_mean_page_reference_example_runs() -> None:
    from pathlib import Path

    text = (Path(__file__).resolve().parents[2] / "docs" / "summaries" / "mean.md").read_text()
    block = next(b for b in (part.split("```", 1)[0] for part in text.split("```python\n")[1:]) if "reference=" in b)
    exec(compile(block, "mean.md", "exec"), {})  # noqa: S102 - the manual's own example
