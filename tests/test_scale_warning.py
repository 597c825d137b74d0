"""A warning when real training columns vary less than the std floor of Gaussian leaves:
the floor then sets every leaf's spread, and every row gets nearly the same likelihood."""
from __future__ import annotations

import re
import warnings

import numpy as np
import pandas as pd
import pytest

import spnc
from spnc.learn import EM, OSLRAU, BaggedSPN, LearnSPN, Prometheus
from spnc.learn._scale import column_std

RNG = np.random.default_rng(0)
X = RNG.normal(size=(400, 3)) + np.repeat(RNG.normal(size=(2, 3)) * 3, 200, axis=0)
INIT = LearnSPN("correlation", min_instances=50, random_state=0).fit(X).spn_

LEARNERS = {
    "learnspn": (lambda: LearnSPN("correlation", min_instances=50, random_state=0), "min_std=0.01"),
    "learnspn_sampled": (lambda: LearnSPN("correlation", min_instances=50, sample_rows=200, random_state=0),
                         "min_std=0.01"),
    "prometheus": (lambda: Prometheus(min_instances=50, random_state=0), "min_std=0.01"),
    "oslrau": (lambda: OSLRAU(batch_size=20, random_state=0), r"sqrt\(min_var\)=0\.001"),
    "em": (lambda: EM(init=INIT, max_iter=2), "min_std=0.001"),
    "bagged": (lambda: BaggedSPN(LearnSPN("correlation", min_instances=50), n_bags=2, random_state=0),
               "min_std=0.01"),
}


def _scale_warnings(run) -> list:
    with warnings.catch_warnings(record=True) as got:
        warnings.simplefilter("always")
        run()
    return [w for w in got if issubclass(w.category, spnc.ScaleWarning)]


@pytest.mark.parametrize("name", sorted(LEARNERS))
def test_tiny_scale_data_is_warned_about_once_per_fit(name):
    """Was silent: X * 1e-200 (whose squares underflow, so its std computes as 0) and
    columns of std ~1e-6 gave models of nearly constant likelihood without a word."""
    make, floor = LEARNERS[name]
    for scale in (1e-200, 1e-6):
        got = _scale_warnings(lambda: make().fit(X * scale))
        assert len(got) == 1, [str(w.message) for w in got]
        msg = str(got[0].message)
        assert issubclass(got[0].category, UserWarning)
        shown = float(msg.split("training data (")[1].split(",")[0])    # 3 digits; a sample with sample_rows
        assert shown == pytest.approx(float(X[:, 0].std()) * scale, rel=0.1)
        param = "min_var" if "min_var" in floor else "min_std"
        for part in (r"standard deviations of X columns 0, 1, 2 over the training data",
                     rf"below {floor}, the std floor of Gaussian leaves", r"Rescale the columns",
                     f"give a smaller {param}$"):
            assert re.search(part, msg), (part, msg)
        assert got[0].filename == __file__          # the caller's line, not spnc's
    assert _scale_warnings(lambda: make().fit(X)) == []


def test_the_warning_names_columns_and_spares_constant_ones():
    frame = pd.DataFrame({"a": X[:, 0], "b": X[:, 1] * 1e-5, "c": np.full(len(X), 3.0)})
    got = _scale_warnings(lambda: LearnSPN("correlation", min_instances=50).fit(frame))
    assert len(got) == 1
    assert "of X column 1 ('b') over the training data (" in str(got[0].message)
    assert "Rescale the column (" in str(got[0].message)


def test_partial_fit_warns_once_over_its_batches():
    o = OSLRAU(batch_size=20, random_state=0)
    got = _scale_warnings(lambda: [o.partial_fit(X[i:i + 100] * 1e-7) for i in range(0, 400, 100)])
    assert len(got) == 1 and str(got[0].message).startswith("OSLRAU: the standard deviations of X columns 0, 1, 2")
    assert _scale_warnings(lambda: OSLRAU(batch_size=20).partial_fit(X[:100]).partial_fit(X[100:])) == []


def test_a_smaller_floor_is_not_warned_about():
    assert _scale_warnings(lambda: LearnSPN("correlation", min_instances=50, min_std=1e-9).fit(X * 1e-6)) == []
    assert _scale_warnings(lambda: OSLRAU(batch_size=20, min_var=1e-18).fit(X * 1e-6)) == []


def test_column_std_survives_underflow_and_skips_missing_cells():
    np.testing.assert_allclose(column_std(X * 1e-200) / 1e-200, X.std(axis=0), rtol=1e-12)
    Y = X.copy()
    Y[::3, 1] = np.nan
    np.testing.assert_allclose(column_std(Y), np.nanstd(Y, axis=0), rtol=1e-12)


@pytest.mark.filterwarnings("error")
@pytest.mark.parametrize("name", sorted(LEARNERS))
def test_constant_columns_at_a_tiny_scale_are_not_warned_about(name):
    """A constant column's deviations from its mean are rounding (1e-35 at scale 1e-20)."""
    make, _ = LEARNERS[name]
    Y = X.copy()
    Y[:, 2] = 2.5e-20
    make().fit(Y)


@pytest.mark.parametrize("scale", [1e-200, 1e-6])
def test_em_over_streamed_blocks_warns_as_in_memory(scale):
    """Was silent: EM over a list or callable of blocks (or a dataset) skipped the check.
    The first pass gathers the column moments block by block, with no extra pass."""
    Y = X * scale
    Y[::7, 1] = np.nan
    want = _scale_warnings(lambda: EM(init=INIT, max_iter=2).fit(Y))
    blocks = [Y[i:i + 90] for i in range(0, len(Y), 90)]
    for data in (blocks, lambda: iter(blocks)):
        got = _scale_warnings(lambda: EM(init=INIT, max_iter=2).fit(data))
        assert len(got) == len(want) == 1
        assert str(got[0].message) == str(want[0].message)
    assert _scale_warnings(lambda: EM(init=INIT, max_iter=2).fit([X[:200], X[200:]])) == []
