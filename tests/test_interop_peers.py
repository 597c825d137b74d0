"""Foreign model files: fixtures written by SPFlow, DeeProb-kit and sparc-pc, round trips
through every foreign format, and the real libraries reading what spnc writes."""
from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import numpy as np
import pytest

import spnc
from spnc.io import importers

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "tests" / "data" / "peers"
PEERS = Path(os.environ.get("SPNC_PEERS", "/tmp/peers"))
FIXTURES = sorted(DATA.glob("*.ll.json"))
VENV = {"spflow": "spflow", "deeprob-kit": "deeprob", "sparc-pc": "sparc"}


def tol(lib: str, ll: np.ndarray) -> np.ndarray:
    # DeeProb-kit evaluates in float32 (README.md here); the others in float64
    if lib == "deeprob-kit":
        return 5e-6 * np.maximum(1.0, np.abs(ll))
    return np.full(ll.shape, 1e-9)


def rows(doc_rows: list) -> np.ndarray:
    return np.array([[np.nan if v is None else v for v in r] for r in doc_rows], dtype=np.float64)


def model_of(fixture: Path) -> Path:
    return fixture.with_name(fixture.name[: -len(".ll.json")])


@pytest.mark.parametrize("fixture", FIXTURES, ids=lambda p: p.name[:-8])
def test_spnc_matches_the_library_on_its_own_files(fixture):
    doc = json.loads(fixture.read_text())
    spn = importers.load(model_of(fixture))
    X, want = rows(doc["X"]), np.array(doc["ll"])
    assert np.isnan(X).any() and (~np.isnan(X)).any()
    got = spn.log_likelihood(X)
    assert np.all(np.abs(got - want) <= tol(doc["library"], want)), (got - want)


def test_every_library_and_missing_values_are_covered():
    libs = {json.loads(f.read_text())["library"] for f in FIXTURES}
    assert libs == {"spflow", "deeprob-kit", "sparc-pc"}
    kinds = set()
    for f in FIXTURES:
        kinds |= {k for k, t in importers.load(model_of(f)).leaf_tables.items() if len(t)}
    assert kinds >= {"bernoulli", "categorical", "gaussian", "cltree", "indicator"}


@pytest.mark.parametrize("name,node", [
    ("spflow_poisson.spflow", "node 1 (Poisson"), ("spflow_poisson.spflow.json", "node 1 (Poisson"),
    ("spflow_cltree.spflow", "node 0 (CLTREE"), ("deeprob_uniform.deeprob.json", "node 1 (Uniform"),
    ("sparc_logistic.sparc.json", "node 0 (discrete_logistic")])
def test_unmappable_leaves_written_by_the_libraries_are_refused(name, node):
    with pytest.raises(spnc.FormatError, match="cannot be mapped") as e:
        importers.load(DATA / name)
    assert node in str(e.value)


# ---------------------------------------------------------------- spnc -> format -> spnc
SUPPORTED = {
    "spflow-text": ("bernoulli", "categorical", "gaussian"),
    "spflow-json": ("bernoulli", "categorical", "gaussian", "mvgaussian", "cltree"),
    "deeprob-json": ("bernoulli", "categorical", "gaussian", "cltree"),
    "sparc-json": ("bernoulli", "categorical", "gaussian", "indicator"),
}


def random_model(rng: np.random.Generator, kinds: tuple, n_vars: int = 6, depth: int = 2) -> spnc.SPN:
    """A random DAG-shaped SPN whose leaves are of the given kinds."""
    real = "gaussian" in kinds
    vtype = ["real" if real and (v >= n_vars - 2 or kinds == ("gaussian",)) else ("cat" if "categorical" in kinds and v % 3 == 1 else "bin")
             for v in range(n_vars)]
    cache: dict = {}

    def leaf(v: int):
        if vtype[v] == "real":
            return spnc.Gaussian(v, float(rng.normal()), float(rng.uniform(0.3, 2.0)))
        if vtype[v] == "cat":
            return spnc.Categorical(v, rng.dirichlet(np.ones(3)))
        if "indicator" in kinds and rng.random() < 0.4:
            return spnc.Sum([spnc.Indicator(v, 0), spnc.Indicator(v, 1)], rng.dirichlet(np.ones(2)))
        if "bernoulli" in kinds and rng.random() < 0.7:
            return spnc.Bernoulli(v, float(rng.uniform(0.05, 0.95)))
        return spnc.Categorical(v, rng.dirichlet(np.ones(2)))

    def block(scope: tuple):
        types = {vtype[v] for v in scope}
        if "cltree" in kinds and types == {"bin"} and len(scope) > 1:
            par = [-1] + [int(rng.integers(0, j)) for j in range(1, len(scope))]
            cpts = [rng.dirichlet(np.ones(2), size=1 if p < 0 else 2) for p in par]
            return spnc.ChowLiuLeaf(list(scope), par, cpts)
        if "mvgaussian" in kinds and types == {"real"} and len(scope) > 1:
            A = rng.normal(size=(len(scope), len(scope)))
            return spnc.MultivariateGaussian(list(scope), rng.normal(size=len(scope)), A @ A.T + np.eye(len(scope)))
        return spnc.Product([leaf(v) for v in scope])

    def build(scope: tuple, d: int):
        if len(scope) == 1:
            return leaf(scope[0])
        if d == 0:
            return block(scope)
        if scope in cache and rng.random() < 0.3:
            return cache[scope]
        kids = []
        for _ in range(int(rng.integers(2, 4))):
            perm = rng.permutation(scope)
            cut = int(rng.integers(1, len(scope)))
            kids.append(spnc.Product([build(tuple(sorted(int(v) for v in perm[:cut])), d - 1),
                                      build(tuple(sorted(int(v) for v in perm[cut:])), d - 1)]))
        node = spnc.Sum(kids, rng.dirichlet(np.ones(len(kids))))
        cache[scope] = node
        return node
    return spnc.compile(build(tuple(range(n_vars)), depth))


