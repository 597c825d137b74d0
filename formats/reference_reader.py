"""Reference reader of the spnc model format 1.1 (formats/spnc-hdf5.md), both encodings.

Written from the spec alone, in plain h5py + numpy (no spnc):
    m = Model("model.h5")              # or .json; raises Refused naming the rule (§7) broken
    m.log_likelihood(X)                # X: (n, V) floats, NaN = missing; out-of-domain -> Refused
``Model(path, version=(1, 0))`` behaves as a reader that implements only format 1.0 (§10).
"""
import hashlib
import json
import re
import struct

import h5py
import numpy as np

CODES = "u1 u2 u4 u8 i1 i2 i4 i8 f4 f8 str".split()
TAU, SAFE = 1e-6, re.compile(r"[A-Za-z_][A-Za-z0-9_.\-]{0,127}")
STD = ["sum", "product", "bernoulli", "categorical", "gaussian", "mvgaussian", "cltree", "indicator"]
LEAF = {"bernoulli": {"p": "f8"}, "categorical": {"prob_ptr": "i8", "prob": "f8"},
        "gaussian": {"mean": "f8", "std": "f8"},
        "mvgaussian": {"mean_ptr": "i8", "mean": "f8", "cov_ptr": "i8", "cov": "f8"},
        "cltree": {"parent_ptr": "i8", "parent": "i4", "cpt_ptr": "i8", "cpt": "f8"},
        "indicator": {"value": "i4"}}
FIXED = {"variables": {"type": "u1", "cardinality": "i4", "name": "str"},
         "nodes": {"kind": "u1", "scope_ptr": "i8", "scope": "i4", "@kind_names": "str"},
         "edges": {"ptr": "i8", "child": "i8", "weight": "f8"},
         "roots": {"node": "i8", "weight": "f8", "@combine": "str"},
         "fallback": {"node": "i8", "target": "i8"}, "leaves": {},
         "stats": {}, "learner": {"@name": "str", "@version": "str", "@params": "str"}}
# names each minor version defines at the root (attributes with "@")
ROOT = {0: {"@format", "@format_version", "@required_features", "@creator", "@created", "@model_uuid",
            "@source_format", "variables", "nodes", "edges", "roots", "leaves", "stats", "learner"}}
ROOT[1] = ROOT[0] | {"@optional_features", "@content_hash", "fallback"}
SKIP = {"content_hash", "creator", "created", "model_uuid", "source_format"}


class Refused(Exception):
    """The file or a data row breaks a rule of the spec."""


def need(ok, msg):
    if not ok:
        raise Refused(msg)


class V:
    """A dataset or attribute: dtype code, scalar flag, data (numpy array or list of str)."""
    def __init__(self, code, scalar, data):
        self.code, self.scalar, self.data = code, scalar, data


def _code(tid, dt, where):
    s = h5py.check_string_dtype(dt)
    if s is not None:
        need(s.length and tid.get_strpad() in (h5py.h5t.STR_NULLPAD, h5py.h5t.STR_NULLTERM),
             f"T3: {where}: strings must be fixed-length and NUL-padded")
        return "str"
    ok = dt.kind in "iuf" and dt.names is None and h5py.check_dtype(enum=dt) is None
    need(ok and f"{dt.kind}{dt.itemsize}" in "u1 u2 u4 u8 i1 i2 i4 i8 f4 f8".split(), f"T2: {where}: type {dt}")
    return f"{dt.kind}{dt.itemsize}"


def _value(code, raw, scalar, where):
    if code == "str":
        out = []
        for b in np.atleast_1d(raw).tolist():
            try:
                s = b.decode("utf-8") if isinstance(b, bytes) else b
            except UnicodeDecodeError:
                raise Refused(f"T3: {where}: invalid UTF-8") from None
            need("\0" not in s, f"T3: {where}: NUL in a string")
            out.append(s)
        return V(code, scalar, out)
    a = np.atleast_1d(np.asarray(raw)).astype(np.dtype(code).newbyteorder("="))
    need(a.dtype.kind != "f" or np.isfinite(a).all(), f"P2: {where}: value not finite")
    return V(code, scalar, a)


def _attr(v, where):
    need(len(v.data) <= 4096, f"L3: {where}: too many elements")
    need(v.code != "str" or len(v.data) * max([1] + [len(s.encode()) for s in v.data]) <= 60000, f"L3: {where}")
    return v


