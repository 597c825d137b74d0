"""One-pass selection of oSLRAU settings (``OSLRAU(select=...)``): candidate learners
take the same stream side by side, each scores every batch before learning from it
(prequential log-likelihood, computed by the kernel's upward pass at no extra cost), and
the learner with the best mean score is kept. No data is held out and nothing is read
twice, so the choice is as online as the learner.

With ``race_after`` the contest is a race: once that many points have been seen, only
the leader keeps learning. The candidates never share state, so the kept learner is
bit for bit the one its settings give alone; what the race gives up is the chance that
a trailing candidate would have overtaken the leader later in the stream."""
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
    base = est.get_params(deep=False)
    base["select"] = None
    out = []
    for i, spec in enumerate(_specs(est)):
        lr = type(est)(**{**base, **spec})
        try:                # named as the candidate it is, before any learning
            lr._validate_params()
        except ParameterError as e:
            raise ParameterError("select", f"OSLRAU: select[{i}] = {spec!r}: {e}") from None
        out.append(lr)
    return out


def _score(lr) -> float | None:
    """A learner's mean prequential log-likelihood, None before any point (or if not finite)."""
    if getattr(lr, "_d", None) is None or lr._n_seen == 0:
        return None
    v = lr.prequential_ll_
    return float(v) if np.isfinite(v) else None


class Race:
    """The candidates of ``est`` learning side by side from one stream (:meth:`step`),
    all of them until ``race_after`` points, then only the leader."""

    def __init__(self, est):
        self.est = est
        self.learners = candidates(est)
        self.alive = list(range(len(self.learners)))
        self.n_seen = 0
        self.decided_at = None
        self.at_decision = None
        self.trace = []

    def step(self, block) -> None:
        """Stream ``block`` through the candidates still racing; decide once the points
        seen reach ``race_after``."""
        for i in self.alive:
            self.learners[i].partial_fit(block)
        self.n_seen += len(block)
        scores = [_score(lr) for lr in self.learners]
        self.trace.append([self.n_seen, [s if i in self.alive else None for i, s in enumerate(scores)]])
        ra = self.est.race_after
        if ra is not None and self.decided_at is None and self.n_seen >= ra and len(self.alive) > 1:
            best = max((scores[i] for i in self.alive if scores[i] is not None), default=None)
            self.alive = [i for i in self.alive if scores[i] == best] or self.alive[:1]
            self.decided_at = self.n_seen
            self.at_decision = scores

    def keep_best(self) -> None:
        """Give ``est`` the state of the surviving learner with the best prequential score
        and record the contest in ``est.selection_`` (saved in the model file)."""
        est, learners = self.est, self.learners
        final = [_score(lr) if i in self.alive else None for i, lr in enumerate(learners)]
        best = max(self.alive, key=lambda i: -np.inf if final[i] is None else final[i])
        params = set(est._param_names())
        est.__dict__.update({k: v for k, v in vars(learners[best]).items() if k not in params})
        specs = _specs(est)
        est._overrides = specs[best]
        est.selection_ = {"candidates": specs, "prequential_ll": final, "selected": best,
                          "race_after": est.race_after, "decided_at": self.decided_at,
                          "prequential_ll_at_decision": self.at_decision, "trace": self.trace}
        est._spn = None
