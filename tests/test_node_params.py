"""Construction objects refuse parameters that are not real numbers with a StructureError
naming the node type and the parameter, instead of numpy's bare errors or a silent parse of
text."""
import numpy as np
import pytest

import spnc
from spnc.errors import StructureError
from spnc.leaves import Bernoulli, Categorical, Gaussian, Indicator
from spnc.leaves.cltree import ChowLiuLeaf
from spnc.leaves.mvgaussian import MultivariateGaussian
from spnc.nodes import Product, Sum

BAD = [
    (lambda: Bernoulli(0, p="0.3"), "Bernoulli: p must be a real number, got str '0.3'"),
    (lambda: Bernoulli(0, p=np.array([0.3, 0.4])), "Bernoulli: p must be a real number"),
    (lambda: Bernoulli(0, p=True), "Bernoulli: p must be a real number, got bool"),
    (lambda: Bernoulli(-1, 0.3), "Bernoulli: variable index must be a non-negative integer"),
    (lambda: Sum([Bernoulli(0, 0.3)], weights="ab"), "Sum: weights must be real numbers, got str 'ab'"),
    (lambda: Sum([Bernoulli(0, 0.3), Bernoulli(0, 0.6)], weights=["0.5", "0.5"]), "Sum: weights must be real numbers"),
    (lambda: Sum([Bernoulli(0, 0.3), Bernoulli(0, 0.6)], weights=[[0.5], [0.2, 0.3]]), "Sum: weights must be real numbers"),
    (lambda: Categorical(0, ["0.5", "0.5"]), "Categorical: probs must be real numbers"),
    (lambda: Gaussian(0, None, 1.0), "Gaussian: mean must be a real number, got NoneType"),
    (lambda: Gaussian(0, 0.0, "1"), "Gaussian: std must be a real number"),
    (lambda: Indicator(0, "1"), "Indicator: value must be a real number"),
    (lambda: Indicator(0, 1.5), "Indicator: value must be a non-negative integer"),
    (lambda: MultivariateGaussian([0, 1], ["0", "0"], np.eye(2)), "MultivariateGaussian: mean must be real numbers"),
    (lambda: MultivariateGaussian([0, 1], [0, 0], "eye"), "MultivariateGaussian: cov must be real numbers"),
    (lambda: MultivariateGaussian([0.5, 1], [0, 0], np.eye(2)), "MultivariateGaussian: vars must be distinct"),
    (lambda: ChowLiuLeaf([0, 1], [-1, 0], [[["0.4", "0.6"]], [[0.9, 0.1], [0.2, 0.8]]]),
     "ChowLiuLeaf: cpts[0] must be real numbers"),
]


@pytest.mark.parametrize("make, message", BAD, ids=[m.split(" must")[0] + f"-{i}" for i, (_, m) in enumerate(BAD)])
def test_bad_parameters_are_structure_errors(make, message):
    with pytest.raises(StructureError) as e:
        make()
    assert message in str(e.value)
    assert isinstance(e.value, ValueError)       # callers catching ValueError still do


def test_numbers_of_every_real_type_are_taken():
    leaves = [Bernoulli(np.int64(0), np.float32(0.25)), Bernoulli(1, np.array(0.5)), Bernoulli(2, 1)]
    assert [l.p for l in leaves] == [0.25, 0.5, 1.0] and all(type(l.p) is float for l in leaves)
    assert Indicator(0, 2.0).value == 2 and Gaussian(0, np.int32(3), 2).mean == 3.0
    assert MultivariateGaussian(np.array([1.0, 0.0]), [0, 1], np.eye(2)).vars.tolist() == [0, 1]
    spn = spnc.compile(Sum([Product(leaves), Product([Bernoulli(0, 0.5), Bernoulli(1, 0.5), Bernoulli(2, 0.5)])],
                           weights=np.array([1, 3])), normalize=True)
    x = np.array([[1.0, 1.0, 1.0]])
    assert np.isclose(spn.log_likelihood(x)[0], np.log(0.25 * 0.25 * 0.5 * 1.0 + 0.75 * 0.125))