def sample_rows(spn: spnc.SPN, rng: np.random.Generator, n: int = 40) -> np.ndarray:
    X = spn.sample(n, seed=int(rng.integers(1 << 30)))
    X[rng.random(X.shape) < 0.3] = np.nan
    return X


@pytest.mark.parametrize("fmt", sorted(SUPPORTED))
@pytest.mark.parametrize("seed", range(4))
def test_round_trip_keeps_log_likelihoods(fmt, seed):
    rng = np.random.default_rng(seed)
    kinds = SUPPORTED[fmt]
    if fmt == "sparc-json":   # sparc-pc circuits are all discrete or all continuous
        kinds = ("gaussian",) if seed % 2 else tuple(k for k in kinds if k != "gaussian")
    spn = random_model(rng, kinds)
    f = importers.format_for("x", fmt)
    back = f.loads(f.dumps(spn), fmt)
    X = sample_rows(spn, rng)
    np.testing.assert_allclose(back.log_likelihood(X), spn.log_likelihood(X), rtol=0, atol=1e-9)
    if fmt != "spflow-text" and fmt != "spflow-json":     # formats with node ids keep the DAG
        assert back.n_nodes == spn.n_nodes


@pytest.mark.parametrize("fixture", FIXTURES, ids=lambda p: p.name[:-8])
def test_library_file_survives_spnc_unchanged(fixture, tmp_path):
    """library file -> spnc -> same format -> spnc: same model, same LLs."""
    model = model_of(fixture)
    spn = importers.load(model)
    out = tmp_path / model.name
    importers.save(spn, out)
    again = importers.load(out)
    X = rows(json.loads(fixture.read_text())["X"])
    np.testing.assert_allclose(again.log_likelihood(X), spn.log_likelihood(X), rtol=0, atol=1e-12)


def test_export_refuses_leaves_the_format_lacks():
    spn = spnc.compile(spnc.Product([spnc.Bernoulli(0, 0.3), spnc.ChowLiuLeaf([1, 2], [-1, 0],
                                     [[[0.4, 0.6]], [[0.9, 0.1], [0.2, 0.8]]])]))
    for fmt in ("spflow-text", "sparc-json"):
        with pytest.raises(spnc.FormatError, match=r"node \d+ \(cltree leaf\)"):
            importers.format_for("x", fmt).dumps(spn)
    mixed = spnc.compile(spnc.Product([spnc.Bernoulli(0, 0.3), spnc.Gaussian(1, 0.0, 1.0)]))
    with pytest.raises(spnc.FormatError, match="discrete and continuous"):
        importers.format_for("x", "sparc-json").dumps(mixed)
    independent = spnc.compile([spnc.Bernoulli(0, 0.3), spnc.Bernoulli(0, 0.6)], combine="independent")
    with pytest.raises(spnc.FormatError, match="independent"):
        importers.format_for("x", "deeprob-json").dumps(independent)


def test_a_mixture_of_roots_is_exported_as_a_sum():
    m = spnc.compile([spnc.Bernoulli(0, 0.3), spnc.Bernoulli(0, 0.6)], root_weights=[0.25, 0.75])
    X = np.array([[0.0], [1.0], [np.nan]])
    for fmt in SUPPORTED:
        f = importers.format_for("x", fmt)
        np.testing.assert_allclose(f.loads(f.dumps(m), fmt).log_likelihood(X), m.log_likelihood(X), atol=1e-12)


