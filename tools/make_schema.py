"""Write formats/spnc-model.schema.json (JSON Schema draft 2020-12 for format 1.1, §6).

The schema is generated so that the strict form (files of minor version <= 1: unknown
members are errors, §10) and the lax form (newer minor versions: unknown members allowed)
share one description. Run: python tools/make_schema.py
"""
from __future__ import annotations

import json
from pathlib import Path

NAME = r"[A-Za-z_][A-Za-z0-9_.\-]{0,127}"
X_NAME = r"x_[A-Za-z0-9_.\-]{0,126}"
SAFE = 2**53 - 1
INTS = {"u1": (0, 255), "u2": (0, 65535), "u4": (0, 2**32 - 1), "u8": (0, 2**64 - 1),
        "i1": (-128, 127), "i2": (-32768, 32767), "i4": (-2**31, 2**31 - 1),
        "i8": (-2**63, 2**63 - 1)}
F4_MAX = 3.4028234663852886e38
STD_LEAVES = {
    "bernoulli": {"p": "prob"},
    "categorical": {"prob_ptr": "ptr", "prob": "probs"},
    "gaussian": {"mean": "f8s", "std": "pos_f8s"},
    "mvgaussian": {"mean_ptr": "ptr", "mean": "f8s", "cov_ptr": "ptr", "cov": "f8s"},
    "cltree": {"parent_ptr": "ptr", "parent": "parents", "cpt_ptr": "ptr", "cpt": "probs"},
    "indicator": {"value": "i4s_nonneg"},
}


def ref(name: str) -> dict:
    return {"$ref": f"#/$defs/{name}"}


def arr(items: dict, **kw) -> dict:
    return {"type": "array", "items": items, **kw}


def int_def(code: str) -> dict:
    lo, hi = INTS[code]
    small = {"type": "integer", "minimum": max(lo, -SAFE), "maximum": min(hi, SAFE)}
    if hi <= SAFE:
        return small
    # J5: magnitudes beyond 2^53 - 1 are decimal strings (exact range: checked by readers)
    pat = r"^[1-9][0-9]{15,19}$" if lo == 0 else r"^-?[1-9][0-9]{15,18}$"
    return {"anyOf": [small, {"type": "string", "pattern": pat}]}


def defs() -> dict:
    d: dict = {f"num_{c}": int_def(c) for c in INTS}
    d["num_f8"] = {"type": "number"}
    d["num_f4"] = {"type": "number", "minimum": -F4_MAX, "maximum": F4_MAX}
    d["num_str"] = {"type": "string"}
    codes = list(INTS) + ["f4", "f8", "str"]
    both = {"dtype": {"enum": codes}, "data": True}
    d["typed"] = {"type": "object", "required": ["dtype", "data"], "additionalProperties": False,
                  "properties": both,
                  "oneOf": [{"properties": {"dtype": {"const": c}, "data": arr(ref(f"num_{c}"))}}
                            for c in codes]}
    d["typed_attr"] = {"type": "object", "required": ["dtype", "data"], "additionalProperties": False,
                       "properties": both,
                       "oneOf": [{"properties": {"dtype": {"const": c},
                                                 "data": {"anyOf": [ref(f"num_{c}"), arr(ref(f"num_{c}"), maxItems=4096)]}}}
                                 for c in codes]}
    # J4: strings plain, numbers typed; 1.0 plain numbers accepted (i8/f8 by token)
    d["attr"] = {"anyOf": [{"type": "string"}, arr({"type": "string"}, maxItems=4096),
                           ref("typed_attr"), {"type": "number"},
                           arr({"type": "number"}, maxItems=4096)]}
    d["ptr"] = arr({"type": "integer", "minimum": 0, "maximum": SAFE}, minItems=1)
    d["ids"] = arr({"type": "integer", "minimum": 0, "maximum": SAFE})
    d["i4s_nonneg"] = arr({"type": "integer", "minimum": 0, "maximum": 2**31 - 1})
    d["parents"] = arr({"type": "integer", "minimum": -1, "maximum": 2**31 - 1})
    d["f8s"] = arr({"type": "number"})
    d["pos_f8s"] = arr({"type": "number", "exclusiveMinimum": 0})
    d["prob"] = arr({"type": "number", "minimum": 0, "maximum": 1})
    d["probs"] = d["prob"]
    d["features"] = arr({"type": "string", "pattern": "^leaf:[a-z0-9_]+$"}, uniqueItems=True,
                        maxItems=4096)
    # free groups: /stats and /learner (no sub-groups), x_* groups (nested)
    ext_attr = {f"^@{NAME}$": ref("attr")}
    d["flat_group"] = {"type": "object", "patternProperties": {**ext_attr, f"^{NAME}$": ref("typed")},
                       "propertyNames": {"not": {"enum": ["dtype", "data"]}},
                       "additionalProperties": False, "maxProperties": 8192}
    d["ext"] = {"anyOf": [ref("typed"), ref("ext_group")]}
    d["ext_group"] = {"type": "object",
                      "patternProperties": {**ext_attr, f"^{NAME}$": ref("ext")},
                      "propertyNames": {"not": {"enum": ["dtype", "data"]}},
                      "additionalProperties": False, "maxProperties": 8192}
    d["vendor_leaf"] = {"type": "object", "required": ["node"],
                        "patternProperties": {**ext_attr, f"^{NAME}$": {"anyOf": [ref("typed"), ref("f8s")]}},
                        "additionalProperties": False}
    return d