def _walk(g, path, depth, count):
    need(depth <= 8 and len(g) <= 4096, f"L2: {path}: too deep or too many members")
    node = {}
    for n in g.attrs:
        where = f"{path}@{n}"
        need(SAFE.fullmatch(n), f"T7: {where}: bad name")
        aid = h5py.h5a.open(g.id, n.encode())
        need(aid.shape is not None and len(aid.shape) <= 1, f"T1: {where}: not scalar or 1-D")
        code = _code(aid.get_type(), aid.dtype, where)
        node["@" + n] = _attr(_value(code, g.attrs[n], aid.shape == (), where), where)
    for n in g:
        where, count[0] = f"{path.rstrip('/')}/{n}", count[0] + 1
        need(SAFE.fullmatch(n) and n not in ("dtype", "data"), f"T7: {where}: bad name")
        need(isinstance(g.get(n, getlink=True), h5py.HardLink) and count[0] <= 16384, f"T4/L2: {where}")
        obj = g[n]
        if isinstance(obj, h5py.Group):
            node[n] = _walk(obj, where, depth + 1, count)
            continue
        need(isinstance(obj, h5py.Dataset) and not obj.is_virtual and not obj.external, f"T4: {where}")
        need(obj.shape is not None and len(obj.shape) == 1, f"T1: {where}: not 1-D")
        code = _code(obj.id.get_type(), obj.dtype, where)
        plist = obj.id.get_create_plist()
        need(all(plist.get_filter(i)[0] in (1, 2, 3) for i in range(plist.get_nfilters())), f"T5: {where}")
        need(len(obj.attrs) == 0, f"T6: {where}: dataset with attributes")
        count[1] += obj.shape[0]
        need(obj.shape[0] <= 2**28 and count[1] <= 2**29, f"L1: {where}: too large")
        node[n] = _value(code, obj[()] if obj.shape[0] else [], False, where)
    return node


def _read_json(path):
    raw = open(path, "rb").read()
    need(raw and not raw.startswith(b"\xef\xbb\xbf"), f"C1/J1: {path}: empty or with a byte-order mark")

    def pairs(kv):
        need(len({k for k, _ in kv}) == len(kv), f"J1: {path}: duplicate key")
        return dict(kv)

    def const(c):
        raise Refused(f"J1: {path}: {c} is not JSON")
    try:
        obj = json.loads(raw.decode("utf-8"), object_pairs_hook=pairs, parse_constant=const)
    except (ValueError, RecursionError) as e:
        raise Refused(f"J1: {path}: {e}") from None
    need(isinstance(obj, dict), f"J1: {path}: top level is not an object")
    return _jgroup(obj, "/", 0, [0, 0])


def _jnum(x, code, where):
    """J5: a JSON value as a number of dtype ``code`` (integers beyond 2^53 - 1 as strings)."""
    need(not isinstance(x, bool) and isinstance(x, (int, float, str)), f"J5: {where}: {x!r} is not a number")
    if code[0] in "iu":
        if isinstance(x, str):
            need(re.fullmatch(r"-?[1-9][0-9]{15,19}", x) and abs(int(x)) > 2**53 - 1, f"J5: {where}: {x!r}")
        else:
            need(x == x and abs(x) <= 2**53 - 1 and x == int(x), f"J5: {where}: {x!r} is not a safe integer")
        need(np.iinfo(code).min <= int(x) <= np.iinfo(code).max, f"J5: {where}: {x} outside {code}")
        return int(x)
    need(not isinstance(x, str) and (code == "f8" or abs(float(x)) <= 3.4028234663852886e38), f"J5: {where}")
    return float(x)


def _jvalue(code, data, scalar, where):
    vals = data if isinstance(data, list) else [data]
    if code == "str":
        need(all(isinstance(x, str) for x in vals), f"J4: {where}: not strings")
        return _value(code, vals, scalar, where)
    return _value(code, np.array([_jnum(x, code, where) for x in vals], dtype=np.dtype(code)), scalar, where)


