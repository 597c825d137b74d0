"""Gaussian leaves at extreme scales: sampling near the float maximum, EM statistics that
neither overflow nor warn, and the bound on real training data EM shares with the learners."""
from __future__ import annotations

import numpy as np
import pytest

import spnc
import spnc.io
from spnc import Gaussian, Sum

pytestmark = pytest.mark.filterwarnings("error")


def test_samples_near_the_float_maximum_are_finite():
    s = spnc.compile(Gaussian(0, 0.0, 1.5e308)).sample(64, seed=0)
    assert np.isfinite(s).all()
    mv = spnc.compile(spnc.MultivariateGaussian([0, 1], [1.7e308, 0.0], [[1e300, 0], [0, 1]]))
    assert np.isfinite(mv.sample(64, seed=0)).all()


def test_eval_reads_back_the_samples_it_wrote(tmp_path):
    from spnc.cli import evaluate
    m = tmp_path / "m.h5"
    spnc.io.save(spnc.compile(Gaussian(0, 0.0, 1.5e308)), m)
    out = tmp_path / "s.csv"
    assert evaluate.main([str(m), "--sample", "16", "--seed", "0", "--out", str(out), "-q"]) in (0, None)
    assert evaluate.main([str(m), str(out), "-q", "--out-ll", str(tmp_path / "ll.npy")]) in (0, None)
    assert np.isfinite(np.load(tmp_path / "ll.npy")).all()