def group(props: dict, required: list[str], extra_attrs: dict | None = None) -> dict:
    """A fixed group: its members plus @x_* attributes and x_* members (§9)."""
    return {"type": "object", "required": required, "properties": {**props, **(extra_attrs or {})},
            "patternProperties": {f"^@x_{X_NAME[2:]}$": ref("attr"), f"^x_{X_NAME[2:]}$": ref("ext")},
            "maxProperties": 4096}


def groups() -> dict:
    leaves = {k: ref(f"leaf_{k}") for k in STD_LEAVES}
    leaves_group = {"type": "object", "properties": leaves,
                    "patternProperties": {f"^@{NAME}$": ref("attr"), f"^x_{X_NAME[2:]}$":
                                          {"anyOf": [ref("vendor_leaf"), ref("ext")]}},
                    "maxProperties": 4096}
    return {
        "variables": group({"type": arr({"type": "integer", "minimum": 0, "maximum": 2}, minItems=1),
                            "cardinality": ref("i4s_nonneg"),
                            "name": arr({"type": "string", "minLength": 1, "maxLength": 1024},
                                        uniqueItems=True)}, ["type", "cardinality"]),
        "nodes": group({"@kind_names": arr({"type": "string"}, maxItems=256),
                        "kind": arr({"type": "integer", "minimum": 0, "maximum": 255}, minItems=1),
                        "scope_ptr": ref("ptr"), "scope": ref("i4s_nonneg")},
                       ["@kind_names", "kind", "scope_ptr", "scope"]),
        "edges": group({"ptr": ref("ptr"), "child": ref("ids"),
                        "weight": arr({"type": "number", "minimum": 0})}, ["ptr", "child", "weight"]),
        "roots": group({"@combine": {"enum": ["single", "mixture", "independent"]},
                        "node": {"allOf": [ref("ids"), {"minItems": 1, "uniqueItems": True}]},
                        "weight": arr({"type": "number", "minimum": 0})}, ["@combine", "node"]),
        "leaves": leaves_group,
        "fallback": {"type": "object", "required": ["node", "target"],
                     "properties": {"node": ref("ids"), "target": ref("ids")}},
        "stats": ref("flat_group"),
        "learner": {"allOf": [ref("flat_group")], "required": ["@name"],
                    "properties": {"@name": {"type": "string"}, "@version": {"type": "string"},
                                   "@params": {"type": "string", "maxLength": 60000}}},
    }


def leaf_defs() -> dict:
    return {f"leaf_{k}": group({"node": ref("ids"), **{p: ref(t) for p, t in ds.items()}},
                               ["node", *ds]) for k, ds in STD_LEAVES.items()}


def schema() -> dict:
    g = {k: ref(f"g_{k}") for k in groups()}
    root_attrs = {
        "format": {"const": "spnc-model"},
        "format_version": {"type": "array", "items": False, "minItems": 3,
                           "prefixItems": [{"const": 1}, ref("num_u4"), ref("num_u4")]},
        "required_features": ref("features"), "optional_features": ref("features"),
        "content_hash": {"type": "string", "pattern": "^sha256:[0-9a-f]{64}$"},
        "creator": {"type": "string"}, "created": {"type": "string"},
        "model_uuid": {"type": "string"}, "source_format": {"type": "string"},
    }
    base = {"type": "object",
            "required": ["format", "format_version", "required_features", "variables", "nodes",
                         "edges", "roots", "leaves"],
            "properties": {**root_attrs, **g},
            "patternProperties": {f"^@x_{X_NAME[2:]}$": ref("attr"),
                                  f"^x_{X_NAME[2:]}$": {"anyOf": [ref("attr"), ref("ext")]}}}
    # strict (minor <= 1): known groups admit nothing else; lax (newer minor): anything more
    closed = {k: {"$ref": f"#/$defs/g_{k}", "unevaluatedProperties": False}
              for k in ("variables", "nodes", "edges", "roots", "fallback")}
    closed["leaves"] = {"$ref": "#/$defs/g_leaves", "unevaluatedProperties": False,
                        "properties": {k: {"$ref": f"#/$defs/leaf_{k}", "unevaluatedProperties": False}
                                       for k in STD_LEAVES}}
    strict = {"properties": closed, "unevaluatedProperties": False}
    minor_le1 = {"properties": {"format_version": {"prefixItems": [True, {"maximum": 1}]}}}
    minor_0 = {"properties": {"format_version": {"prefixItems": [True, {"maximum": 0}]}}}
    new_in_11 = {"anyOf": [{"required": [k]} for k in ("optional_features", "content_hash", "fallback")]}
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": "urn:spnc:formats:spnc-model:1.1",
        "title": "spnc model file, format 1.1, JSON encoding",
        "description": ("Generated by tools/make_schema.py from formats/spnc-hdf5.md §6. Checks "
                        "shapes, names, dtypes and the value ranges of typed data. Left to "
                        "readers (§7): cross-array rules, byte lengths of strings, the exact "
                        "range of integers written as strings, nesting depth."),
        "allOf": [ref("root"),
                  {"if": minor_le1, "then": {"$ref": "#/$defs/root", **strict}},
                  {"if": minor_0, "then": {"not": new_in_11}}],
        "$defs": {"root": base, **defs(), **{f"g_{k}": v for k, v in groups().items()}, **leaf_defs()},
    }


if __name__ == "__main__":
    import argparse
    argparse.ArgumentParser(description=__doc__.splitlines()[0]).parse_args()   # --help: no write
    out = Path(__file__).resolve().parents[1] / "formats" / "spnc-model.schema.json"
    out.write_text(json.dumps(schema(), indent=1, ensure_ascii=False) + "\n")
    print(out)
