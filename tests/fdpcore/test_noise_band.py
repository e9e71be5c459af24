"""The pointwise 95 % band of ICLP (Laplace) noise that ``fdp plan`` and every release state (fdpcore.noise.iclp)."""

from __future__ import annotations

import numpy as np

from fdpcore.noise.iclp import BAND_SEED, whitened_pointwise_band


def test_the_band_is_computed_block_by_block_to_the_same_numbers_as_all_at_once() -> None:
    r = np.random.default_rng(3).normal(size=(40, 300)) / np.arange(1, 41)[:, None]
    n_sim = 20000  # 2**21 // 20000 = 104 grid points per block: three blocks
    band = whitened_pointwise_band(r, 0.7, "laplace", n_sim=n_sim)
    noise = np.random.default_rng(BAND_SEED).laplace(0.0, 0.7, size=(n_sim, 40))
    np.testing.assert_allclose(band, np.quantile(np.abs(noise @ r), 0.95, axis=0), rtol=1e-12)


def test_fresh_noise_falls_inside_the_band_at_its_level_at_every_point() -> None:
    r = np.random.default_rng(5).normal(size=(12, 150)) * np.geomspace(1.0, 1e-3, 12)[:, None]
    band = whitened_pointwise_band(r, 2.0, "laplace", level=0.9)
    fresh = np.abs(np.random.default_rng(11).laplace(0.0, 2.0, size=(40000, 12)) @ r)
    inside = np.mean(fresh <= band, axis=0)
    assert np.all(np.abs(inside - 0.9) < 0.012), (inside.min(), inside.max())  # binomial sd 0.0015, MC band +-0.002
