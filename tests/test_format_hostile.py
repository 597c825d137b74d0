"""Hostile files: every corruption must give one FormatError naming the problem and the
path inside the file; never a crash, hang, other exception or unbounded allocation."""
from __future__ import annotations

import copy
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import h5py
import numpy as np
import pytest

import spnc.io as sio
from spnc.errors import FormatError
from spnc.io import hdf5 as h5io, jsonio
from spnc.io._hash import content_hash
from spnc.io._spec import Group, Limits

import spnc.leaves.cltree  # noqa: F401  (register the leaf type)

EXAMPLES = Path(__file__).resolve().parents[1] / "formats" / "examples"
NAMES = sorted(p.stem for p in EXAMPLES.glob("*.h5"))


def base_tree(name: str = "mixed") -> Group:
    return sio.read_validated(EXAMPLES / f"{name}.h5").tree


def rehash(t: Group) -> Group:
    """Recompute the content hash of an edited tree, so the check under test is reached."""
    fv = t.attrs.get("format_version")
    if isinstance(fv, list) and all(isinstance(x, int) and 0 <= x < 2**32 for x in fv):
        t.attrs["format_version"] = np.array(fv, dtype=np.uint32)   # as the writer stores it
    if isinstance(fv, list) and len(fv) > 1 and fv[1] == 0:
        t.attrs.pop("content_hash", None)                          # 1.0 files have none
        return t
    try:
        t.attrs["content_hash"] = content_hash(t)
    except (ValueError, TypeError, FormatError, AttributeError):
        pass
    return t


def write_raw(tree: Group, path: Path) -> None:
    """Write a tree to HDF5 with no validation (to build bad files)."""
    rehash(tree)
    with h5py.File(path, "w") as f:
        h5io._write_group(f, tree)


def refuse_h5(tmp_path: Path, tree: Group, match: str) -> FormatError:
    p = tmp_path / "bad.h5"
    write_raw(tree, p)
    with pytest.raises(FormatError, match=match) as ei:
        sio.load(p)
    return ei.value


# ----------------------------------------------------------------- targeted cases
def test_child_out_of_range(tmp_path):
    t = base_tree()
    t.members["edges"].members["child"][3] = 40
    refuse_h5(tmp_path, t, r"/edges/child\[3\] = 40 is out of range \[0, 7\)$")


def test_cycle_and_order(tmp_path):
    t = base_tree()
    ch = t.members["edges"].members["child"]
    ch[4] = 6                      # the root lists itself: a self loop
    refuse_h5(tmp_path, t, r"/edges/child\[4\] = 6 under node 6: children must precede")


@pytest.mark.parametrize("w, msg", [(-0.3, "is negative"), (np.nan, "is not finite"),
                                    (np.inf, "is not finite"), (0.5, "add up to")])
def test_bad_weights(tmp_path, w, msg):
    t = base_tree()
    t.members["edges"].members["weight"][4] = w
    refuse_h5(tmp_path, t, msg)


def test_product_weight_must_be_one(tmp_path):
    t = base_tree()
    t.members["edges"].members["weight"][0] = 0.5
    refuse_h5(tmp_path, t, r"/edges/weight\[0\] = 0.5 is on a product edge")


def test_scope_violations(tmp_path):
    t = base_tree()
    t.members["nodes"].members["scope"][9] = 0          # sum scope (0,1) -> (0,0)
    refuse_h5(tmp_path, t, "strictly ascending")
    t = base_tree()
    sc = t.members["nodes"].members["scope"]
    sc[1] = 0                                            # gaussian leaf now over X0
    refuse_h5(tmp_path, t, "decomposability|real variable|scope")


