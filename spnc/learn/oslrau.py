"""oSLRAU: online structure learning with running-average updates (Hsu, Kalra & Poupart,
2017), for real-valued data with Gaussian and multivariate Gaussian leaves.

The learner keeps its own growable tree in flat arrays indexed by node id (kind, count,
sorted scope, running mean and covariance of every product and leaf, merge counter,
children as segments of one array). Mini-batches are streamed through :func:`spnc._oslrau.run`, which
does the routing and counting for many batches per call without the GIL and returns
when a product shows a correlation above the threshold; the structure change (Alg. 2-5)
is then made here, in Python, and streaming resumes. ``spn_`` compiles the tree into a
:class:`spnc.SPN` on demand.

Implementation notes (where the paper leaves a choice, settled as in the authors' code,
github.com/whsu/spn, whose final version reproduces Table 1):

* a batch updates the nodes top-down; a product is tested right after its own statistics
  took the batch (Alg. 2). When it merges two children, those two (and their subtrees)
  skip the batch, which is then passed down the new mixture (Sec. 3.2, Alg. 3): the new
  sum and its first component start from the product's count before the batch;
* a product is tested only once its count before the batch reaches ``min_merge_points``
  (``spaced_merges=True``: ``min_merge_points * (merges + 1)``, an earlier version of the
  authors' code); correlations estimated from a handful of points are noise;
* the new factored component of a mixture (Alg. 5) is centred at the mean of the batch
  rows that reached the product, with the product's variances; it and the new product
  count 0;
* counts: a product's running moments are those of the rows it saw (count 0, no prior,
  Alg. 5); a leaf's initial parameters weigh one point while its count is 0 (Sec. 3.1:
  counts start at 1);
* leaf covariances are evaluated as ``cov + min_var * I``.
"""
from __future__ import annotations

import json
from typing import Any, Iterable

import numpy as np

from .. import _oslrau
from ..data import as_data, with_names
from .._progress import Progress
from ..errors import DataError, FormatError
from ..graph import SPN
from ..leaves.mvgaussian import MVGaussianLeaves
from ..leaves.univariate import GaussianLeaves
from ._params import BOOL, RANDOM_STATE, Interval
from .base import DensityEstimator

SUM, PRODUCT, LEAF = 0, 1, 2
_VERSION = "1"
_ARRAYS = ("kind", "count", "merges", "scope_ptr", "scope", "cov_ptr", "mean", "cov",
           "child_ptr", "child")
_DTYPES = {"kind": np.int8, "count": np.float64, "merges": np.int32, "scope_ptr": np.int64,
           "scope": np.int32, "cov_ptr": np.int64, "mean": np.float64, "cov": np.float64,
           "child_ptr": np.int64, "child": np.int32}


class _Grow:
    """A 1-D array with spare capacity; ``view`` is the used part (no copy)."""

    __slots__ = ("buf", "n")

    def __init__(self, a, dtype):
        a = np.asarray(a, dtype=dtype)
        self.buf = np.empty(max(16, 2 * len(a)), dtype=dtype)
        self.buf[:len(a)] = a
        self.n = len(a)

    @property
    def view(self) -> np.ndarray:
        return self.buf[:self.n]

    def extend(self, values) -> None:
        values = np.asarray(values, dtype=self.buf.dtype)
        k = self.n + len(values)
        if k > len(self.buf):
            nb = np.empty(max(2 * len(self.buf), k), dtype=self.buf.dtype)
            nb[:self.n] = self.buf[:self.n]
            self.buf = nb
        self.buf[self.n:k] = values
        self.n = k


def paper_leaf_cap(n_vars: int) -> int:
    """Leaf-size cap of the paper's rule (Sec. 4.3) as set in the authors' experiment
    script: one variable per leaf up to 4 variables, then up to 4 per leaf."""
    return 1 if n_vars <= 4 else min(4, n_vars - 1)


