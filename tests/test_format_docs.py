"""The plain-h5py evaluator in docs/format.md runs and agrees with spnc."""
from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

import spnc.io as sio

ROOT = Path(__file__).resolve().parents[1]
EX = ROOT / "formats" / "examples"


def _snippet() -> str:
    text = (ROOT / "docs" / "format.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", text, flags=re.S)
    code = [b for b in blocks if "def log_likelihood(path, X)" in b]
    assert len(code) == 1
    assert "spnc" not in code[0].replace('b"spnc-model"', "")     # no spnc inside
    return code[0]


@pytest.mark.parametrize("name", ["mixed", "dag_categorical", "learner_stats"])
def test_doc_snippet_matches_spnc(name):
    ns: dict = {}
    exec(compile(_snippet(), "docs/format.md", "exec"), ns)
    m = sio.load(EX / f"{name}.h5")
    rng = np.random.default_rng(3)
    X = np.empty((200, m.n_vars))
    for v, k in enumerate(m.cardinality):
        X[:, v] = rng.integers(0, k, 200) if k else rng.normal(0.5, 1.5, 200)
    X[rng.random(X.shape) < 0.25] = np.nan
    ours = ns["log_likelihood"](str(EX / f"{name}.h5"), X)
    np.testing.assert_allclose(ours, m.log_likelihood(X), rtol=1e-12, atol=1e-12)
