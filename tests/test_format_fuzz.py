"""A few hundred seeded byte corruptions of saved models (tools/fuzz_format.py): each is
refused with FormatError or leaves the content hash valid; no crash, no silent change."""
from __future__ import annotations

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
spec = importlib.util.spec_from_file_location("fuzz_format", ROOT / "tools" / "fuzz_format.py")
ff = importlib.util.module_from_spec(spec)
spec.loader.exec_module(ff)


def test_corruptions_are_refused_or_harmless():
    files = ff.sources(ff.DEFAULT)
    assert len(files) >= 20
    res = ff.run(files, 300, seed=2026)
    bad = res.pop("bad")
    assert not bad, bad[:5]
    assert res["refused"] + res["same"] == 300 and res["refused"] > 150, res