def test_wrong_dtype_and_shape(tmp_path):
    t = base_tree()
    t.members["edges"].members["child"] = t.members["edges"].members["child"].astype(np.float64)
    refuse_h5(tmp_path, t, r"/edges/child: has dtype f8, expected i8$")
    t = base_tree()
    t.members["edges"].members["ptr"] = t.members["edges"].members["ptr"][:-1]
    refuse_h5(tmp_path, t, r"/edges/ptr: has length 7, expected 8")
    p = tmp_path / "two_d.h5"
    write_raw(base_tree(), p)
    with h5py.File(p, "a") as f:
        del f["edges/weight"]
        f["edges/weight"] = np.ones((3, 2))
    with pytest.raises(FormatError, match=r"/edges/weight: must be a 1-D dataset"):
        sio.load(p)


def test_missing_dataset_and_group(tmp_path):
    t = base_tree()
    del t.members["nodes"].members["scope"]
    refuse_h5(tmp_path, t, r"/nodes/scope: required dataset is missing$")
    t = base_tree()
    del t.members["leaves"]
    refuse_h5(tmp_path, t, r"/leaves: required group is missing$")


def test_unknown_node_kind(tmp_path):
    t = base_tree()
    t.members["nodes"].members["kind"][0] = 42
    refuse_h5(tmp_path, t, r"/nodes/kind\[0\] = 42 \(''\) is not a known node kind")


def test_unknown_leaf_table(tmp_path):
    t = base_tree()
    t.members["leaves"].members["poisson"] = Group(members={"node": np.array([0])})
    refuse_h5(tmp_path, t, r"/leaves/poisson: unknown leaf type 'poisson'")


def test_versions(tmp_path):
    t = base_tree()
    t.attrs["format_version"] = [2, 0, 0]
    refuse_h5(tmp_path, t, r"/@format_version: is 2.0.0; this reader supports major version 1")
    t = base_tree()
    t.attrs["required_features"] = ["hypercube-leaves-v3"]
    refuse_h5(tmp_path, t, "feature 'hypercube-leaves-v3' is not of the form")
    t.attrs["required_features"] = ["leaf:hypercube"]
    refuse_h5(tmp_path, t, "unknown required feature 'leaf:hypercube'")
    # a newer minor version may add optional groups, which are ignored with a warning
    t = base_tree()
    t.attrs["format_version"] = [1, 3, 0]
    t.members["provenance2"] = Group(members={"x": np.zeros(3)})
    p = tmp_path / "newer.h5"
    write_raw(t, p)
    with pytest.warns(UserWarning, match="provenance2"):
        sio.load(p)
    t.attrs["format_version"] = [1, 0, 0]
    refuse_h5(tmp_path, t, "/provenance2: unknown member")
    t = base_tree()
    t.attrs["format"] = "keras-model"
    refuse_h5(tmp_path, t, "/@format: is 'keras-model'")