class OSLRAU(DensityEstimator):
    """Online structure learner for Gaussian SPNs (oSLRAU).

    Parameters
    ----------
    correlation_threshold : merge two children of a product when the largest absolute
        Pearson correlation between their variables reaches this value.
    max_leaf_vars : largest multivariate Gaussian leaf; bigger merges make a mixture.
        None: :func:`paper_leaf_cap` of the number of variables.
    batch_size : rows per mini-batch (one up/down pass each).
    structure_until : stop structure learning after this many points (None: never);
        parameters keep updating.
    min_merge_points : a product is tested at every batch once its count before the batch
        reaches ``min_merge_points``; None: ``max(10, batch_size)`` (the authors'
        ``mergebatch``).
    spaced_merges : True tests a product only once its count reaches
        ``min_merge_points * (merges + 1)`` (fewer, spaced merges; smaller networks).
    min_var : added to leaf variances (covariance diagonals) when evaluating.
    weighted_routing : route by weighted child likelihood instead of the paper's plain
        child likelihood.
    random_state : seed of the tie-breaking hash (None: fresh entropy, recorded).

    Attributes: ``spn_`` (compiled :class:`spnc.SPN`, learner state attached),
    ``n_seen_``, ``n_features_in_``.

    Examples
    --------
    >>> import numpy as np
    >>> X = np.random.default_rng(0).normal(size=(500, 3))
    >>> model = OSLRAU(batch_size=10, random_state=0).fit(X)
    >>> model.score_samples(X[:2]).shape
    (2,)
    """

    _parameter_constraints = {
        "correlation_threshold": [Interval(float, 0, 1)],
        "max_leaf_vars": [Interval(int, 1), None],
        "batch_size": [Interval(int, 1)],
        "structure_until": [Interval(int, 0), None],
        "min_merge_points": [Interval(int, 1), None],
        "spaced_merges": [BOOL],
        "min_var": [Interval(float, 0, closed="neither")],
        "weighted_routing": [BOOL],
        "random_state": [RANDOM_STATE, None],
    }

    def __init__(self, correlation_threshold: float = 0.1, max_leaf_vars: int | None = None,
                 batch_size: int = 1, structure_until: int | None = None,
                 min_merge_points: int | None = None, spaced_merges: bool = False,
                 min_var: float = 1e-6,
                 weighted_routing: bool = False, random_state: int | None = None):
        self.correlation_threshold = correlation_threshold
        self.max_leaf_vars = max_leaf_vars
        self.batch_size = batch_size
        self.structure_until = structure_until
        self.min_merge_points = min_merge_points
        self.spaced_merges = spaced_merges
        self.min_var = min_var
        self.weighted_routing = weighted_routing
        self.random_state = random_state

    def _init_state(self, d: int) -> None:
        """The fully factorised start: a product over d unit Gaussians (count 0)."""
        self._validate_params()
        self._d = d
        if self.random_state is None:
            self._seed = int(np.random.SeedSequence().generate_state(1, np.uint64)[0])
        else:
            self._seed = int(self.random_state) & (2**64 - 1)
        self._n_seen = 0
        self._n_batches = 0
        self._alloc({k: np.zeros(0, dt) for k, dt in _DTYPES.items()} |
                    {"scope_ptr": np.zeros(1, np.int64), "cov_ptr": np.zeros(1, np.int64),
                     "child_ptr": np.zeros(1, np.int64)})
        leaves = [self._new(LEAF, [v], np.zeros(1), np.ones((1, 1))) for v in range(d)]
        if d == 1:
            self._root = leaves[0]
        else:
            self._root = self._new(PRODUCT, range(d), np.zeros(d), np.eye(d), leaves)

    def _alloc(self, a: dict[str, np.ndarray]) -> None:
        """Growable storage from exported arrays (children given in CSR form)."""
        N = len(a["kind"])
        self._g = {k: _Grow(a[k], _DTYPES[k]) for k in ("kind", "count", "merges", "scope", "mean", "cov")}
        self._g["scope_ptr"] = _Grow(a["scope_ptr"], np.int64)
        self._g["cov_ptr"] = _Grow(a["cov_ptr"], np.int64)
        ptr = np.asarray(a["child_ptr"], dtype=np.int64)
        self._g["cstart"] = _Grow(ptr[:-1], np.int64)
        self._g["cend"] = _Grow(ptr[1:], np.int64)
        self._g["child"] = _Grow(a["child"], np.int32)
        parent = np.full(N, -1, dtype=np.int32)
        parent[np.asarray(a["child"], dtype=np.int64)] = np.repeat(np.arange(N, dtype=np.int32), np.diff(ptr))
        self._g["parent"] = _Grow(parent, np.int32)
        # kernel cache, not part of the state: each leaf's Cholesky factor and log det,
        # valid while ``fresh`` (recomputed from the moments after every change)
        self._g["chol"] = _Grow(np.zeros(len(a["cov"])), np.float64)
        self._g["ldet"] = _Grow(np.zeros(N), np.float64)
        self._g["fresh"] = _Grow(np.zeros(N, np.uint8), np.uint8)
        self._dirty = True
        self._spn = None

    # views of the storage (the kernel updates count / mean / cov in place)
    _kind = property(lambda self: self._g["kind"].view)
    _count = property(lambda self: self._g["count"].view)
    _merges = property(lambda self: self._g["merges"].view)
    _mean = property(lambda self: self._g["mean"].view)
    _cov = property(lambda self: self._g["cov"].view)
    _parent = property(lambda self: self._g["parent"].view)

    def _kids(self, n: int) -> list[int]:
        g = self._g
        return g["child"].buf[g["cstart"].buf[n]:g["cend"].buf[n]].tolist()

    def _set_kids(self, n: int, kids: list[int]) -> None:
        g = self._g
        g["cstart"].buf[n] = g["child"].n
        g["child"].extend(np.asarray(kids, dtype=np.int32))
        g["cend"].buf[n] = g["child"].n
        self._parent[np.asarray(kids, dtype=np.int64)] = n
        self._dirty = True

    def _new(self, kind: int, scope, mean, cov, children: list[int] = (), count: float = 0.0,
             merges: int = 0) -> int:
        g = self._g
        scope = np.asarray(list(scope), dtype=np.int32)
        s = len(scope)
        n = g["kind"].n
        g["kind"].extend([kind])
        g["count"].extend([count])
        g["merges"].extend([merges])
        g["scope"].extend(scope)
        g["scope_ptr"].extend([g["scope"].n])
        g["mean"].extend(np.asarray(mean, dtype=np.float64).ravel())
        g["cov"].extend(np.asarray(cov, dtype=np.float64).ravel())
        g["cov_ptr"].extend([g["cov"].n])
        g["chol"].extend(np.zeros(s * s))
        g["ldet"].extend([0.0])
        g["fresh"].extend([0])
        g["parent"].extend([-1])
        g["cstart"].extend([0])
        g["cend"].extend([0])
        self._set_kids(n, list(children))
        return n

    def _node_scope(self, n: int) -> np.ndarray:
        sp = self._g["scope_ptr"].buf
        return self._g["scope"].buf[sp[n]:sp[n + 1]]

    def _node_stats(self, n: int) -> tuple[np.ndarray, np.ndarray]:
        sp, cp = self._g["scope_ptr"].buf, self._g["cov_ptr"].buf
        s = int(sp[n + 1] - sp[n])
        return self._g["mean"].buf[sp[n]:sp[n + 1]], self._g["cov"].buf[cp[n]:cp[n + 1]].reshape(s, s)

    def _rebuild(self) -> None:
        """Post-order of the live nodes (children first, root last); compacts the child
        storage when most of it is stale."""
        g = self._g
        N = g["kind"].n
        if g["child"].n > 4 * N + 64:
            ptr, ch = self._csr()
            g["child"] = _Grow(ch, np.int32)
            g["cstart"].buf[:N] = ptr[:-1]
            g["cend"].buf[:N] = ptr[1:]
        out = np.empty(N, dtype=np.int32)
        k = _oslrau.postorder(g["cstart"].view, g["cend"].view, g["child"].view, self._root, out)
        self._order = out[:k]
        self._dirty = False

    def _csr(self) -> tuple[np.ndarray, np.ndarray]:
        """Children of every id in compact CSR form (child_ptr, child)."""
        g = self._g
        st, en, ch = g["cstart"].view, g["cend"].view, g["child"].buf
        deg = en - st
        ptr = np.zeros(len(st) + 1, dtype=np.int64)
        np.cumsum(deg, out=ptr[1:])
        idx = np.repeat(st - ptr[:-1], deg) + np.arange(ptr[-1])
        return ptr, ch[idx].astype(np.int32)

    # ------------------------------------------------------------------ learning
    def fit(self, X, y=None) -> "OSLRAU":
        """One pass over ``X``: an array (n, d), an h5py dataset, or an iterable of
        batches (arrays) or a DataFrame (its column names become ``var_names``). Starts
        from the fully factorised model."""
        self._d = None
        X, self._names = as_data(X)
        if hasattr(X, "shape") and hasattr(X, "__getitem__") and len(getattr(X, "shape", ())) == 2 \
                and not isinstance(X, np.ndarray):
            step = max(1, (1 << 16) // max(1, int(self.batch_size))) * int(self.batch_size)
            prog = Progress("oslrau", total=X.shape[0], unit=" rows")
            for r0 in range(0, X.shape[0], step):    # h5py dataset: read in slabs
                self.partial_fit(X[r0:r0 + step])
                prog.update(done=min(r0 + step, X.shape[0]))
        elif isinstance(X, np.ndarray) or not _is_iterable_of_batches(X):
            self.partial_fit(X)
        else:
            prog = Progress("oslrau", unit=" rows")
            for batch in X:
                self.partial_fit(batch)
                prog.update(done=self._n_seen)
        if getattr(self, "_d", None) is None or self._n_seen == 0:
            raise DataError("fit got no data rows")
        return self

    def _start(self, d: int) -> None:
        if getattr(self, "_d", None) is None:
            self._init_state(d)

    def partial_fit(self, X, y=None) -> "OSLRAU":
        """Stream the rows of ``X`` through the learner in mini-batches of ``batch_size``
        (a last, shorter batch is processed as it is)."""
        X = self._check_data(X)
        self._start(X.shape[1])
        if X.shape[1] != self._d:
            raise DataError(f"X has {X.shape[1]} columns, the model has {self._d} variables")
        n = X.shape[0]
        if n == 0:
            return self
        bs = int(self.batch_size)
        thr = float(self.correlation_threshold)
        minm = float(self.min_merge_points if self.min_merge_points is not None else max(10, bs))
        su = int(self.structure_until) if self.structure_until is not None else np.iinfo(np.int64).max
        cap = int(self.max_leaf_vars) if self.max_leaf_vars is not None else paper_leaf_cap(self._d)
        start = 0
        prog = Progress("oslrau", total=n, unit=" rows")
        while start < n:
            if self._dirty:
                self._rebuild()
            self._workspace(min(bs, n))
            nb, nc = self._stream(X, start, bs, self._order, su, minm, thr)
            done = min(n, start + nb * bs) - start
            last = (start + (nb - 1) * bs, start + done)
            self._n_batches += nb
            self._n_seen += done
            start += done
            self._spn = None
            prog.update(done=start)
            if nc:
                # the last batch left correlated children at nc products; the rows that
                # reached each product have not been passed below the two children yet
                rows = X[last[0]:last[1]]
                cand = self._cand[:3 * nc].reshape(nc, 3).tolist()
                reach = [self._active[p, :len(rows)].astype(bool) for p, _, _ in cand]
                for (p, a, b), act in zip(cand, reach):
                    self._merge(p, a, b, rows[act], cap)
                self._dirty = True
        return self

    def _workspace(self, m: int) -> None:
        """Per-node scratch of the kernel (log-likelihoods and routes of a batch), with
        spare rows so that a few new nodes do not reallocate it."""
        ids = self._g["kind"].n
        shape = getattr(self, "_ws_shape", (0, 0))
        if ids > shape[0] or m > shape[1]:
            rows = max(ids + ids // 4 + 64, shape[0])
            cols = max(m, shape[1])
            self._vals = np.empty((rows, cols))
            self._active = np.empty((rows, cols), dtype=np.uint8)
            self._cand = np.empty(3 * rows, dtype=np.int32)
            self._cand_corr = np.empty(rows)
            self._ws_shape = (rows, cols)

    def _stream(self, X: np.ndarray, start: int, bs: int, order: np.ndarray, su: int, minm: float,
                thr: float) -> tuple[int, int]:
        g = self._g
        return _oslrau.run(X, start, bs, order, g["kind"].view, g["cstart"].view,
                           g["cend"].view, g["child"].view, g["scope_ptr"].view, g["scope"].view,
                           g["count"].view, g["mean"].view, g["cov_ptr"].view, g["cov"].view,
                           g["merges"].view, float(self.min_var), self._seed,
                           self._n_batches, bool(self.weighted_routing), su, self._n_seen,
                           minm, bool(self.spaced_merges), thr, self._vals, self._active,
                           self._cand, self._cand_corr, g["chol"].view, g["ldet"].view, g["fresh"].view)

    def _check_data(self, X) -> np.ndarray:
        try:
            A = np.ascontiguousarray(X, dtype=np.float64)
        except (TypeError, ValueError) as exc:
            raise DataError(f"X must be numeric (float64 convertible): {exc}") from None
        if A.ndim != 2:
            raise DataError(f"X must be 2-D (n_rows, n_vars), got shape {A.shape}")
        if A.size and not np.all(np.isfinite(A)):
            r, c = np.argwhere(~np.isfinite(A))[0]
            raise DataError(f"X[{r}, {c}] = {A[r, c]}: oSLRAU needs finite values (no missing data)")
        return A

    # ------------------------------------------------------------------ structure (Alg. 2-5)
    def _merge(self, p: int, a: int, b: int, rows: np.ndarray, cap: int) -> None:
        """Correlate children ``a`` and ``b`` of product ``p``, whose statistics already
        hold the ``rows`` of the current batch that reached it (``a`` and ``b`` have not
        seen them): one multivariate leaf when the joint scope fits ``cap`` (and ``cap``
        is below the number of variables, Alg. 4), else a mixture of a product over the
        two children and a new factored model (Alg. 3, 5), down which the rows are then
        passed (Sec. 3.2)."""
        kids = self._kids(p)
        if a not in kids or b not in kids:
            return
        self._merges[p] += 1
        pscope = self._node_scope(p)
        joint = np.union1d(self._node_scope(a), self._node_scope(b)).astype(np.int32)
        idx = np.searchsorted(pscope, joint)
        pmean, pcov = self._node_stats(p)
        jmean, jcov = pmean[idx].copy(), pcov[np.ix_(idx, idx)].copy()
        cnt = float(self._count[p])
        if len(joint) <= cap and self._d > cap:
            new = self._new(LEAF, joint, jmean, jcov, count=cnt)            # Alg. 4
        else:
            before = cnt - len(rows)           # the mixture takes the rows below
            p1 = self._new(PRODUCT, joint, jmean, jcov, [a, b], count=before,  # Alg. 3
                           merges=int(self._merges[p]))
            centre = rows[:, joint].mean(0) if len(rows) else jmean
            var = np.diag(jcov).copy()
            leaves = [self._new(LEAF, [v], centre[i:i + 1], var[i:i + 1].reshape(1, 1))
                      for i, v in enumerate(joint)]
            p2 = self._new(PRODUCT, joint, centre, np.diag(var), leaves)  # Alg. 5
            new = self._new(SUM, joint, np.zeros(len(joint)), np.zeros(0), [p1, p2], count=before)
            if len(rows):
                self._pass_down(new, rows)
        kids.remove(a)
        kids.remove(b)
        kids.append(new)
        if len(kids) == 1:                     # single-child product: splice it out
            self._replace(p, new)
            self._set_kids(p, [])
        else:
            self._set_kids(p, kids)

    def _pass_down(self, node: int, rows: np.ndarray) -> None:
        """Parameter update (Alg. 1) of the subtree under ``node`` with ``rows``, as one
        batch and without structure changes."""
        g = self._g
        out = np.empty(g["kind"].n, dtype=np.int32)
        k = _oslrau.postorder(g["cstart"].view, g["cend"].view, g["child"].view, node, out)
        self._workspace(len(rows))
        rows = np.ascontiguousarray(rows)
        nb, nc = self._stream(rows, 0, len(rows), out[:k], -1, np.inf, 2.0)
        assert nb == 1 and nc == 0

    def _replace(self, old: int, new: int) -> None:
        """Put ``new`` where ``old`` was; a sum put under a sum hands over its children."""
        par = int(self._parent[old])
        self._parent[old] = -1
        if par < 0:
            self._root = new
            self._parent[new] = -1
            self._dirty = True
            return
        kids = self._kids(par)
        i = kids.index(old)
        if self._kind[par] == SUM and self._kind[new] == SUM:
            kids[i:i + 1] = self._kids(new)
            self._set_kids(new, [])
            self._parent[new] = -1
        else:
            kids[i] = new
        self._set_kids(par, kids)

    # ------------------------------------------------------------------ queries
    def _need_fit(self) -> None:
        if getattr(self, "_d", None) is None:
            raise AttributeError("this OSLRAU instance is not fitted yet; call fit or partial_fit first")

    @property
    def n_seen_(self) -> int:
        self._need_fit()
        return self._n_seen

    @property
    def n_features_in_(self) -> int:
        self._need_fit()
        return int(self._d)

    @property
    def spn_(self) -> SPN:
        """The learned model as a compiled :class:`spnc.SPN`. ``stats`` holds per compiled
        node ``count``, ``merges`` and the running moments of products and leaves (CSR:
        ``mean_ptr``/``mean``, ``cov_ptr``/``cov`` row-major); ``learner`` holds the whole
        learner state (settings, seed and batch counter, all arrays) for :meth:`resume`."""
        self._need_fit()
        if self._spn is None:
            self._spn = with_names(self._compile(), getattr(self, "_names", None))
        return self._spn

    def _compile(self) -> SPN:
        if self._dirty:
            self._rebuild()
        order = self._order
        N = len(order)
        new_id = np.full(len(self._kind), -1, dtype=np.int64)
        new_id[order] = np.arange(N)
        kind = self._kind[order]
        g = self._g
        st, en = g["cstart"].view[order], g["cend"].view[order]
        deg = en - st
        ptr = np.zeros(N + 1, dtype=np.int64)
        np.cumsum(deg, out=ptr[1:])
        old_child = g["child"].buf[np.repeat(st - ptr[:-1], deg) + np.arange(ptr[-1])]
        child = new_id[old_child]
        weight = np.ones(len(child))
        parent = np.repeat(np.arange(N), deg)
        is_sum = kind[parent] == SUM
        if is_sum.any():
            w = self._count[old_child[is_sum]] + 1.0
            tot = np.bincount(parent[is_sum], weights=w, minlength=N)
            weight[is_sum] = w / tot[parent[is_sum]]
        leaf = np.flatnonzero(kind == LEAF)
        sp, cp, scope = g["scope_ptr"].buf, g["cov_ptr"].buf, g["scope"].buf
        s = sp[order + 1] - sp[order]
        uni = leaf[s[leaf] == 1]
        mv = leaf[s[leaf] > 1]
        out_kind = kind.astype(np.uint8)
        out_kind[uni] = GaussianLeaves.code
        out_kind[mv] = MVGaussianLeaves.code
        mv_ = float(self.min_var)
        o = order[uni]
        gt = GaussianLeaves.from_arrays(uni, list(scope[sp[o]].reshape(-1, 1)),
                                        {"mean": self._mean[sp[o]].copy(),
                                         "std": np.sqrt(np.maximum(self._cov[cp[o]], 0.0) + mv_)})
        scopes, means, covs = [], [], []
        for x in order[mv]:
            m_, c_ = self._node_stats(int(x))
            scopes.append(self._node_scope(int(x)).copy())
            means.append(m_.copy())
            covs.append((c_ + mv_ * np.eye(len(m_))).ravel())
        dims = np.array([len(sc) for sc in scopes], dtype=np.int64)
        mean_ptr = np.zeros(len(dims) + 1, dtype=np.int64)
        cov_ptr = np.zeros(len(dims) + 1, dtype=np.int64)
        np.cumsum(dims, out=mean_ptr[1:])
        np.cumsum(dims * dims, out=cov_ptr[1:])
        mvt = MVGaussianLeaves.from_arrays(mv, scopes, {
            "mean_ptr": mean_ptr, "mean": np.concatenate(means) if means else np.zeros(0),
            "cov_ptr": cov_ptr, "cov": np.concatenate(covs) if covs else np.zeros(0)})
        stats = {"count": self._count[order].copy(), "merges": self._merges[order].copy()}
        has = kind != SUM        # running mean / covariance of products and leaves, CSR by node
        for key, ptr_all, arr in (("mean", sp, g["mean"].buf), ("cov", cp, g["cov"].buf)):
            ln = np.where(has, ptr_all[order + 1] - ptr_all[order], 0)
            optr = np.zeros(N + 1, dtype=np.int64)
            np.cumsum(ln, out=optr[1:])
            stats[key + "_ptr"] = optr
            stats[key] = arr[np.repeat(ptr_all[order] - optr[:-1], ln) + np.arange(optr[-1])].copy()
        return SPN.from_arrays(out_kind, ptr, child, weight, {"gaussian": gt, "mvgaussian": mvt},
                               cardinality=np.zeros(self._d, dtype=np.int32), stats=stats,
                               learner=self._export())

    # ------------------------------------------------------------------ resume
    def _export(self) -> dict:
        if self._dirty:
            self._rebuild()
        params = {k: _plain(getattr(self, k)) for k in self._param_names()}
        params.update(n_vars=int(self._d), seed=str(self._seed), n_seen=int(self._n_seen),
                      n_batches=int(self._n_batches), root=int(self._root))
        json.dumps(params)
        arrays = {k: self._g[k].view for k in ("kind", "count", "merges", "scope_ptr", "scope",
                                                "cov_ptr", "mean", "cov")}
        arrays["child_ptr"], arrays["child"] = self._csr()
        return {"name": "oslrau", "version": _VERSION, "params": params,
                "arrays": {k: np.array(v, copy=True) for k, v in arrays.items()}}

    @classmethod
    def resume(cls, source) -> "OSLRAU":
        """Rebuild a learner from ``spn_`` of an earlier one (an :class:`spnc.SPN`) or from
        a model file written by :func:`spnc.save`; learning then continues exactly as if
        it had never stopped."""
        spn = source
        if not isinstance(source, SPN):
            import spnc
            if not hasattr(spnc, "load"):
                raise FormatError("spnc.load is not available; pass the SPN object")
            spn = spnc.load(source)
        info = getattr(spn, "learner", None) or {}
        if info.get("name") != "oslrau":
            raise FormatError(f"the model carries no oSLRAU learner state (learner name {info.get('name')!r})")
        if str(info.get("version")) != _VERSION:
            raise FormatError(f"unsupported oSLRAU state version {info.get('version')!r}; this spnc reads {_VERSION!r}")
        params = dict(info["params"])
        arrays = info["arrays"]
        missing = [k for k in _ARRAYS if k not in arrays]
        if missing:
            raise FormatError(f"oSLRAU state lacks arrays {missing}")
        self = cls(**{k: params[k] for k in cls._param_names()})
        self._d = int(params["n_vars"])
        self._seed = int(params["seed"])
        self._n_seen = int(params["n_seen"])
        self._n_batches = int(params["n_batches"])
        self._root = int(params["root"])
        a = {k: np.asarray(arrays[k]) for k in _ARRAYS}
        N = len(a["kind"])
        if len(a["child_ptr"]) != N + 1 or len(a["scope_ptr"]) != N + 1 or len(a["cov_ptr"]) != N + 1 \
                or a["scope_ptr"][-1] != len(a["scope"]) or a["cov_ptr"][-1] != len(a["cov"]) \
                or a["child_ptr"][-1] != len(a["child"]) or len(a["mean"]) != len(a["scope"]):
            raise FormatError("oSLRAU state arrays have inconsistent lengths")
        self._alloc(a)
        return self


def _plain(v):
    if isinstance(v, (np.integer, np.bool_)):
        return v.item()
    if isinstance(v, np.floating):
        return float(v)
    return v


def _is_iterable_of_batches(X) -> bool:
    if isinstance(X, (list, tuple)):
        return len(X) > 0 and all(np.ndim(b) == 2 for b in X)
    return isinstance(X, Iterable) and not hasattr(X, "shape")