def test_format_is_chosen_by_suffix_or_name():
    assert importers.format_for("a/m.deeprob.json").name == "deeprob-json"
    assert importers.format_for("m.SPFLOW").name == "spflow-text"
    assert importers.format_for("m.spflow.json").name == "spflow-json"
    assert importers.format_for("m.gcw.json").name == "sparc-json"
    assert importers.format_for("m.json") is None
    assert importers.format_for("m.json", "sparc-json").name == "sparc-json"
    with pytest.raises(spnc.FormatError, match="unknown format"):
        importers.format_for("m.json", "nope")


# ---------------------------------------------------------------- the real libraries read spnc's files
def peer_eval(lib: str, jobs: list[dict], tmp_path: Path) -> list[np.ndarray]:
    py = PEERS / VENV[lib] / "bin" / "python"
    if not py.exists():
        pytest.skip(f"{lib} venv not found under {PEERS} (build it with ../shared/tools/peer-venvs.sh)")
    jf = tmp_path / "jobs.json"
    jf.write_text(json.dumps(jobs))
    r = subprocess.run([str(py), str(ROOT / "tools" / "make_peer_fixtures.py"), "eval",
                        {"spflow": "spflow", "deeprob-kit": "deeprob", "sparc-pc": "sparc"}[lib], str(jf)],
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-2000:]
    return [np.array(x) for x in json.loads(r.stdout.strip().splitlines()[-1])]


EXPORT = {"spflow": ("spflow-text", ".spflow"), "deeprob-kit": ("deeprob-json", ".deeprob.json"),
          "sparc-pc": ("sparc-json", ".sparc.json")}


@pytest.mark.parametrize("lib", sorted(EXPORT))
def test_the_library_reads_what_spnc_writes(lib, tmp_path):
    fmt, ext = EXPORT[lib]
    jobs, want, tols = [], [], []
    # its own fixtures, re-written by spnc: the library must compute what it computed before
    for fx in FIXTURES:
        doc = json.loads(fx.read_text())
        if doc["library"] != lib or not model_of(fx).name.endswith(ext):
            continue
        out = tmp_path / model_of(fx).name
        importers.save(importers.load(model_of(fx)), out)
        jobs.append({"model": str(out), "X": doc["X"]})
        want.append(np.array(doc["ll"]))
        tols.append(np.full(len(doc["ll"]), 1e-9))
    # models spnc made: the library must compute what spnc computes
    rng = np.random.default_rng(7)
    kinds = SUPPORTED[fmt]
    groups = [kinds] if lib != "sparc-pc" else [tuple(k for k in kinds if k != "gaussian"), ("gaussian",)]
    for g in groups:
        spn = random_model(rng, g)
        out = tmp_path / f"spnc_{len(jobs)}{ext}"
        importers.save(spn, out)
        X = sample_rows(spn, rng, 20)
        jobs.append({"model": str(out), "X": [[None if np.isnan(v) else float(v) for v in r] for r in X]})
        want.append(spn.log_likelihood(X))
        tols.append(tol(lib, want[-1]))
    got = peer_eval(lib, jobs, tmp_path)
    for g, w, t, j in zip(got, want, tols, jobs):
        assert np.all(np.abs(g - w) <= t), (j["model"], np.abs(g - w).max())


def test_spnc_convert_imports_and_exports(tmp_path, capsys):
    from spnc.cli import convert
    src = DATA / "deeprob_clt.deeprob.json"
    assert convert.main([str(src), str(tmp_path / "m.h5")]) == 0
    m = spnc.load(tmp_path / "m.h5")
    import h5py
    with h5py.File(tmp_path / "m.h5") as f:
        assert f.attrs["source_format"] in (b"deeprob-json", "deeprob-json")
    assert convert.main([str(tmp_path / "m.h5"), str(tmp_path / "back.json"), "--to", "deeprob-json"]) == 0
    X = rows(json.loads((DATA / "deeprob_clt.deeprob.json.ll.json").read_text())["X"])
    np.testing.assert_allclose(importers.load(tmp_path / "back.json", "deeprob-json").log_likelihood(X),
                               m.log_likelihood(X), atol=1e-12)
    assert convert.main(["--validate-only", str(DATA / "sparc_hclt.sparc.json")]) == 0
    assert "61 nodes" in capsys.readouterr().out
    assert convert.main([str(tmp_path / "m.h5"), str(tmp_path / "m.spflow")]) == 2   # CLT leaves
    assert "cltree leaf" in capsys.readouterr().err
    assert convert.main([str(DATA / "spflow_poisson.spflow"), str(tmp_path / "p.h5")]) == 2
    assert "Poisson" in capsys.readouterr().err
