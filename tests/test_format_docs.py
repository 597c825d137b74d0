"""docs/format.md: its evaluator is formats/reference_reader.py, and its example runs."""
from __future__ import annotations

import re
import sys
from pathlib import Path

import numpy as np
import pytest

import spnc.io as sio

ROOT = Path(__file__).resolve().parents[1]


def test_docs_point_to_the_reference_reader(monkeypatch):
    text = (ROOT / "docs" / "format.md").read_text()
    assert "formats/reference_reader.py" in text
    assert "def log_likelihood(path, X)" not in text          # the old sample evaluator is gone
    code = [b for b in re.findall(r"```python\n(.*?)```", text, flags=re.S) if "reference_reader" in b]
    assert len(code) == 1
    monkeypatch.setattr(sys, "path", list(sys.path))      # the block puts "formats" on it
    monkeypatch.chdir(ROOT)
    lines = code[0].splitlines()
    bad = [i for i, ln in enumerate(lines) if "Refused" in ln and "#" in ln and "import" not in ln][0]
    ns: dict = {}
    exec("\n".join(lines[:bad]), ns)                            # everything before the refusal
    m = sio.load(ROOT / "formats" / "examples" / "mixed.h5")
    X = np.array([[1.0, 0.3], [np.nan, 1.2]])
    np.testing.assert_allclose(ns["m"].log_likelihood(X), m.log_likelihood(X), rtol=1e-12)
    with pytest.raises(ns["Refused"]):
        exec(lines[bad], ns)
    sys.modules.pop("reference_reader", None)
