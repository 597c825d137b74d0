"""What foreign model files keep of the variables: names, types, counts, and how each
feature token of SPFlow's text maps to a column."""
from __future__ import annotations

import numpy as np
import pytest

import spnc
from spnc.io import importers
from spnc.io.importers import spflow_text


def test_spflow_text_refuses_two_spellings_of_one_variable():
    text = ("(0.5*((Bernoulli(V1|p=0.3) * Bernoulli(V2|p=0.6))) +\n"
            " 0.5*((Bernoulli(V01|p=0.8) * Bernoulli(V2|p=0.1))))\n")
    # SPFlow reads V1 and V01 as the same column 1; the two leaves were merged silently
    with pytest.raises(spnc.FormatError, match=r"m.spflow: line 2, character 18: feature 'V01' is variable 1, "
                                               r"and so is 'V1' \(line 1, character 18\)"):
        spflow_text.loads_text(text, "m.spflow")
    # names that are not all V<k>: every distinct token is its own variable
    named = spflow_text.loads_text("(Bernoulli(V1|p=0.3) * Bernoulli(age|p=0.6) * Bernoulli(V01|p=0.8))")
    assert named.var_names == ["V1", "age", "V01"]
    same = spflow_text.loads_text(text.replace("V01", "V1"), "m.spflow")
    assert same.n_vars == 3 and same.var_names is None