def _jgroup(obj, path, depth, count):
    """J2-J4: keys to attributes, typed or plain datasets, and groups."""
    need(depth <= 8 and len(obj) <= 8192, f"L2: {path}: too deep or too many members")
    node, g = {}, path.strip("/")
    table = g.split("/")[1] if g.startswith("leaves/") else None
    for k, v in obj.items():
        name, where = k[1:] if k[0:1] == "@" else k, f"{path.rstrip('/')}/{k}"
        need(SAFE.fullmatch(name), f"T7: {where}: bad name")
        typed = isinstance(v, dict) and set(v) == {"dtype", "data"}
        if k[0:1] == "@" or (path == "/" and not isinstance(v, dict)):
            fixed = {"format_version": "u4"}.get(name) if path == "/" else None
            fixed_str = (path == "/" and "@" + name in ROOT[1]) or "@" + name in FIXED.get(g, {})
            if typed:
                need(not fixed_str and v["dtype"] in CODES, f"J4: {where}: typed fixed attribute or bad dtype")
                node["@" + name] = _attr(_jvalue(v["dtype"], v["data"], not isinstance(v["data"], list), where), where)
            elif isinstance(v, str) or (isinstance(v, list) and v == [x for x in v if isinstance(x, str)] and not fixed):
                node["@" + name] = _attr(_jvalue("str", v, isinstance(v, str), where), where)
            else:                          # a plain number or array (format_version; the 1.0 form)
                need(not isinstance(v, (dict, bool)) and v is not None, f"J4: {where}: bad attribute value")
                ints = all(type(x) is int for x in (v if isinstance(v, list) else [v]))
                node["@" + name] = _attr(_jvalue(fixed or ("i8" if ints else "f8"), v, not isinstance(v, list), where), where)
            continue
        need(name not in ("dtype", "data"), f"T7: {where}: reserved name")
        plain = FIXED.get(g, {}).get(name) if g in ("variables", "nodes", "edges", "roots", "fallback") else \
            ({"node": "i8", **LEAF[table]}.get(name) if table in LEAF else None)
        count[0] += 1
        if typed:
            need(plain is None and v["dtype"] in CODES and isinstance(v["data"], list), f"J3: {where}")
            node[name] = _jvalue(v["dtype"], v["data"], False, where)
        elif plain is not None:
            need(isinstance(v, list), f"J3: {where}: must be an array")
            node[name] = _jvalue(plain, v, False, where)
        else:
            need(isinstance(v, dict), f"J3: {where}: datasets here are typed")
            node[name] = _jgroup(v, where, depth + 1, count)
            continue
        count[1] += len(node[name].data)
        need(count[0] <= 16384 and len(node[name].data) <= 2**28 and count[1] <= 2**29, f"L1: {where}")
    return node


def _hash(node, path, h):
    rec = (lambda tag, p, c, n, pay: h.update(tag + struct.pack("<I", len(p.encode())) + p.encode()
                                              + struct.pack("<B", len(c)) + c.encode() + struct.pack("<Q", n) + pay))
    rec(b"g", path, "", 0, b"")
    for k in sorted(node, key=lambda k: (k[0] != "@", k.lstrip("@").encode())):
        v, name = node[k], k.lstrip("@")
        if isinstance(v, dict):
            _hash(v, f"{path.rstrip('/')}/{k}", h)
            continue
        if k[0] == "@" and path == "/" and name in SKIP:
            continue
        pay = b"".join(struct.pack("<I", len(s.encode())) + s.encode() for s in v.data) if v.code == "str" \
            else v.data.astype(np.dtype(v.code).newbyteorder("<")).tobytes()
        tag = (b"s" if v.scalar else b"a") if k[0] == "@" else b"d"
        rec(tag, f"{path}@{name}" if k[0] == "@" else f"{path.rstrip('/')}/{k}", v.code, len(v.data), pay)


def _ptr(p, n, flat, where):
    need(p.size == n + 1 and p[0] == 0 and (np.diff(p) >= 0).all() and p[-1] == flat, f"G1: {where}")