def test_truncated_and_non_hdf5(tmp_path):
    src = (EXAMPLES / "mixed.h5").read_bytes()
    p = tmp_path / "t.h5"
    for cut in (0, 4, 100, len(src) // 2, len(src) - 1):
        p.write_bytes(src[:cut])
        with pytest.raises(FormatError):
            sio.load(p)
    p.write_bytes(b'{"format": "spnc-model"}')
    with pytest.raises(FormatError, match="not an HDF5 file"):
        sio.load(p)


def test_huge_declared_sizes(tmp_path):
    p = tmp_path / "bomb.h5"
    write_raw(base_tree(), p)
    with h5py.File(p, "a") as f:
        del f["edges/weight"]
        f.create_dataset("edges/weight", shape=(2**40,), dtype="<f8", chunks=(2**16,),
                         compression="gzip")
    assert os.path.getsize(p) < 100_000
    with pytest.raises(FormatError, match=r"/edges/weight: declares 1099511627776 elements"):
        sio.load(p)
    with h5py.File(p, "a") as f:
        del f["edges/weight"]
        f.create_dataset("edges/weight", shape=(6,), dtype="<f8", data=np.ones(6))
        del f["nodes/kind"]
        f.create_dataset("nodes/kind", shape=(3_000_000,), dtype="u1", chunks=(2**16,),
                         compression="gzip")
    with pytest.raises(FormatError, match="/nodes/scope_ptr: has length 8, expected 3000001"):
        sio.load(p, limits=Limits(max_elements=2**23))
    with pytest.raises(FormatError, match="/nodes/kind: declares 3000000 elements, above"):
        sio.load(p, limits=Limits(max_elements=2**20))


def test_links_are_refused(tmp_path):
    p = tmp_path / "links.h5"
    write_raw(base_tree(), p)
    with h5py.File(p, "a") as f:
        f["x_soft"] = h5py.SoftLink("/edges/weight")
    with pytest.raises(FormatError, match=r"/x_soft: is a soft link"):
        sio.load(p)
    with h5py.File(p, "a") as f:
        del f["x_soft"]
        del f["edges/weight"]
        f["edges/weight"] = h5py.ExternalLink("other.h5", "/w")
    with pytest.raises(FormatError, match=r"/edges/weight: is an external link"):
        sio.load(p)


def test_non_portable_types(tmp_path):
    p = tmp_path / "types.h5"
    write_raw(base_tree(), p)
    with h5py.File(p, "a") as f:
        f.create_group("stats")
        f["stats/flag"] = np.array([True, False])
    with pytest.raises(FormatError, match=r"/stats/flag: has a non-portable type \((enum|dtype bool)"):
        sio.load(p)
    with h5py.File(p, "a") as f:
        del f["stats/flag"]
        f["stats/pair"] = np.zeros(3, dtype=[("a", "<f8"), ("b", "<i4")])
    with pytest.raises(FormatError, match=r"/stats/pair: has a non-portable type \(compound"):
        sio.load(p)
    with h5py.File(p, "a") as f:
        del f["stats/pair"]
        f.create_dataset("stats/ref", shape=(1,), dtype=h5py.ref_dtype)
    with pytest.raises(FormatError, match=r"/stats/ref: has a non-portable type \(HDF5 reference"):
        sio.load(p)


def test_leaf_parameter_errors_name_the_table(tmp_path):
    t = base_tree()
    t.members["leaves"].members["bernoulli"].members["p"][1] = 1.5
    refuse_h5(tmp_path, t, r"/leaves/bernoulli: ")
    t = base_tree("dag_categorical")
    t.members["leaves"].members["categorical"].members["prob_ptr"][1] = 99
    refuse_h5(tmp_path, t, r"/leaves/categorical/prob_ptr\[2\] = .* smaller than|/leaves/categorical")


def test_json_specific(tmp_path):
    good = (EXAMPLES / "mixed.json").read_text()
    cases = {
        "NaN": (good.replace('"weight": [1.0,1.0,1.0,1.0,0.3,0.7]',
                             '"weight": [1.0,1.0,1.0,1.0,NaN,0.7]'), "NaN is not allowed"),
        "dup": (good.replace('"format": "spnc-model",', '"format": "spnc-model", "format": "x",'),
                "duplicate key 'format'"),
        "bool": (good.replace('"kind": [2,4,1,2,4,1,0]', '"kind": [2,4,true,2,4,1,0]'),
                 "/nodes/kind: booleans"),
        "float": (good.replace('"child": [0,1,3,4,2,5]', '"child": [0,1,3.5,4,2,5]'),
                  "/edges/child: must hold integers"),
        "big": (good.replace('"child": [0,1,3,4,2,5]', '"child": [0,1,3,4,2,99999999999999999999]'),
                "/edges/child: integer 99999999999999999999 is beyond 2\\^53"),
        "deep": ('{"x_a":' * 100000 + "1" + "}" * 100000, "nested too deeply|invalid JSON"),
        "empty": ("", "empty"),
        "list": ("[1, 2]", "top level must be a JSON object"),
        "trunc": (good[: len(good) // 2], "invalid JSON"),
    }
    for key, (text, msg) in cases.items():
        p = tmp_path / f"{key}.json"
        p.write_text(text)
        with pytest.raises(FormatError, match=msg):
            sio.load(p)
    p.write_bytes(b"\xff\xfe{}")
    with pytest.raises(FormatError, match="not UTF-8"):
        sio.load(p)


# ----------------------------------------------------------------- generated corruptions
def _datasets(g: Group, prefix: str = ""):
    for k, m in g.members.items():
        path = f"{prefix}/{k}"
        if isinstance(m, Group):
            yield from _datasets(m, path)
        else:
            yield g, k, path


def _groups(g: Group, prefix: str = ""):
    yield g, prefix or "/"
    for k, m in g.members.items():
        if isinstance(m, Group):
            yield from _groups(m, f"{prefix}/{k}")


VALUES = [-1, 0, 1, 2, 3, 7, 40, 255, 256, -2**31, 2**31 - 1, 2**31, 2**40, -0.5, 0.5, 1.5,
          1e300, -1e-300, np.nan, np.inf, -np.inf]
DTYPES = ["u1", "i4", "i8", "f8", "f4", "u8", "i2"]


def mutate(tree: Group, rng: np.random.Generator) -> Group:
    """Apply 1-3 random structural mutations to a copy of ``tree``."""
    t = copy.deepcopy(tree)
    for _ in range(int(rng.integers(1, 4))):
        op = int(rng.integers(0, 12))
        ds = list(_datasets(t))
        g, k, _ = ds[int(rng.integers(len(ds)))]
        a = g.members[k]
        if op <= 3 and not isinstance(a, list) and len(a):          # poke a value
            i = int(rng.integers(len(a)))
            v = VALUES[int(rng.integers(len(VALUES)))]
            a = a.astype(np.float64) if (a.dtype.kind != "f" and not float(v).is_integer()) else a.copy()
            with np.errstate(all="ignore"):
                try:
                    a[i] = v
                except (OverflowError, ValueError):
                    a = a.astype(np.float64)
                    a[i] = v
            g.members[k] = a
        elif op == 4:                                                # shorten / lengthen
            if isinstance(a, list):
                g.members[k] = a[:-1] if a else ["x"]
            else:
                g.members[k] = a[:-1] if (len(a) and rng.random() < 0.5) else np.append(a, a[:1] if len(a) else 0)
        elif op == 5 and not isinstance(a, list):                    # change dtype
            with np.errstate(all="ignore"):
                g.members[k] = a.astype(DTYPES[int(rng.integers(len(DTYPES)))])
        elif op == 6:                                                # delete
            del g.members[k]
        elif op == 7 and not isinstance(a, list) and len(a) > 1:     # swap / shuffle
            b = a.copy()
            rng.shuffle(b)
            g.members[k] = b
        elif op == 8:                                                # attribute damage
            grp, _ = list(_groups(t))[int(rng.integers(len(list(_groups(t)))))]
            if grp.attrs:
                name = sorted(grp.attrs)[int(rng.integers(len(grp.attrs)))]
                grp.attrs[name] = [[2, 0, 0], [1, 9, 9], "bogus", 3, 1.5, [], ["leaf:nope"],
                                   ["sum"], "", [1, 0]][int(rng.integers(10))]
        elif op == 9:                                                # extra or renamed member
            grp, _ = list(_groups(t))[int(rng.integers(len(list(_groups(t)))))]
            grp.members["x_new" if rng.random() < 0.5 else "extra"] = np.arange(3)
        elif op == 10:                                               # drop a group
            grps = [(gg, p) for gg, p in _groups(t) if p != "/"]
            if grps:
                gg, p = grps[int(rng.integers(len(grps)))]
                parent = t
                for part in p.strip("/").split("/")[:-1]:
                    parent = parent.members[part]
                del parent.members[p.rsplit("/", 1)[1]]
        else:                                                        # empty it
            g.members[k] = a[:0] if not isinstance(a, list) else []
    return t


def _check_one(fn, *args) -> str:
    try:
        fn(*args)
        return "ok"
    except FormatError as e:
        msg = str(e)
        assert msg and "\n" not in msg.strip(), msg
        return "format"


def test_generated_corruptions_json():
    """Thousands of tree mutations through the JSON path: FormatError or success only."""
    rng = np.random.default_rng(12345)
    outcomes = {"ok": 0, "format": 0}
    n = 0
    for name in NAMES:
        tree = base_tree(name)
        for _ in range(600):
            t = mutate(tree, rng)
            try:
                text = jsonio.dumps_tree(rehash(t))
            except (FormatError, TypeError, ValueError):
                continue       # the writer refused (NaN etc.); not a reader case
            outcomes[_check_one(lambda s: sio.validate_tree(jsonio.loads_tree(s)), text)] += 1
            n += 1
    assert n >= 3000 and outcomes["format"] > n // 2, outcomes


def test_generated_corruptions_hdf5(tmp_path):
    rng = np.random.default_rng(999)
    p = tmp_path / "m.h5"
    outcomes = {"ok": 0, "format": 0}
    for name in NAMES:
        tree = base_tree(name)
        for _ in range(60):
            t = mutate(tree, rng)
            write_raw(t, p)
            outcomes[_check_one(sio.load, p)] += 1
    assert outcomes["format"] > 0, outcomes


def test_generated_json_text_corruptions():
    rng = np.random.default_rng(7)
    texts = [(EXAMPLES / f"{n}.json").read_text() for n in NAMES]
    alphabet = list('{}[]",:0123456789-.eE tfnaNI@x')
    count = 0
    for _ in range(2000):
        s = list(texts[int(rng.integers(len(texts)))])
        for _ in range(int(rng.integers(1, 4))):
            i = int(rng.integers(len(s)))
            op = rng.integers(3)
            if op == 0:
                del s[i]
            elif op == 1:
                s.insert(i, alphabet[int(rng.integers(len(alphabet)))])
            else:
                s[i] = alphabet[int(rng.integers(len(alphabet)))]
        _check_one(lambda x: sio.validate_tree(jsonio.loads_tree(x)), "".join(s))
        count += 1
    assert count == 2000


BYTE_FUZZ = textwrap.dedent("""
    import sys, numpy as np
    import spnc.io as sio
    from spnc.errors import FormatError
    import spnc.leaves.cltree
    src = open(sys.argv[1], "rb").read()
    rng = np.random.default_rng(int(sys.argv[3]))
    out = sys.argv[2]
    bad = 0
    for case in range(int(sys.argv[4])):
        b = bytearray(src)
        if rng.random() < 0.15:
            b = b[: int(rng.integers(len(b)))]
        else:
            for _ in range(int(rng.integers(1, 8))):
                b[int(rng.integers(len(b)))] = int(rng.integers(256))
        open(out, "wb").write(bytes(b))
        print(case, flush=True)
        try:
            sio.load(out)
        except FormatError:
            pass
    print("done", flush=True)
""")


@pytest.mark.parametrize("name", ["mixed", "learner_stats"])
def test_byte_level_hdf5_corruption_in_subprocess(tmp_path, name):
    """Random byte flips and truncations; run in a child so a libhdf5 crash is reported."""
    script = tmp_path / "fuzz.py"
    script.write_text(BYTE_FUZZ)
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[1]))
    n = 800
    res = subprocess.run([sys.executable, str(script), str(EXAMPLES / f"{name}.h5"),
                          str(tmp_path / "f.h5"), "5", str(n)],
                         capture_output=True, text=True, timeout=240, env=env)
    lines = res.stdout.split()
    assert res.returncode == 0 and lines[-1] == "done", \
        f"case {lines[-1] if lines else '?'} crashed: rc={res.returncode}\n{res.stderr[-2000:]}"
