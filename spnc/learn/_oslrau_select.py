"""One-pass selection of oSLRAU settings (``OSLRAU(select=...)``): candidate learners
take the same stream side by side, each scores every batch before learning from it
(prequential log-likelihood, computed by the kernel's upward pass at no extra cost), and
the learner with the best mean score is kept. No data is held out and nothing is read
twice, so the choice is as online as the learner."""
from __future__ import annotations

import numpy as np

from ..errors import ParameterError


def _specs(est) -> list[dict]:
    from .oslrau import AUTO_CANDIDATES
    specs = AUTO_CANDIDATES if est.select == "auto" else est.select
    names = set(est._param_names()) - {"select"}
    out = []
    for spec in specs:
        if not isinstance(spec, dict) or not spec.keys() <= names:
            bad = sorted(set(spec) - names) if isinstance(spec, dict) else spec
            raise ParameterError("select", f"OSLRAU: select must be 'auto' or a list of dicts of OSLRAU "
                                           f"parameters; {bad!r} is not")
        out.append(dict(spec))
    if not out:
        raise ParameterError("select", "OSLRAU: select lists no candidate")
    return out


def candidates(est) -> list:
    """One fresh learner per candidate: ``est``'s parameters with the candidate's
    overrides."""
    base = est.get_params()
    base["select"] = None
    return [type(est)(**{**base, **spec}) for spec in _specs(est)]


def keep_best(est, learners: list) -> None:
    """Give ``est`` the state of the learner with the best prequential score and record
    the contest in ``est.selection_`` (saved in the model file)."""
    scores = [lr.prequential_ll_ for lr in learners]
    best = int(np.argmax(np.nan_to_num(scores, nan=-np.inf)))
    params = set(est._param_names())
    est.__dict__.update({k: v for k, v in vars(learners[best]).items() if k not in params})
    specs = _specs(est)
    est._overrides = specs[best]
    est.selection_ = {"candidates": specs, "prequential_ll": [float(s) for s in scores],
                      "selected": best}
    est._spn = None