class Model:
    def __init__(self, path, version=(1, 1)):
        if str(path).endswith(".json"):
            return self._check(_read_json(path), version[1])
        with open(path, "rb") as f:
            need(f.read(8) == b"\x89HDF\r\n\x1a\n", f"C1: {path}: no HDF5 signature at byte 0")
        try:
            with h5py.File(path, "r") as f:
                t = _walk(f, "/", 0, [0, 0])
        except Refused:
            raise
        except Exception as e:      # libhdf5: truncation, damaged metadata, checksums
            raise Refused(f"C2: {path}: {e}") from None
        self._check(t, version[1])

    def _check(self, t, r):
        A = lambda k, g=t, code="str": g[k].data if k in g and g[k].code == code else None  # noqa: E731
        need(A("@format") == ["spnc-model"] and t["@format"].scalar, "V1: @format")
        fv = A("@format_version", code="u4")
        need(fv is not None and len(fv) == 3 and fv[0] == 1 and not t["@format_version"].scalar, "V2")
        m = int(fv[1])
        known, strict = ROOT[min(m, r)], m <= r
        self.strict = strict
        need(not strict or all(k in known or k.lstrip("@").startswith("x_") for k in t), "V4: unknown name")
        req, opt = A("@required_features"), (A("@optional_features") if "@optional_features" in t and "@optional_features" in known else [])
        need(req is not None and opt is not None and not t["@required_features"].scalar, "V3: features")
        need(all(re.fullmatch(r"leaf:[a-z0-9_]+", f) for f in req + opt) and len(set(req)) == len(req)
             and len(set(opt)) == len(opt) and not set(req) & set(opt), "V3/X2: feature lists")
        need(all(f[5:] in STD for f in req), "V3: unknown required feature")
        for g in ("variables", "nodes", "edges", "roots", "leaves"):
            need(isinstance(t.get(g), dict), f"G: /{g} missing")
        for g in [g for g in FIXED if g in t and g in known]:
            need(isinstance(t[g], dict), f"T: /{g} is not a group")
            for k, v in t[g].items():
                if k in FIXED[g]:
                    need(isinstance(v, V) and v.code == FIXED[g][k] and v.scalar == (k[0] == "@" and k != "@kind_names"), f"T2: /{g}/{k}")
                else:
                    need(not strict or k.lstrip("@").startswith("x_") or g in ("stats", "learner")
                         or (g == "leaves" and k[0] != "@"), f"V4: /{g}/{k}")
                    need(g not in ("stats", "learner") or isinstance(v, V), f"P11: /{g}/{k} is a group")
        D = lambda g, k: t[g][k].data if k in t[g] else None  # noqa: E731
        # variables (P10)
        vt, card, names = D("variables", "type"), D("variables", "cardinality"), D("variables", "name")
        need(vt is not None and card is not None and 1 <= vt.size <= 2**24 and card.size == vt.size, "P10")
        need(((vt == 0) & (card == 2) | (vt == 1) & (card >= 2) | (vt == 2) & (card == 0)).all(), "P10: types")
        need(names is None or (len(names) == vt.size and len(set(names)) == len(names)
                               and all(0 < len(s.encode()) <= 1024 for s in names)), "P10/L3: names")
        self.card = card.astype(np.int64)
        # nodes, kinds (G4, X1), scopes (G5)
        kind, sp, sc, kn = (D("nodes", k) for k in ("kind", "scope_ptr", "scope", "@kind_names"))
        need(all(x is not None for x in (kind, sp, sc, kn)), "G: /nodes incomplete")
        need(1 <= kind.size < 2**31 - 1 and len(kn) <= 256, "L1/X1: nodes")
        need(len([n for n in kn if n]) == len(set(n for n in kn if n)), "X1: kind named twice")
        N = kind.size
        _ptr(sp, N, sc.size, "/nodes/scope_ptr")
        need(((sc >= 0) & (sc < vt.size)).all() and (np.diff(sp) > 0).all(), "G2/G5: scope")
        self.scope = [tuple(sc[sp[n]:sp[n + 1]].tolist()) for n in range(N)]
        need(all(list(s) == sorted(set(s)) for s in self.scope), "G5: scope not ascending")
        self.fb_codes = set()
        for c in np.unique(kind).tolist():
            nm = kn[c] if c < len(kn) else ""
            if c < 8:
                need(nm == STD[c], f"G4: code {c} named {nm!r}")
                continue
            need(re.fullmatch(r"x_[a-z0-9]+_[a-z0-9_]+", nm) if c >= 128 else nm and not nm.startswith("x_"), "X1")
            need(f"leaf:{nm}" in opt and r >= 1, f"X1/G4: leaf type {nm!r} unknown or unlisted")
            self.fb_codes.add(c)
        # edges (G1-G5, P1)
        ptr, child, w = D("edges", "ptr"), D("edges", "child"), D("edges", "weight")
        need(ptr is not None and child is not None and w is not None, "G: /edges")
        _ptr(ptr, N, child.size, "/edges/ptr")
        need(w.size == child.size and (w >= 0).all(), "P1: weights")
        par = np.repeat(np.arange(N), np.diff(ptr))
        need(((child >= 0) & (child < par)).all(), "G2/G3: child ids")
        deg = np.diff(ptr)
        need(((kind >= 2) == (deg == 0)).all(), "G4: leaves have no children, others some")
        for n in np.flatnonzero(kind < 2):
            ch, ws = child[ptr[n]:ptr[n + 1]], w[ptr[n]:ptr[n + 1]]
            need(len(set(ch.tolist())) == ch.size, "G4: duplicate child")
            if kind[n] == 0:
                need(abs(ws.sum() - 1) <= TAU, "P1: sum weights")
                need(all(self.scope[c] == self.scope[n] for c in ch), "G5: completeness")
            else:
                need((ws == 1.0).all(), "P1: product weight")
                need(sorted(v for c in ch for v in self.scope[c]) == list(self.scope[n]), "G5: decomposability")
        self.kind, self.ptr, self.child = kind, ptr, child
        with np.errstate(divide="ignore"):
            self.logw = np.log(w)
        self._leaves(t, kn, vt)
        # roots (G6)
        comb, roots, rw = D("roots", "@combine"), D("roots", "node"), D("roots", "weight")
        need(comb in (["single"], ["mixture"], ["independent"]) and roots is not None, "G6: roots")
        need(1 <= roots.size <= N and ((roots >= 0) & (roots < N)).all() and np.unique(roots).size == roots.size, "G6")
        need(comb != ["single"] or roots.size == 1, "G6: single")
        need((rw is not None) == (comb == ["mixture"]), "G6: weight iff mixture")
        if rw is not None:
            need(rw.size == roots.size and (rw >= 0).all() and abs(rw.sum() - 1) <= TAU, "G6: root weights")
            need(all(self.scope[x] == self.scope[roots[0]] for x in roots), "G6: mixture scopes")
        self.combine, self.roots, self.rw = comb[0], roots, rw
        # fallback (X2) and reachability (G7)
        self.fb = np.full(N, -1)
        if "fallback" in t and "fallback" in known:
            fn, ft = D("fallback", "node"), D("fallback", "target")
            need(fn is not None and ft is not None and fn.size == ft.size and len(t["fallback"]) == 2, "X2")
            need(((fn >= 0) & (fn < N)).all() and np.unique(fn).size == fn.size and (kind[fn] >= 8).all(), "X2")
            need(((ft >= 0) & (ft < fn)).all() and all(self.scope[a] == self.scope[b] for a, b in zip(fn, ft)), "X2")
            self.fb[fn] = ft
            need(all(kind[n] < 8 for n in self._reach(ft, False)), "X2: vendor node under a target")
        need(all(self.fb[kind == c].min() >= 0 for c in self.fb_codes), "X2: no fallback")
        need(len(self._reach(roots, True)) == N, "G7: unreachable node")
        # stats, learner (P11), content hash (H1)
        cnt = D("stats", "count") if "stats" in t else None
        need(cnt is None or (t["stats"]["count"].code == "f8" and cnt.size == N and (cnt >= 0).all()), "P11")
        if "learner" in t:
            need(D("learner", "@name") is not None, "P11: @name")
            p = D("learner", "@params")
            try:
                need(p is None or (len(p[0].encode()) <= 60000 and isinstance(json.loads(p[0]), dict)), "P11")
            except ValueError:
                raise Refused("P11: @params is not JSON") from None
        need("@content_hash" in t or "@content_hash" not in known or m < 1, "H1: content hash missing")
        if "@content_hash" in t and "@content_hash" in known:
            hv = A("@content_hash")
            need(hv is not None and re.fullmatch(r"sha256:[0-9a-f]{64}", hv[0]), "H1: syntax")
            h = hashlib.sha256()
            _hash(t, "/", h)
            need(hv[0] == "sha256:" + h.hexdigest(), "H1: content hash does not match")

    def _reach(self, start, fallback):
        seen, stack = set(), [int(x) for x in start]
        while stack:
            n = stack.pop()
            if n not in seen:
                seen.add(n)
                stack += self.child[self.ptr[n]:self.ptr[n + 1]].tolist()
                stack += [int(self.fb[n])] if fallback and self.fb[n] >= 0 else []
        return seen

    def _leaves(self, t, kn, vt):
        """P3-P9: one table per standard type; every leaf listed once."""
        listed, card, self.tables = np.zeros(self.kind.size, int), self.card, {}
        for name, g in t["leaves"].items():
            if name[0] == "@" or (name.startswith("x_") and name not in kn) or name in [kn[c] for c in self.fb_codes]:
                continue
            need(name in LEAF and isinstance(g, dict), f"P3: unknown leaf table {name}")
            need(not self.strict or all(k[1:].startswith("x_") for k in g if k[0] == "@"), f"V4: /leaves/{name}@")
            g = {k: v for k, v in g.items() if k[0] != "@"}     # attributes: x_* are free (§9)
            need(set(g) == {"node", *LEAF[name]} and g["node"].code == "i8"
                 and all(g[k].code == c for k, c in LEAF[name].items()), f"T2/P3: /leaves/{name} datasets")
            p = {k: v.data for k, v in g.items()}
            node, L = p["node"], p["node"].size
            need(((node >= 0) & (node < self.kind.size)).all() and (self.kind[node] == STD.index(name)).all(), "P3")
            listed[node] += 1
            sc = [np.array(self.scope[n]) for n in node]
            disc = name != "gaussian" and name != "mvgaussian"
            need(all(((card[s] > 0) == disc).all() for s in sc), f"P3: {name} over the wrong variable type")
            for k in [k for k in p if k.endswith("_ptr")]:
                _ptr(p[k], L, p[k[:-4]].size, f"/leaves/{name}/{k}")
            need(all(p[k].size == L for k in p if not k.endswith("_ptr") and k + "_ptr" not in p), "P3: lengths")
            one = all(s.size == 1 for s in sc)
            if name == "bernoulli":
                need(one and (card[[s[0] for s in sc]] == 2).all() and ((p["p"] >= 0) & (p["p"] <= 1)).all(), "P4")
            elif name == "categorical":
                pr, pp = p["prob"], p["prob_ptr"]
                need(one and (np.diff(pp) == card[[s[0] for s in sc]]).all() and ((pr >= 0) & (pr <= 1)).all(), "P5")
                need(all(abs(pr[pp[i]:pp[i + 1]].sum() - 1) <= TAU for i in range(L)), "P5: sum")
            elif name == "gaussian":
                need(one and (p["std"] > 0).all(), "P6")
            elif name == "indicator":
                need(one and ((p["value"] >= 0) & (p["value"] < card[[s[0] for s in sc]])).all(), "P9")
            elif name == "mvgaussian":
                d = np.array([s.size for s in sc])
                need((np.diff(p["mean_ptr"]) == d).all() and (np.diff(p["cov_ptr"]) == d * d).all(), "P7: sizes")
                for i in range(L):
                    C = p["cov"][p["cov_ptr"][i]:p["cov_ptr"][i + 1]].reshape(d[i], d[i])
                    need((abs(C - C.T) <= 1e-12 + 1e-9 * np.minimum(abs(C), abs(C.T))).all(), "P7: symmetry")
                    need(_chol(np.tril(C) + np.tril(C, -1).T) is not None, "P7: not positive definite")
            else:
                self._cltree_check(p, sc)
            self.tables[name] = (p, sc)
        need(all(listed[(self.kind >= 2) & (self.kind < 8)] == 1), "P3: leaf missing or listed twice")

    def _cltree_check(self, p, sc):
        for i, s in enumerate(sc):
            par = p["parent"][p["parent_ptr"][i]:p["parent_ptr"][i + 1]]
            need(par.size == s.size and ((par >= -1) & (par < s.size)).all() and (par == -1).sum() == 1, "P8: tree")
            for j in range(s.size):          # following parents from j reaches the root
                k, steps = j, 0
                while par[k] >= 0 and steps <= s.size:
                    k, steps = par[k], steps + 1
                need(steps <= s.size, "P8: cycle")
            c = self.card[s]
            rows = np.where(par < 0, 1, c[np.maximum(par, 0)])
            cpt = p["cpt"][p["cpt_ptr"][i]:p["cpt_ptr"][i + 1]]
            need(cpt.size == (rows * c).sum() and ((cpt >= 0) & (cpt <= 1)).all(), "P8: CPT size")
            o = 0
            for j in range(s.size):
                blk = cpt[o:o + rows[j] * c[j]].reshape(rows[j], c[j])
                o += blk.size
                need((abs(blk.sum(1) - 1) <= TAU).all(), "P8: CPT rows")

    # ------------------------------------------------------------------ evaluation (§5.3)
    def log_likelihood(self, X):
        X = np.asarray(X, dtype=np.float64)
        need(X.ndim == 2 and X.shape[1] == self.card.size, "data: wrong shape")
        ok = np.isnan(X) | np.isfinite(X) & ((self.card == 0) | (X == np.floor(X)) & (X >= 0) & (X < self.card))
        need(ok.all(), "data: a value outside its variable's domain")
        val = np.zeros((self.kind.size, X.shape[0]))
        with np.errstate(divide="ignore", invalid="ignore"):
            for name, (p, sc) in self.tables.items():
                for i, (n, s) in enumerate(zip(p["node"], sc)):
                    val[n] = self._leaf(name, p, i, s, X[:, s])
            for n in range(self.kind.size):
                ch = self.child[self.ptr[n]:self.ptr[n + 1]]
                if self.kind[n] == 1:
                    val[n] = val[ch].sum(0)
                elif self.kind[n] == 0:
                    val[n] = _lse(self.logw[self.ptr[n]:self.ptr[n + 1], None] + val[ch])
                elif self.kind[n] >= 8:          # optional type unknown here: its fallback (§10.2)
                    val[n] = val[self.fb[n]]
            r = val[self.roots]
            if self.combine == "mixture":
                return _lse(np.log(self.rw)[:, None] + r)
        return r[0] if self.combine == "single" else r.T

    def _leaf(self, name, p, i, s, x):
        miss, v = np.isnan(x), np.nan_to_num(x).astype(np.int64) if name != "gaussian" else None
        if name == "bernoulli":
            out = np.log(np.where(v[:, 0] == 1, p["p"][i], 1 - p["p"][i]))
        elif name == "categorical":
            out = np.log(p["prob"][p["prob_ptr"][i] + v[:, 0]])
        elif name == "indicator":
            out = np.log((v[:, 0] == p["value"][i]).astype(float))
        elif name == "gaussian":
            z = (x[:, 0] - p["mean"][i]) / p["std"][i]
            out = -0.5 * z * z - np.log(p["std"][i]) - 0.5 * np.log(2 * np.pi)
        elif name == "mvgaussian":
            return self._mvn(p, i, x, miss)
        else:
            return self._cltree(p, i, s, v, miss)
        return np.where(miss[:, 0], 0.0, out)

    def _mvn(self, p, i, x, miss):
        d = x.shape[1]
        C = p["cov"][p["cov_ptr"][i]:p["cov_ptr"][i + 1]].reshape(d, d)
        C, mu, out = np.tril(C) + np.tril(C, -1).T, p["mean"][p["mean_ptr"][i]:p["mean_ptr"][i + 1]], np.zeros(len(x))
        for r in range(len(x)):
            o = ~miss[r]
            if o.any():
                Lc = _chol(C[np.ix_(o, o)])
                z = np.linalg.solve(Lc, x[r, o] - mu[o])
                out[r] = -0.5 * z @ z - np.log(np.diag(Lc)).sum() - 0.5 * o.sum() * np.log(2 * np.pi)
        return out

    def _cltree(self, p, i, s, v, miss):
        """Sum-product on the tree: children first (deepest variables first)."""
        par = p["parent"][p["parent_ptr"][i]:p["parent_ptr"][i + 1]]
        c = self.card[list(s)]
        cpt, o, blocks = p["cpt"][p["cpt_ptr"][i]:], 0, []
        for j in range(len(s)):
            rows = 1 if par[j] < 0 else c[par[j]]
            blocks.append(cpt[o:o + rows * c[j]].reshape(rows, c[j]))
            o += rows * c[j]
        depth = [0] * len(s)
        for j in range(len(s)):
            k = j
            while par[k] >= 0:
                k, depth[j] = par[k], depth[j] + 1
        lam = [np.where(miss[:, [j]], 1.0, v[:, [j]] == np.arange(c[j])) for j in range(len(s))]
        for j in sorted(range(len(s)), key=lambda j: -depth[j]):
            msg = lam[j] @ blocks[j].T                    # (n, card(parent)) or (n, 1) at the root
            if par[j] < 0:
                return np.log(msg[:, 0])
            lam[par[j]] = lam[par[j]] * msg


def _chol(A):
    try:
        return np.linalg.cholesky(A)
    except np.linalg.LinAlgError:
        return None


def _lse(a):
    m = a.max(0)
    m = np.where(np.isfinite(m), m, 0.0)
    return m + np.log(np.exp(a - m).sum(0))
