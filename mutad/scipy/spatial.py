"""``scipy.spatial.distance``'s ``pdist``, ``cdist`` and ``squareform`` of traced points,
``scipy.spatial``'s ``KDTree`` and ``cKDTree`` of traced points or queried at traced points, by
SciPy's names too, ``ConvexHull``'s volume, area and equations, ``Delaunay``'s
triangulation and transforms, and ``scipy.spatial.transform.Rotation`` of traced values (and
``Slerp`` at traced times; see their sections below).

>>> import numpy as np, mutad
>>> from mutad.scipy import spatial
>>> x = np.array([[0.0, 0.0], [3.0, 4.0], [0.0, 0.0]])
>>> mutad.gradient(lambda x: spatial.pdist(x).sum(), x)[0]
array([[-0.6, -0.8],
       [ 1.2,  1.6],
       [-0.6, -0.8]])

Each distance is computed from the pairs of rows (gathered, in SciPy's order of pairs) by
functions mutad differentiates, so both modes and every order follow. The metrics followed are
``euclidean``, ``sqeuclidean``, ``cityblock``, ``chebyshev`` and ``minkowski`` (``p=``, and each
with ``w=``), ``cosine``, ``correlation``, ``seuclidean`` (``V=``), ``mahalanobis`` (``VI=``),
``braycurtis`` and ``canberra`` (whose terms ``0 / 0`` SciPy takes as 0),
by any of SciPy's aliases, and a Python function of two rows (called on each pair, as SciPy
calls it). SciPy's own function of one of those metrics (``metric=distance.euclidean``), which
SciPy calls on each pair in Python, is computed as the metric by its name: its values are the
compiled metric's, which may differ from that function's in the last place. Another metric
raises ``UnsupportedOperationError`` naming it, as does ``out=``.

The distances between two points (``euclidean(u, v)``, ``minkowski``, ``cosine``,
``correlation``, ``seuclidean``, ``mahalanobis``, ``braycurtis``, ``canberra``, with weights
too, and ``jensenshannon``) are SciPy's own NumPy steps run on the traced vectors: its check of
them, which converts them (``_validate_vector``), is routed to one that does not, and
``correlation`` (``cosine``'s) and ``jensenshannon`` are SciPy's steps written out (a
``math.sqrt`` and an ``np.asarray`` of a traced value): SciPy's values, bit for bit.

Values. SciPy computes the first five in C++, each distance accumulating its terms in order
along the row, which ``np.cumsum`` does too: ``euclidean``, ``sqeuclidean``, ``cityblock``,
``chebyshev`` and ``minkowski`` with p = 1, 2 or inf (which SciPy computes as those) are SciPy's
bit for bit, with or without weights (float64 points; other points are taken as float64, as
SciPy's C takes them). The others' compositions may round otherwise than SciPy's:
``minkowski``'s other p, whose powers NumPy computes with another ``pow`` than SciPy's C++,
and ``cosine``, ``correlation``, ``seuclidean``, ``mahalanobis``, ``braycurtis`` and
``canberra``, which SciPy computes in C
compiled to reassociate its sums; their values are SciPy's own call's, with the derivatives of
the composition (``tests/test_scipy_spatial.py``). ``seuclidean`` without ``V`` and
``mahalanobis`` without ``VI`` differentiate SciPy's variance and inverse covariance of the
points too.

Kinks. The distance between identical points (``euclidean``, ``seuclidean``, ``mahalanobis``,
``minkowski``) has the derivative 0 there, a subgradient, and not the NaN of the square root's
derivative at 0; so does ``minkowski``'s ``|d| ** p`` at ``d = 0`` for ``p < 1``.
``chebyshev`` sends the gradient to the coordinate that holds the maximum (NaNs ignored, as
SciPy's loop ignores them).

k-d trees. ``KDTree(points)`` and ``cKDTree(points)`` of traced points build SciPy's tree of
the plain points, and SciPy's own tree (of constant points) is routed when it is queried at
traced points. Which points are neighbours is a decision, taken by SciPy's tree on the plain
values: the indices carry no derivative (as ``argsort``'s), and a replay (``grad(f,
replay=True)``) asks SciPy's tree again, of the replayed points, at every call. ``query``
returns SciPy's distances bit for bit, with the derivative of the Minkowski distance (its
``p``, the periodic one of ``boxsize``) between each query point and its neighbour, in the
queries and in the tree's points: ``(x - y) / d`` for p = 2, 0 where the two points coincide
(a subgradient); a missing neighbour (``inf``, index ``n``) has none. ``query_ball_point``,
``query_pairs`` (``set`` and ``ndarray``) and ``query_ball_point(..., return_length=True)``
return SciPy's indices, decided on the plain values (Python's structure of them is guarded in
a replay: a change of neighbours records the program again). ``sparse_distance_matrix`` with
``output_type='coo_matrix'`` (a ``scipy.sparse`` matrix of the traced distances) or ``'dict'``
gives SciPy's pairs and distances, differentiated as ``query``'s; its ``'dok_matrix'`` (the
default) and ``'ndarray'``, ``query_ball_tree``, ``count_neighbors``, the tree's bounds
(``maxes``, ``mins``, ``tree``) of traced points, and SciPy's own tree's methods given a tree
of traced points, raise ``UnsupportedOperationError``.
The tree holds the points it was built of, as ``copy_data=True`` does: SciPy warns that
writing into points a tree shares gives bogus results.
"""

import math

import numpy as np
import scipy.spatial as _spatial_module
import scipy.spatial.distance as _distance
import scipy.special as _special
import scipy.spatial.transform._rotation as _rotation

from ..api import stop_gradient
from ..core.allocation import COMPILED_OBJECTS, holds_derivative, lists_as_arrays
from ..core.errors import UnsupportedOperationError
from ..core.levels import CARRIERS
from ..core.registry import defmethod, defroute
from ..engines.arraylike import carries_derivative
from ._adjoints import (ScipysCode, Value, refused_attribute, reproduces, scipys_value,
                        stands_in_for)

__all__ = ["ConvexHull", "Delaunay", "KDTree", "cKDTree", "cdist", "correlation",
           "directed_hausdorff", "distance_matrix", "geometric_slerp", "jensenshannon", "minkowski_distance",
           "minkowski_distance_p", "pdist", "procrustes", "squareform"]

# SciPy's classes, kept before a differentiation routes the module's names to the stand-ins
_SCIPY_KDTREE = _spatial_module.KDTree
_SCIPY_CKDTREE = _spatial_module.cKDTree

# SciPy's aliases of the metrics followed (scipy.spatial.distance._METRIC_ALIAS).
_FOLLOWED = ("euclidean", "sqeuclidean", "cityblock", "chebyshev", "minkowski", "cosine",
             "correlation", "seuclidean", "mahalanobis", "braycurtis", "canberra")
_CANONICAL = {alias: info.canonical_name for alias, info in _distance._METRIC_ALIAS.items()}


def _array(x):
    (x,) = lists_as_arrays((x,))
    x = x if hasattr(x, "dtype") else np.asarray(x)
    if x.dtype != np.float64:  # SciPy's C computes in double
        x = x.astype(np.float64)
    return x


def _where_zero(s, f):
    """``f(s)``, and 0 where ``s`` is 0 with the derivative 0 there: a root's derivative at 0
    is infinite, and the distance between identical points takes the subgradient 0. The root is
    taken of 1 at those entries, so no NaN enters a derivative."""
    zero = s == 0.0
    return np.where(zero, 0.0, f(np.where(zero, 1.0, s)))


def _sequential_sum(terms):
    """The sum of ``terms`` along the last axis, accumulated in order from 0, as SciPy's C++
    loops accumulate (``np.sum`` adds pairwise)."""
    if np.shape(terms)[-1] == 0:
        return np.sum(terms, axis=-1)
    return np.cumsum(terms, axis=-1)[..., -1]


def _metric_name(metric):
    if isinstance(metric, str):
        name = _CANONICAL.get(metric.lower())
        if name is None:
            raise ValueError(f"Unknown Distance Metric: {metric.lower()}")
    else:  # SciPy's own function of a metric, by its name
        name = _CANONICAL.get(getattr(metric, "__name__", None))
        if name is None or getattr(_distance, name, None) is not metric:
            return None
    if name not in _FOLLOWED:
        raise UnsupportedOperationError(
            f"scipy.spatial.distance's metric {name!r} of differentiated points: mutad follows "
            f"{', '.join(_FOLLOWED)} and Python functions of two rows; pass {name!r} as a "
            "function of two rows written with NumPy, or the points through mutad.stop_gradient.")
    return name


def _weights(w, n):
    w = _array(w)
    if np.ndim(w) != 1 or np.shape(w)[0] != n:
        raise ValueError(f"Weights must have same size as input vector. {np.shape(w)[0]} vs. {n}.")
    if np.any(w < 0):
        raise ValueError("Input weights should be all non-negative")
    return w


def _distances(u, v, name, points, kwargs):
    """The distances between rows ``u[k]`` and ``v[k]`` of two arrays of the same shape
    (``points``: all the points, whose variance or covariance seuclidean and mahalanobis take
    by default), as SciPy computes them."""
    n = np.shape(u)[-1]
    w = kwargs.pop("w", None)
    if w is not None:
        if name not in ("euclidean", "sqeuclidean", "cityblock", "chebyshev", "minkowski"):
            raise UnsupportedOperationError(
                f"scipy.spatial.distance's metric {name!r} with w= of differentiated points: "
                "mutad follows weights for euclidean, sqeuclidean, cityblock, chebyshev and "
                "minkowski.")
        w = _weights(w, n)
    p = kwargs.pop("p", 2.0) if name == "minkowski" else None
    V = kwargs.pop("V", None) if name == "seuclidean" else None
    VI = kwargs.pop("VI", None) if name == "mahalanobis" else None
    if kwargs:
        raise TypeError(f"unexpected keyword arguments for the metric {name!r}: "
                        f"{', '.join(kwargs)}")
    if name == "minkowski":
        if not p > 0:  # SciPy's C++ computes these; its checks of other calls refuse them
            raise UnsupportedOperationError(
                f"scipy.spatial.distance's metric 'minkowski' with p={p} of differentiated "
                "points: mutad follows p > 0 only.")
        # SciPy's C++ takes these p as the metrics they are
        name = {1.0: "cityblock", 2.0: "euclidean", np.inf: "chebyshev"}.get(p, name)
    d = u - v
    if name == "sqeuclidean":
        return _sequential_sum(d * d if w is None else w * d * d)
    if name == "euclidean":
        return _where_zero(_sequential_sum(d * d if w is None else w * (d * d)), np.sqrt)
    if name == "cityblock":
        return _sequential_sum(np.abs(d) if w is None else w * np.abs(d))
    if name == "chebyshev":
        magnitude = np.abs(d)
        if w is not None:
            magnitude = np.where(w > 0, magnitude, 0.0)
        # SciPy's loop keeps the largest so far, starting at 0: a NaN never replaces it.
        magnitude = np.where(np.isnan(magnitude), 0.0, magnitude)
        if n == 0:
            return np.sum(magnitude, axis=-1)
        return np.max(magnitude, axis=-1)
    if name == "minkowski":
        powers = _where_zero(np.abs(d), lambda a: a ** p)
        total = _sequential_sum(powers if w is None else w * powers)
        return _where_zero(total, lambda s: s ** (1.0 / p))
    if name in ("cosine", "correlation"):
        return _cosine(u, v, name == "correlation")
    if name == "braycurtis":
        return np.sum(np.abs(d), axis=-1) / np.sum(np.abs(u + v), axis=-1)
    if name == "canberra":
        # SciPy's terms |u - v| / (|u| + |v|), of which 0 / 0 is taken as 0
        scale = np.abs(u) + np.abs(v)
        return np.sum(np.where(scale == 0.0, 0.0, np.abs(d) / np.where(scale == 0.0, 1.0, scale)),
                      axis=-1)
    if name == "seuclidean":
        if V is None:
            V = np.var(points, axis=0, ddof=1)
        else:
            V = _array(V)
            if np.ndim(V) != 1:
                raise ValueError("Variance vector V must be one-dimensional.")
            if np.shape(V)[0] != n:
                raise ValueError("Variance vector V must be of the same dimension as the "
                                 "vectors on which the distances are computed.")
        return _where_zero(np.sum(d * d / V, axis=-1), np.sqrt)
    # mahalanobis
    if VI is None:
        m = np.shape(points)[0]
        if m <= n:
            raise ValueError(
                f"The number of observations ({m}) is too small; the covariance matrix is "
                f"singular. For observations with {n} dimensions, at least {n + 1} "
                "observations are required.")
        VI = np.linalg.inv(np.atleast_2d(np.cov(points.T))).T
    else:
        VI = _array(VI)
    return _where_zero(np.sum((d @ np.swapaxes(VI, -1, -2)) * d, axis=-1), np.sqrt)



# scipy.spatial's minkowski_distance_p, minkowski_distance and distance_matrix: SciPy's NumPy
# steps (np.sum along the last axis) on the traced points, without the conversions that would
# cut them; identical points at the distance 0 with the derivative 0 (``_where_zero``).


@stands_in_for(_spatial_module.minkowski_distance_p)
def minkowski_distance_p(x, y, p=2.0):
    x, y = _array(x), _array(y)
    magnitude = np.abs(y - x)
    if p == np.inf:
        return np.max(magnitude, axis=-1)
    if p == 1:
        return np.sum(magnitude, axis=-1)
    return np.sum(_where_zero(magnitude, lambda a: a ** p), axis=-1)


@stands_in_for(_spatial_module.minkowski_distance)
def minkowski_distance(x, y, p=2.0):
    total = minkowski_distance_p(x, y, p)
    if p == np.inf or p == 1:
        return total
    return _where_zero(total, lambda s: s ** (1.0 / p))


@stands_in_for(_spatial_module.distance_matrix)
def distance_matrix(x, y, p=2.0, threshold=1000000):
    """SciPy's distances of every row of ``x`` to every row of ``y``: ``minkowski_distance``
    of the pairs broadcast (SciPy's loop over rows of large arrays gives the same values)."""
    x, y = _array(x), _array(y)
    if np.ndim(x) != 2 or np.ndim(y) != 2:  # (SciPy unpacks two dimensions of each)
        raise ValueError("distance_matrix takes two 2-d arrays of points")
    k, kk = np.shape(x)[1], np.shape(y)[1]
    if k != kk:
        raise ValueError(f"x contains {k}-dimensional vectors but y contains "
                         f"{kk}-dimensional vectors")
    return minkowski_distance(x[:, np.newaxis, :], y[np.newaxis, :, :], p)

def _cosine(u, v, centred):
    if centred:  # SciPy's correlation: the cosine distance of the rows less their means
        u = u - np.mean(u, axis=-1, keepdims=True)
        v = v - np.mean(v, axis=-1, keepdims=True)
    cosine = np.sum(u * v, axis=-1) / (np.sqrt(np.sum(u * u, axis=-1))
                                       * np.sqrt(np.sum(v * v, axis=-1)))
    # SciPy clips |cosine| > 1, a rounding, to ±1 (a constant there).
    cosine = np.where(np.abs(cosine) > 1.0, np.sign(cosine), cosine)
    return 1.0 - cosine


# SciPy's own distances of the metrics whose composition may differ from SciPy's C in the last
# places (its pow, its reassociated sums): their values are SciPy's, their derivatives the
# composition's
_SETTINGS = ("p", "w", "V", "VI")
_pdist_value = Value(lambda X, name, *settings: _distance.pdist(X, name, **_given(settings)),
                     "scipy.spatial.distance.pdist")
_cdist_value = Value(lambda XA, XB, name, *settings: _distance.cdist(
    XA, XB, name, **_given(settings)), "scipy.spatial.distance.cdist")


def _given(settings):
    return {k: v for k, v in zip(_SETTINGS, settings) if v is not None}


def _rounded_otherwise(name, kwargs):
    """Whether mutad's composition of the metric ``name`` may round otherwise than SciPy's C."""
    if name == "minkowski":
        return kwargs.get("p", 2.0) not in (1.0, 2.0, np.inf)
    return name in ("cosine", "correlation", "seuclidean", "mahalanobis", "braycurtis",
                    "canberra")


def _refuse_out(out, name):
    if out is not None:
        raise UnsupportedOperationError(
            f"scipy.spatial.distance.{name}(..., out=) of differentiated points: mutad gives "
            "the distances as a new array; assign them into out yourself (out[...] = ...).")


@stands_in_for(_distance.pdist)
def pdist(X, metric="euclidean", *, out=None, **kwargs):
    X = _array(X)
    if np.ndim(X) != 2:
        raise ValueError(f"A 2-dimensional array must be passed. (Shape was {np.shape(X)}).")
    _refuse_out(out, "pdist")
    m = np.shape(X)[0]
    first, second = np.triu_indices(m, 1)  # SciPy's order: i, then j > i
    if not callable(metric) and not isinstance(metric, str):
        raise TypeError("2nd argument metric must be a string identifier or a function.")
    name = _metric_name(metric)
    if name is None:  # the user's function of two rows, on each pair, as SciPy calls it
        values = [metric(X[i], X[j], **kwargs) for i, j in zip(first, second)]
        return np.stack(values).astype(np.float64) if values else np.zeros(0)
    y = _distances(X[first], X[second], name, X, dict(kwargs))
    if _rounded_otherwise(name, kwargs):
        return scipys_value(_pdist_value(X, name, *map(kwargs.get, _SETTINGS)), y)
    return y


@stands_in_for(_distance.cdist)
def cdist(XA, XB, metric="euclidean", *, out=None, **kwargs):
    XA, XB = _array(XA), _array(XB)
    if np.ndim(XA) != 2:
        raise ValueError("XA must be a 2-dimensional array.")
    if np.ndim(XB) != 2:
        raise ValueError("XB must be a 2-dimensional array.")
    if np.shape(XA)[1] != np.shape(XB)[1]:
        raise ValueError("XA and XB must have the same number of columns (i.e. feature "
                         "dimension.)")
    _refuse_out(out, "cdist")
    mA, mB = np.shape(XA)[0], np.shape(XB)[0]
    first, second = np.repeat(np.arange(mA), mB), np.tile(np.arange(mB), mA)
    if not callable(metric) and not isinstance(metric, str):
        raise TypeError("2nd argument metric must be a string identifier or a function.")
    name = _metric_name(metric)
    if name is None:
        values = [metric(XA[i], XB[j], **kwargs) for i, j in zip(first, second)]
        y = np.stack(values).astype(np.float64) if values else np.zeros(0)
    else:
        y = _distances(XA[first], XB[second], name, np.concatenate([XA, XB]), dict(kwargs))
        if _rounded_otherwise(name, kwargs):
            return scipys_value(_cdist_value(XA, XB, name, *map(kwargs.get, _SETTINGS)),
                                np.reshape(y, (mA, mB)))
    return np.reshape(y, (mA, mB))


@stands_in_for(_distance.squareform)
def squareform(X, force="no", checks=True):
    """SciPy's squareform, a gather either way; ``checks`` of a matrix (zero diagonal,
    symmetry) are SciPy's, on the values."""
    (X,) = lists_as_arrays((X,))
    X = X if hasattr(X, "dtype") else np.asarray(X)
    s = np.shape(X)
    if force.lower() == "tomatrix" and len(s) != 1:
        raise ValueError("Forcing 'tomatrix' but input X is not a distance vector.")
    if force.lower() == "tovector" and len(s) != 2:
        raise ValueError("Forcing 'tovector' but input X is not a distance matrix.")
    if len(s) == 1:
        if s[0] == 0:
            return np.zeros((1, 1), dtype=X.dtype)
        d = int(np.ceil(np.sqrt(s[0] * 2)))
        if d * (d - 1) != s[0] * 2:
            raise ValueError("Incompatible vector size. It must be a binomial coefficient n "
                             "choose 2 for some integer n >= 2.")
        # entry (i, j), i ≠ j, is X's entry of the pair; the diagonal the 0 placed first
        first, second = np.triu_indices(d, 1)
        index = np.zeros((d, d), np.intp)
        index[first, second] = index[second, first] = 1 + np.arange(s[0])
        return np.concatenate((np.zeros(1, X.dtype), X))[index]
    if len(s) == 2:
        if s[0] != s[1]:
            raise ValueError("The matrix argument must be square.")
        if checks:  # SciPy's is_valid_dm, at its tolerance 0
            if np.any(X != np.swapaxes(X, 0, 1)):
                raise ValueError("Distance matrix 'X' must be symmetric.")
            if np.any(np.diagonal(X) != 0):
                raise ValueError("Distance matrix 'X' diagonal must be zero.")
        if s[0] <= 1:
            return np.zeros(0, X.dtype)
        return X[np.triu_indices(s[0], 1)]
    raise ValueError("The first argument must be one or two dimensional array. A "
                     f"{len(s)}-dimensional array is not permitted")


@stands_in_for(_distance._validate_vector)
def _validate_vector(u, dtype=None):
    """SciPy's check of the vectors of its distances between two points (``euclidean(u, v)``,
    ``minkowski``, ``cosine``, ``correlation``, ``seuclidean``, ``mahalanobis``, ``braycurtis``,
    ``canberra``, ...), which converts them with ``np.asarray``: the traced vector itself, so
    that SciPy's own NumPy steps after it run on it (SciPy's values, their derivatives)."""
    (u,) = lists_as_arrays((u,))
    u = u if hasattr(u, "dtype") else np.asarray(u)
    if dtype is not None and u.dtype != dtype:
        u = u.astype(dtype)
    if np.ndim(u) == 1:
        return u
    raise ValueError("Input vector should be 1-D.")


@stands_in_for(_distance.correlation)
def correlation(u, v, w=None, centered=True):
    """SciPy's ``correlation`` (and ``cosine``, which calls it), step by step, its
    ``math.sqrt`` of a traced value ``np.sqrt`` (the same correctly rounded root)."""
    u, v = _validate_vector(u), _validate_vector(v)
    if np.iscomplexobj(u) or np.iscomplexobj(v):
        raise TypeError("`u` and `v` must be real.")
    if w is not None:
        w = _distance._validate_weights(w)
        w = w / w.sum()
    if centered:
        u = u - (np.mean(u) if w is None else np.dot(u, w))
        v = v - (np.mean(v) if w is None else np.dot(v, w))
    uw, vw = (u, v) if w is None else (u * w, v * w)
    dist = 1.0 - np.dot(u, vw) / np.sqrt(np.dot(u, uw) * np.dot(v, vw))
    return np.clip(dist, 0.0, 2.0)  # SciPy clips a rounding outside [0, 2]


@stands_in_for(_distance.jensenshannon)
def jensenshannon(p, q, base=None, *, axis=0, keepdims=False):
    """SciPy's ``jensenshannon``, step by step, without its ``np.asarray``."""
    p, q = lists_as_arrays((p, q))
    p = p if hasattr(p, "dtype") else np.asarray(p)
    q = q if hasattr(q, "dtype") else np.asarray(q)
    p = p / np.sum(p, axis=axis, keepdims=True)
    q = q / np.sum(q, axis=axis, keepdims=True)
    m = (p + q) / 2.0
    js = (np.sum(_special.rel_entr(p, m), axis=axis, keepdims=keepdims)
          + np.sum(_special.rel_entr(q, m), axis=axis, keepdims=keepdims))
    if base is not None:
        js = js / np.log(base)
    return np.sqrt(js / 2.0)


# ----------------------------------------------------------------------------------------------
# k-d trees: SciPy's tree of the plain points decides the neighbours; the distances are SciPy's,
# differentiated through the Minkowski distance between each query and its neighbour


def _carries(value):
    """Whether ``value`` (lists and tuples of it) depends on the differentiated arguments."""
    if type(value) in (list, tuple):
        return any(_carries(v) for v in value)
    return carries_derivative(value)


class _PlainTree:
    """SciPy's tree (``cls``, built with ``options``; a convex hull too) of the plain points a
    call brings: built again when a call (a replay's, on other points) brings other points than
    the last, so that the neighbours (facets) are always those of the points at hand. ``tree``:
    SciPy's own tree of constant points, held as it is."""

    def __init__(self, cls, options, tree=None):
        self.cls, self.options, self.tree, self.key = cls, options, tree, None

    def of(self, data):
        if data is None:
            return self.tree
        key = (np.shape(data), data.tobytes())
        if key != self.key:
            # the tree holds its own copy of the points (as copy_data=True does)
            self.tree = self.cls(np.array(data, dtype=np.float64, copy=True), **self.options)
            self.key = key
        return self.tree


def _answer(holder, data, x, r, method, settings):
    """SciPy's tree's answer to ``method`` on the plain values: the decision the indices are."""
    tree = holder.of(data)
    if method == "build":
        return np.zeros(0)
    if method == "query":  # r: distance_upper_bound
        d, i = tree.query(x, distance_upper_bound=r, **settings)
        return np.asarray(d, dtype=np.float64), np.asarray(i, dtype=np.intp)
    if method == "query_ball_point":
        result = tree.query_ball_point(x, r, **settings)
        if settings.get("return_length"):
            return np.asarray(result, dtype=np.intp)
        lists = [result] if np.ndim(x) == 1 else list(np.ravel(result))
        return (np.array([j for found in lists for j in found], dtype=np.intp),
                np.array([len(found) for found in lists], dtype=np.intp))
    if method == "sparse_distance_matrix":  # x: the other tree's points; r: max_distance
        other = settings.pop("other").of(x)
        if settings.pop("coo"):
            found = tree.sparse_distance_matrix(other, r, output_type="coo_matrix", **settings)
            return (np.asarray(found.row, dtype=np.intp), np.asarray(found.col, dtype=np.intp),
                    np.asarray(found.data, dtype=np.float64))
        found = tree.sparse_distance_matrix(other, r, output_type="dict", **settings)
        pairs = np.reshape(np.array(list(found), dtype=np.intp), (-1, 2))
        return pairs[:, 0], pairs[:, 1], np.array(list(found.values()), dtype=np.float64)
    # query_pairs: the pairs in the order SciPy's set gives them
    pairs = (tree.query_pairs(r, output_type="ndarray", **settings)
             if settings.pop("ndarray") else list(tree.query_pairs(r, **settings)))
    return np.reshape(np.array(pairs, dtype=np.intp), (-1, 2))


_asked = Value(lambda holder, data, x, r, method, settings: _answer(
    holder, data, x, r, method, dict(settings)), "scipy.spatial KDTree's neighbours")


def _setting(value, what):
    if _carries(value):
        raise UnsupportedOperationError(
            f"scipy.spatial.KDTree: {what} depends on the differentiated arguments; mutad "
            "differentiates the tree's points and the query points. Pass it as a constant (or "
            "through mutad.stop_gradient).")
    return value


def _radius(r):
    """A radius is a decision (which points lie within it): its plain value."""
    return stop_gradient(r) if _carries(r) else r


def _queries(x, m):
    x = _array(x)
    if np.ndim(x) == 0 or np.shape(x)[-1] != m:
        raise ValueError(f"x must consist of vectors of length {m} but has shape {np.shape(x)}")
    return x


def _query(holder, data, points, x, k, eps, p, distance_upper_bound, workers):
    for value, what in ((k, "k"), (eps, "eps"), (p, "p"), (workers, "workers")):
        _setting(value, what)
    m = np.shape(points)[1]
    x = _queries(x, m)
    settings = dict(k=k, eps=eps, p=p, workers=workers)
    d, i = _asked(holder, data, x, _radius(distance_upper_bound), "query", settings)
    n = np.shape(points)[0]
    missing = i == n  # SciPy's index of a missing neighbour
    neighbours = points[np.where(missing, 0, i)]
    queries = x if np.ndim(i) == np.ndim(x) - 1 else np.expand_dims(x, -2)
    difference = queries - neighbours
    box = getattr(holder.of(None), "boxsize", None)
    if box is not None:  # the periodic distance: the nearest image (a decision of round's)
        box = np.array(box, dtype=np.float64)
        difference = difference - box * np.round(difference / box)
    p = float(p)
    if not 1.0 <= p <= np.inf:
        raise ValueError("Only p-norms with 1<=p<=infinity permitted")
    distance = _distances(difference, np.zeros(()), "minkowski", None, {"p": p})
    return scipys_value(d, np.where(missing, 0.0, distance)), i


def _ball_point(holder, data, points, x, r, p, eps, workers, return_sorted, return_length):
    for value, what in ((p, "p"), (eps, "eps")):
        _setting(value, what)
    x = _queries(x, np.shape(points)[1])
    settings = dict(p=p, eps=eps, workers=workers, return_sorted=return_sorted,
                    return_length=return_length)
    answer = _asked(holder, data, x, _radius(r), "query_ball_point", settings)
    if return_length:
        return answer
    flat, lengths = (a.tolist() for a in answer)  # Python's structure: guarded in a replay
    lists, start = [], 0
    for length in lengths:
        lists.append(flat[start:start + length])
        start += length
    if np.ndim(x) == 1:
        return lists[0]
    result = np.empty(len(lists), dtype=object)
    for position, found in enumerate(lists):
        result[position] = found
    return np.reshape(result, np.shape(x)[:-1])


def _pairs(holder, data, r, p, eps, output_type):
    for value, what in ((p, "p"), (eps, "eps")):
        _setting(value, what)
    if output_type not in ("set", "ndarray"):
        raise ValueError(f"Invalid output type {output_type!r}")
    settings = dict(p=p, eps=eps, ndarray=output_type == "ndarray")
    rows = _asked(holder, data, None, _radius(r), "query_pairs", settings).tolist()
    if output_type == "set":
        return {(int(a), int(b)) for a, b in rows}
    return np.reshape(np.array(rows, dtype=np.intp), (-1, 2))


def _sparse_distances(tree, points, holder, data, other, max_distance, p, output_type):
    """``sparse_distance_matrix``: SciPy's pairs within ``max_distance`` (a decision) and
    their distances, SciPy's bit for bit, differentiated as ``query``'s are."""
    _setting(p, "p")
    if output_type not in ("coo_matrix", "dict"):
        if output_type in ("dok_matrix", "ndarray"):
            raise UnsupportedOperationError(
                f"scipy.spatial.KDTree.sparse_distance_matrix(..., output_type={output_type!r}) "
                "of differentiated points: mutad follows output_type='coo_matrix' and 'dict'; "
                "convert the coo_matrix (a matrix of traced values) as you need.")
        raise ValueError('Invalid output type')
    if isinstance(other, _TracedTree):
        other_holder, other_data, other_points = other._holder, other.data, other.data
    elif isinstance(other, _SCIPY_CKDTREE):
        other_holder, other_data, other_points = _PlainTree(type(other), {}, other), None, \
            other.data
    else:
        raise TypeError("other must be a KDTree")
    if np.shape(points)[1] != np.shape(other_points)[1]:
        raise ValueError("Trees passed to sparse_distance_matrix have different "
                         "dimensionality")
    settings = dict(p=p, other=other_holder, coo=output_type == "coo_matrix")
    row, col, d = _asked(holder, data, other_data, _radius(max_distance),
                         "sparse_distance_matrix", settings)
    difference = points[row] - other_points[col]
    box = getattr(holder.of(None), "boxsize", None)
    if box is not None:
        box = np.array(box, dtype=np.float64)
        difference = difference - box * np.round(difference / box)
    distance = _distances(difference, np.zeros(()), "minkowski", None, {"p": float(p)})
    values = scipys_value(d, distance)
    if output_type == "dict":
        return {(int(i), int(j)): values[k]
                for k, (i, j) in enumerate(zip(row.tolist(), col.tolist(), strict=True))}
    import scipy.sparse  # (mutad's traced matrix of the traced distances)

    return scipy.sparse.coo_matrix((values, (row, col)),
                                   shape=(np.shape(points)[0], np.shape(other_points)[0]))


_PLAIN_ATTRIBUTES = ("n", "m", "leafsize", "size", "boxsize")


class _TracedTree:
    """``KDTree`` or ``cKDTree`` of traced points: SciPy's tree of the plain points decides,
    the distances follow the points (see the module)."""

    def __init__(self, cls, data, options):
        self._cls, self.data = cls, data
        self._holder = _PlainTree(cls, options)
        _asked(self._holder, data, None, None, "build", {})  # SciPy's checks of the points

    def query(self, x, k=1, eps=0, p=2, distance_upper_bound=np.inf, workers=1):
        return _query(self._holder, self.data, self.data, x, k, eps, p, distance_upper_bound,
                      workers)

    def query_ball_point(self, x, r, p=2.0, eps=0, workers=1, return_sorted=None,
                         return_length=False):
        return _ball_point(self._holder, self.data, self.data, x, r, p, eps, workers,
                           return_sorted, return_length)

    def query_pairs(self, r, p=2.0, eps=0, output_type="set"):
        return _pairs(self._holder, self.data, r, p, eps, output_type)

    def _refused(self, name, instead):
        raise UnsupportedOperationError(
            f"scipy.spatial.{self._cls.__name__}(...).{name} of differentiated points: mutad "
            f"follows query, query_ball_point and query_pairs of such a tree. {instead}")

    def sparse_distance_matrix(self, other, max_distance, p=2.0, output_type="dok_matrix"):
        return _sparse_distances(self, self.data, self._holder, self.data, other, max_distance,
                                 p, output_type)

    def query_ball_tree(self, *args, **kwargs):
        self._refused("query_ball_tree", "Query the other tree's points with query_ball_point.")

    def count_neighbors(self, *args, **kwargs):
        self._refused("count_neighbors", "Count query_ball_point(..., return_length=True).")

    def __getattr__(self, name):
        if name in _PLAIN_ATTRIBUTES:
            return getattr(self._holder.of(None), name)
        return refused_attribute(
            name, f"scipy.spatial.{self._cls.__name__}(...).{name}: this tree was built of "
            "differentiated points, and mutad follows its data, n, m, leafsize, size, boxsize, "
            "query, query_ball_point, query_pairs and sparse_distance_matrix (SciPy's own "
            "tree's methods given this tree are not followed: call this tree's method, "
            "tree.sparse_distance_matrix(constant_tree, ...), instead). Build it of plain "
            "points (mutad.stop_gradient) for the rest.")


CARRIERS.add(_TracedTree)  # (SciPy's tree methods given one: their rules, or a refusal)


class _StandInClass(type):
    """The type of the stand-in for a SciPy class of points (a tree, a hull): calling it builds
    (SciPy's object of plain points, mutad's of traced ones); otherwise it is SciPy's class."""

    def __call__(cls, *args, **kwargs):
        return cls.construct(*args, **kwargs)

    def __instancecheck__(cls, instance):
        if isinstance(instance, (_TracedTree, _TracedHull, _TracedDelaunay)):
            return issubclass(instance._cls, cls.scipy)
        return isinstance(instance, cls.scipy)

    def __subclasscheck__(cls, subclass):
        return issubclass(subclass, cls.scipy)

    def __getattr__(cls, name):
        return getattr(cls.scipy, name)


def _tree_class(scipy_cls, plain_cls):
    """The stand-in for ``scipy_cls``; of plain points it builds SciPy's ``plain_cls`` (held in
    a closure: the mode swaps the module's names bound to SciPy's classes)."""
    def construct(data, *args, **options):
        if not _carries(data):
            return plain_cls(data, *args, **options)
        names = ("leafsize", "compact_nodes", "copy_data", "balanced_tree", "boxsize")
        if len(args) > len(names):
            raise TypeError(f"{scipy_cls.__name__}() takes at most {len(names) + 1} positional "
                            "arguments")
        options = {**dict(zip(names, args)), **options}
        for name, value in options.items():
            _setting(value, name)
        data = _array(data)
        if np.ndim(data) != 2:
            raise ValueError("data must be 2 dimensions")
        return _TracedTree(scipy_cls, np.copy(data), options)

    return _class_stand_in(scipy_cls, construct)


def _class_stand_in(scipy_cls, construct):
    """The stand-in for ``scipy_cls`` (routed), whose calls ``construct`` builds."""
    stand_in = _StandInClass(scipy_cls.__name__, (), {
        "construct": staticmethod(construct), "scipy": scipy_cls, "__module__": __name__,
        "__qualname__": scipy_cls.__qualname__,
        "__doc__": f"``scipy.spatial.{scipy_cls.__name__}``, of traced points too (see the "
                   "module)."})
    defroute(scipy_cls, stand_in)
    return stand_in


KDTree = _tree_class(_SCIPY_KDTREE, _SCIPY_KDTREE)
# A cKDTree of plain points is SciPy's KDTree, its Python subclass over the same compiled tree
# (the same answers), whose methods take traced queries
cKDTree = _tree_class(_SCIPY_CKDTREE, _SCIPY_KDTREE)


# SciPy's own tree (of constant points) queried at traced points (registry.defmethod): KDTree,
# a Python class. cKDTree's methods are compiled, and a compiled class takes no routed method:
# one built outside the differentiation is swapped, where the function reaches it, for an
# object whose queries are these (_PlainCKDTree; one built inside it is a KDTree, above).


def _constant_query(self, x, k=1, eps=0, p=2, distance_upper_bound=np.inf, workers=1):
    return _query(_PlainTree(type(self), {}, self), None, self.data, x, k, eps, p,
                  distance_upper_bound, workers)


def _constant_ball_point(self, x, r, p=2.0, eps=0, workers=1, return_sorted=None,
                         return_length=False):
    return _ball_point(_PlainTree(type(self), {}, self), None, self.data, x, r, p, eps, workers,
                       return_sorted, return_length)


def _constant_pairs(self, r, p=2.0, eps=0, output_type="set"):
    return _pairs(_PlainTree(type(self), {}, self), None, r, p, eps, output_type)


def _constant_sparse(self, other, max_distance, p=2.0, output_type="dok_matrix"):
    return _sparse_distances(self, self.data, _PlainTree(type(self), {}, self), None, other,
                             max_distance, p, output_type)


defmethod(_SCIPY_KDTREE, "query", _constant_query)
defmethod(_SCIPY_KDTREE, "sparse_distance_matrix", _constant_sparse)
defmethod(_SCIPY_KDTREE, "query_ball_point", _constant_ball_point)
defmethod(_SCIPY_KDTREE, "query_pairs", _constant_pairs)
# (read above only: a routed class left bound to a name no code of the module reads would have
# the mode switch the module's class on every entry)
del _SCIPY_KDTREE


class _PlainCKDTree:
    """What stands in, in a differentiated function, for a cKDTree SciPy built before it
    (reached by a name, an attribute, a closure): its compiled methods take plain arrays only,
    so its queries with a traced argument are KDTree's routed ones above, asking the same tree
    (SciPy's answers); the rest, and queries of plain values, are SciPy's own."""

    def __init__(self, tree):
        self.tree = tree

    @property  # type: ignore[misc]
    def __class__(self):  # isinstance(tree, cKDTree), as SciPy's
        return type(self.__dict__["tree"])

    def __getattr__(self, name):
        attribute = getattr(self.__dict__["tree"], name)
        if not callable(attribute):
            return attribute

        def unrouted(*args, **kwargs):
            if holds_derivative([*args, *kwargs.values()]):
                raise UnsupportedOperationError(
                    f"scipy.spatial.cKDTree.{name} of differentiated values (or a tree of "
                    "differentiated points): mutad follows query, query_ball_point, "
                    "query_pairs and sparse_distance_matrix of SciPy's tree. Pass them as "
                    "constants (mutad.stop_gradient) for the rest.")
            return attribute(*args, **kwargs)

        return unrouted


def _plain_ckdtree_method(name, routed):
    def method(self, *args, **kwargs):
        tree = self.__dict__["tree"]
        if holds_derivative([*args, *kwargs.values()]):
            return routed(tree, *args, **kwargs)
        return getattr(tree, name)(*args, **kwargs)

    method.__name__ = name
    return method


for _name, _routed in (("query", _constant_query), ("query_ball_point", _constant_ball_point),
                       ("query_pairs", _constant_pairs),
                       ("sparse_distance_matrix", _constant_sparse)):
    setattr(_PlainCKDTree, _name, _plain_ckdtree_method(_name, _routed))
COMPILED_OBJECTS[_SCIPY_CKDTREE] = _PlainCKDTree


# ----------------------------------------------------------------------------------------------
# Convex hulls: SciPy's hull of the plain points decides the facets (piecewise constant in the
# points); its volume, area and equations are SciPy's values with the derivatives of the same
# quantities of those facets, computed from the traced points: each facet's cone from a point
# inside the hull (the mean of its vertices), |det(P_f - c)| / d!, each facet's (d-1)-volume,
# sqrt(det(E Eᵀ)) / (d-1)!, E the facet's edges from its first vertex, and its unit normal.

_HULL_INDICES = ("simplices", "vertices", "neighbors", "coplanar", "good")  # (decisions)


def _hull_answer(holder, data, what):
    hull = holder.of(data)
    value = getattr(hull, what)
    return np.asarray(value, dtype=np.float64 if what in ("volume", "area", "equations")
                      else np.intp) if value is not None else None


_hull_asked = Value(_hull_answer, "scipy.spatial.ConvexHull")


class _TracedHull:
    """``ConvexHull`` of traced points: SciPy's hull of the plain points decides the facets;
    ``volume`` and ``area`` follow the points (see the section)."""

    def __init__(self, data, options):
        # (SciPy's class held as an attribute: the allocation mode swaps routed classes in
        # modules' names)
        self._cls, self.points = ConvexHull.scipy, data
        self._holder = _PlainTree(ConvexHull.scipy, options)
        _hull_asked(self._holder, data, "vertices")  # SciPy's checks of the points
        self.npoints, self.ndim = np.shape(data)

    def __getattr__(self, name):
        if name in _HULL_INDICES:
            return _hull_asked(self._holder, self.points, name)
        if name in ("nsimplex", "max_bound", "min_bound"):
            if name == "nsimplex":
                return np.shape(self.simplices)[0]
            return (np.max if name == "max_bound" else np.min)(self.points, axis=0)
        return refused_attribute(
            name, f"scipy.spatial.ConvexHull(...).{name}: this hull was built of differentiated "
            "points, and mutad follows its points, volume, area, equations, simplices, "
            "vertices, neighbors, coplanar, good, npoints, ndim, nsimplex, max_bound and "
            "min_bound. Build it of plain points (mutad.stop_gradient) for the rest.")

    @property
    def volume(self):
        corners = self.points[self.simplices]  # (facets, d, d)
        inside = np.mean(self.points[self.vertices], axis=0)
        cones = np.abs(np.linalg.det(corners - inside)) / math.factorial(self.ndim)
        return scipys_value(_hull_asked(self._holder, self.points, "volume"), np.sum(cones))

    @property
    def area(self):
        corners = self.points[self.simplices]
        edges = corners[:, 1:] - corners[:, :1]  # (facets, d - 1, d)
        gram = edges @ np.swapaxes(edges, -1, -2)
        facets = np.sqrt(np.linalg.det(gram)) / math.factorial(self.ndim - 1)
        return scipys_value(_hull_asked(self._holder, self.points, "area"), np.sum(facets))

    @property
    def equations(self):
        """Each facet's outward unit normal n and offset -n·p (n·x + offset ≤ 0 inside):
        SciPy's values with the derivatives of n ∝ the facet's generalized cross product (its
        edges' cofactors), its sign SciPy's."""
        value = _hull_asked(self._holder, self.points, "equations")
        corners = self.points[self.simplices]  # (facets, d, d)
        edges = corners[:, 1:] - corners[:, :1]  # (facets, d - 1, d)
        d = self.ndim  # (Qhull's hulls have two dimensions or more)
        cofactors = np.stack([(-1) ** k * np.linalg.det(np.delete(edges, k, axis=2))
                              for k in range(d)], axis=1)
        sign = np.where(np.sum(stop_gradient(cofactors) * value[:, :d], axis=1) < 0, -1.0, 1.0)
        normals = cofactors * (sign / np.linalg.norm(cofactors, axis=1))[:, None]
        offsets = -np.sum(normals * corners[:, 0], axis=1)
        composition = np.concatenate([normals, offsets[:, None]], axis=1)
        if not reproduces(value, composition, 1e-6):
            raise UnsupportedOperationError(  # (a guard: Qhull's facets merged, say)
                "scipy.spatial.ConvexHull(...).equations: the facets' normals mutad computes "
                "from the differentiated points did not reproduce Qhull's (coplanar points "
                "merged into one facet?), so it cannot differentiate them. Compute the "
                "normals from points[simplices] with NumPy's functions.")
        return scipys_value(value, composition)

    def add_points(self, *args, **kwargs):
        raise UnsupportedOperationError(
            "scipy.spatial.ConvexHull(..., incremental=True).add_points of differentiated "
            "points: mutad follows a hull built at once. Build a new hull of all the points.")

    close = add_points


CARRIERS.add(_TracedHull)


def _construct_hull(points, incremental=False, qhull_options=None):
    if not _carries(points):
        return ConvexHull.scipy(points, incremental, qhull_options)
    return _TracedHull(_qhull_points("ConvexHull", "a hull", points, incremental,
                                     qhull_options), {"qhull_options": qhull_options})


def _qhull_points(name, what, points, incremental, qhull_options):
    """A copy of the traced ``points`` of Qhull's ``name`` (``what``: a hull, a
    triangulation), checked as SciPy checks them; ``incremental`` refused."""
    _setting(qhull_options, "qhull_options")
    points = _array(points)
    if np.ndim(points) != 2:
        raise ValueError("Input points array must have 2 dimensions.")
    if incremental:
        raise UnsupportedOperationError(
            f"scipy.spatial.{name}(..., incremental=True) of differentiated points: mutad "
            f"follows {what} built at once. Build it of all the points, without incremental.")
    return np.copy(points)


ConvexHull = _class_stand_in(_spatial_module.ConvexHull, _construct_hull)


# ----------------------------------------------------------------------------------------------
# Delaunay triangulations: SciPy's triangulation of the plain points decides the simplices and
# their neighbours (piecewise constant in the points), and a query's simplex (find_simplex);
# the barycentric transforms are SciPy's values with the derivatives of the same inverses
# computed from the traced points: T⁻¹ of T = [x_0 - x_d, ..., x_{d-1} - x_d] (as columns) and
# x_d, a simplex's vertices x_0..x_d (NaN where SciPy finds the simplex degenerate).

_DELAUNAY_INDICES = ("simplices", "neighbors", "coplanar", "convex_hull", "vertex_to_simplex")


def _delaunay_answer(holder, data, what, *query):
    triangulation = holder.of(data)
    if what == "find_simplex":
        xi, bruteforce, tol = query
        return np.asarray(triangulation.find_simplex(xi, bruteforce, tol), dtype=np.intp)
    if what == "transform":
        return np.array(triangulation.transform, dtype=np.float64)
    if what in ("indptr", "indices"):
        return np.asarray(triangulation.vertex_neighbor_vertices[what == "indices"], np.intp)
    return np.asarray(getattr(triangulation, what), dtype=np.intp)


_delaunay_asked = Value(_delaunay_answer, "scipy.spatial.Delaunay")


class _TracedDelaunay:
    """``Delaunay`` of traced points: SciPy's triangulation of the plain points decides the
    simplices; ``transform`` follows the points (see the section)."""

    def __init__(self, data, options):
        self._cls, self.points = Delaunay.scipy, data
        self._holder = _PlainTree(Delaunay.scipy, options)
        _delaunay_asked(self._holder, data, "simplices")  # SciPy's checks of the points
        self.npoints, self.ndim = np.shape(data)
        self.furthest_site = bool(options["furthest_site"])

    def __getattr__(self, name):
        if name in _DELAUNAY_INDICES:
            return _delaunay_asked(self._holder, self.points, name)
        if name == "vertex_neighbor_vertices":
            return tuple(_delaunay_asked(self._holder, self.points, part)
                         for part in ("indptr", "indices"))
        if name == "nsimplex":
            return np.shape(self.simplices)[0]
        if name in ("max_bound", "min_bound"):
            return (np.max if name == "max_bound" else np.min)(self.points, axis=0)
        return refused_attribute(
            name, f"scipy.spatial.Delaunay(...).{name}: this triangulation was built of "
            "differentiated points, and mutad follows its points, transform, simplices, "
            "neighbors, coplanar, convex_hull, vertex_to_simplex, vertex_neighbor_vertices, "
            "find_simplex, npoints, ndim, nsimplex, max_bound and min_bound. Compute what you "
            "need from points[simplices] with NumPy's functions, or build it of plain points "
            "(mutad.stop_gradient).")

    def find_simplex(self, xi, bruteforce=False, tol=None):
        """The simplex holding each point of ``xi``: SciPy's answer, a decision (integers)."""
        return _delaunay_asked(self._holder, self.points, "find_simplex", xi, bruteforce, tol)

    @property
    def transform(self):
        value = _delaunay_asked(self._holder, self.points, "transform")
        corners = self.points[self.simplices]  # (nsimplex, d + 1, d)
        last = corners[:, -1]
        columns = np.swapaxes(corners[:, :-1] - last[:, None, :], -1, -2)
        regular = np.isfinite(value).all(axis=(1, 2))[:, None, None]
        # (a degenerate simplex, NaN in SciPy's value, inverts the identity: no derivative)
        inverse = np.linalg.inv(np.where(regular, columns, np.eye(self.ndim)))
        composition = np.concatenate([inverse, last[:, None, :]], axis=1)
        return np.where(regular, scipys_value(np.where(regular, value, 0.0), composition),
                        value)

    def add_points(self, *args, **kwargs):
        raise UnsupportedOperationError(
            "scipy.spatial.Delaunay(..., incremental=True).add_points of differentiated "
            "points: mutad follows a triangulation built at once. Build a new one of all the "
            "points.")

    close = add_points


CARRIERS.add(_TracedDelaunay)


def _construct_delaunay(points, furthest_site=False, incremental=False, qhull_options=None):
    if not _carries(points):
        return Delaunay.scipy(points, furthest_site, incremental, qhull_options)
    _setting(furthest_site, "furthest_site")
    return _TracedDelaunay(_qhull_points("Delaunay", "a triangulation", points, incremental,
                                         qhull_options),
                           {"furthest_site": furthest_site, "qhull_options": qhull_options})


Delaunay = _class_stand_in(_spatial_module.Delaunay, _construct_delaunay)


def _constant_find_simplex(self, xi, bruteforce=False, tol=None):
    """SciPy's triangulation of constant points asked for the simplex of traced points: its
    answer on their plain values (a decision, integers), asked again on every replay."""
    return _delaunay_asked(_PlainTree(type(self), {}, self), None, "find_simplex", xi,
                           bruteforce, tol)


defmethod(_spatial_module.Delaunay, "find_simplex", _constant_find_simplex)


# ----------------------------------------------------------------------------------------------
# Rotations: scipy.spatial.transform.Rotation of traced values holds its traced quaternions and
# mutad's backend (``_FollowedRotations``) in place of SciPy's. Each step is SciPy's own value
# (its compiled backend's, of the plain numbers) with the derivatives of the same step of
# SciPy's Array API backend (``_rotation_xp``), which computes with NumPy's functions on the
# traced arrays (``scipys_value``), guarded to agree. Its constructors (``from_quat``,
# ``from_matrix``, ``from_rotvec``, ``from_mrp``, ``from_euler``, ``Rotation(quat)``), and
# ``apply`` and ``*`` (which pick SciPy's backend afresh), are routed (``defmethod``); the rest
# of the class reads the rotation's backend and needs nothing more.

_Rotation = _rotation.Rotation
_NUMPY_NAMESPACE = _rotation.array_namespace(np.empty(0))
_ROTATION_STEPS = ("from_quat", "from_matrix", "from_rotvec", "from_mrp", "from_euler",
                   "as_quat", "as_matrix", "as_rotvec", "as_mrp", "as_euler", "inv", "magnitude",
                   "apply", "compose_quat")


def _scipys_rotation_step(name, compiled, settings, *arrays):
    backend = _rotation.cython_backend if compiled else _rotation.xp_backend
    # (the compiled backend takes writable buffers; mutad keeps the constants it reads
    # read-only)
    arrays = [a.copy() if isinstance(a, np.ndarray) and not a.flags.writeable else a
              for a in arrays]
    return np.asarray(getattr(backend, name)(*arrays, **dict(settings)))


_rotation_step_value = Value(_scipys_rotation_step, "scipy.spatial.transform.Rotation")


def _from_quat(quat, normalize=True, copy=True, scalar_first=False):
    """``_rotation_xp.from_quat`` (whose copy converts)."""
    if scalar_first:
        quat = np.roll(quat, -1, axis=-1)
    return quat / np.linalg.norm(quat, axis=-1, keepdims=True) if normalize else quat


def _from_matrix(matrix, assume_valid=False):
    """``_rotation_xp.from_matrix``: a matrix that is not orthogonal (SciPy's decision, to
    1e-12) replaced by its orthogonal polar factor U Vᵀ, which it writes with array_api_extra's
    ``at``, matrix by matrix (an orthogonal one's SVD is not taken, as SciPy's)."""
    if not assume_valid:
        stack = np.reshape(matrix, (-1, 3, 3))
        orthogonal = np.all(np.isclose(stack @ np.swapaxes(stack, -1, -2), np.eye(3),
                                       rtol=1e-5, atol=1e-12), axis=(-2, -1))
        if not np.all(orthogonal):
            polar = [m if keep else (lambda u, _, vt: u @ vt)(*np.linalg.svd(m))
                     for m, keep in zip(stack, orthogonal.tolist(), strict=True)]
            matrix = np.reshape(np.stack(polar), np.shape(matrix))
    return _rotation.xp_backend._from_matrix_orthogonal(matrix)


def _inverse(quat):
    """``_rotation_xp.inv``: the vector part negated (which it writes with array_api_extra's
    ``at``, into an array it converts)."""
    return quat * np.array([-1.0, -1.0, -1.0, 1.0])


def _from_euler(seq, angles, degrees=False):
    """``_rotation_xp.from_euler`` (whose elementary quaternions it writes into zeros it
    allocates, out of mutad's sight): each made by ``np.stack``, composed in the order of
    ``seq``, intrinsic (capitals) or extrinsic; SciPy's checks of ``seq`` and the angles ran in
    its compiled step before."""
    angles = np.atleast_1d(np.deg2rad(angles) if degrees else angles)
    quat = None
    for position, axis in enumerate(seq.lower()):
        half = angles[..., position] / 2.0
        parts = [np.zeros_like(half)] * 3
        parts["xyz".index(axis)] = np.sin(half)
        elementary = np.stack(parts + [np.cos(half)], axis=-1)
        quat = elementary if quat is None else _rotation.xp_backend.compose_quat(
            *((quat, elementary) if seq.isupper() else (elementary, quat)))
    return quat


def _as_euler(quat, seq, degrees=False, suppress_warnings=False):
    """``_rotation_xp.as_euler`` (Bernardes and Viollet's angles of the quaternion, which it
    writes into zeros it allocates, out of mutad's sight): each angle made by ``np.where`` of
    SciPy's cases (gimbal lock: the third angle 0), stacked; SciPy's checks of ``seq`` and its
    warning came from its compiled step before."""
    extrinsic = seq.islower()
    i, j, k = ["xyz".index(axis) for axis in (seq if extrinsic else seq[::-1]).lower()]
    symmetric = i == k
    k = 3 - i - j if symmetric else k
    sign = (i - j) * (j - k) * (k - i) // 2
    if symmetric:
        a, b, c, d = quat[..., 3], quat[..., i], quat[..., j], quat[..., k] * sign
    else:
        a, b = quat[..., 3] - quat[..., j], quat[..., i] + quat[..., k] * sign
        c, d = quat[..., j] + quat[..., 3], quat[..., k] * sign - quat[..., i]
    half_sum, half_diff = np.arctan2(b, a), np.arctan2(d, c)
    second = 2 * np.arctan2(np.hypot(c, d), np.hypot(a, b))
    near_zero, near_pi = np.abs(second) <= 1e-7, np.abs(second - np.pi) <= 1e-7
    regular = ~(near_zero | near_pi)
    # SciPy's writes, in its order: the locked value into angle 0 (the others 0), then the
    # regular cases' first and third angles over it
    written = {0: np.where(near_zero, 2 * half_sum, 2 * half_diff * (-1 if extrinsic else 1))}
    written[2] = 0.0 * written[0]
    first, third = (0, 2) if extrinsic else (2, 0)
    written[first] = np.where(regular, half_sum - half_diff, written[first])
    written[third] = np.where(regular, half_sum + half_diff, written[third])
    if not symmetric:
        written[third], second = written[third] * sign, second - np.pi / 2
    angles = (np.stack([written[0], second, written[2]], axis=-1) + np.pi) % (2 * np.pi) - np.pi
    return np.rad2deg(angles) if degrees else angles


_ROTATION_COMPOSITIONS = {"from_quat": _from_quat, "from_matrix": _from_matrix, "inv": _inverse,
                          "from_euler": _from_euler, "as_euler": _as_euler}


def _rotation_step(name, *arrays, **settings):
    """Step ``name`` of SciPy's rotation backends on ``arrays``: SciPy's compiled backend's
    value where SciPy would take it (arrays of at most two dimensions, a matrix's three),
    its Array API backend's otherwise; with the derivatives of the latter's steps."""
    compiled = all(np.ndim(a) < (4 if name == "from_matrix" else 3) for a in arrays)
    if not _carries(arrays):
        return _scipys_rotation_step(name, compiled, tuple(settings.items()), *arrays)
    value = _rotation_step_value(name, compiled, tuple(settings.items()), *arrays)
    composition = _ROTATION_COMPOSITIONS.get(name, getattr(_rotation.xp_backend, name))(
        *arrays, **settings)
    if not reproduces(value, composition):
        raise UnsupportedOperationError(  # (a guard: never another step's derivative)
            f"scipy.spatial.transform.Rotation ({name}): SciPy's Array API backend, whose "
            "steps give mutad's derivative, did not reproduce its compiled backend's value "
            "here (a rotation by π, whose vector's sign is a choice, or Euler angles at "
            "gimbal lock), so mutad cannot differentiate it. Work with the quaternions or "
            "matrices (as_quat, as_matrix) there.")
    return scipys_value(value, composition)


class _FollowedRotations:
    """The backend of a Rotation holding traced quaternions (``_rotation_step``)."""

    def __getattr__(self, name):
        if name in _ROTATION_STEPS:
            return lambda *arrays, **settings: _rotation_step(name, *arrays, **settings)
        return refused_attribute(
            name, f"scipy.spatial.transform.Rotation: mutad follows {', '.join(_ROTATION_STEPS)} "
            f"of rotations of differentiated values, not {name}. Compute it from "
            "as_quat() or as_matrix() with NumPy's functions.")


_FOLLOWED_ROTATIONS = _FollowedRotations()


def _followed(rotation):
    return rotation._backend is _FOLLOWED_ROTATIONS


def _as_float64(x):
    """SciPy's ``_promote`` of NumPy arrays: float64."""
    x = _array(x)
    return x if x.dtype == np.float64 else x.astype(np.float64)


def _made(quat):
    """A Rotation of traced quaternions, as SciPy's ``_from_raw_quat`` makes one."""
    return _Rotation._from_raw_quat(quat, xp=_NUMPY_NAMESPACE, backend=_FOLLOWED_ROTATIONS)


def _rotation_init(self, quat, normalize=True, copy=True, scalar_first=False):
    quat = _as_float64(quat)
    if np.shape(quat)[-1] != 4:
        raise ValueError(f"Expected `quat` to have shape (..., 4), got {np.shape(quat)}.")
    self._xp, self._single = _NUMPY_NAMESPACE, np.ndim(quat) == 1
    self._backend = _FOLLOWED_ROTATIONS
    self._quat = _rotation_step("from_quat", quat[None] if self._single else quat,
                                normalize=normalize, copy=copy, scalar_first=scalar_first)


def _rotation_constructor(name):
    """``Rotation.from_<name>`` of traced values (their array after the settings ``from_euler``
    takes before it)."""
    count = 2 if name == "from_euler" else 1  # (from_euler(seq, angles))

    def construct(*args, **settings):
        if len(args) > count:  # (a setting passed by position: degrees)
            settings = {"degrees": args[count], **settings}
        return _made(_rotation_step(name, *args[:count - 1], _as_float64(args[count - 1]),
                                    **settings))

    construct.__name__ = name
    return construct


def _quaternions(rotation):
    """``rotation``'s quaternions as the steps read them: a plain Rotation's copied, as the
    differentiation keeps the memory it reads as a constant read-only while it runs, and
    SciPy's compiled steps of that Rotation (``inv``, ``as_matrix``) then ask for a writable
    buffer."""
    return rotation._quat if _followed(rotation) else np.array(rotation._quat)


def _rotation_apply(self, vectors, inverse=False):
    if not (_followed(self) or _carries(vectors)):
        return _ROTATION_APPLY(self, vectors, inverse)
    vectors = _as_float64(vectors)
    if np.shape(vectors)[-1] != 3:
        raise ValueError(f"Expected input of shape (..., 3), got {np.shape(vectors)}.")
    single_vector = np.ndim(vectors) == 1
    result = _rotation_step("apply", _quaternions(self), np.atleast_2d(vectors),
                            inverse=inverse)
    return result[0, ...] if self._single and single_vector else result


def _rotation_times(self, other):
    if not isinstance(other, _Rotation):
        return NotImplemented
    if not (_followed(self) or _followed(other)):
        return _ROTATION_TIMES(self, other)
    quat = _rotation_step("compose_quat", _quaternions(self), _quaternions(other))
    return _Rotation(quat[0] if self._single and other._single else quat, normalize=True,
                     copy=False)


def _rotation_approx_equal(self, other, atol=None, degrees=False):
    """A decision: SciPy's, of the plain quaternions."""
    if not (_followed(self) or _followed(other)):
        return _ROTATION_APPROX_EQUAL(self, other, atol, degrees)
    compiled = np.ndim(self._quat) < 3 and np.ndim(other._quat) < 3
    return _rotation_step_value("approx_equal", compiled, (("atol", atol), ("degrees", degrees)),
                                self._quat, other._quat)


_ROTATION_APPLY, _ROTATION_TIMES = _Rotation.apply, _Rotation.__mul__
_ROTATION_APPROX_EQUAL = _Rotation.approx_equal
for _name, _method in (("apply", _rotation_apply), ("__mul__", _rotation_times),
                       ("approx_equal", _rotation_approx_equal)):
    setattr(_method, "always", True)  # (a rotation of traced values given constants)
    defmethod(_Rotation, _name, _method)
defmethod(_Rotation, "__init__", _rotation_init)
for _name in ("from_matrix", "from_rotvec", "from_mrp", "from_euler"):
    defmethod(_Rotation, _name, _rotation_constructor(_name))


def _slerp_at(self, times):
    """``Slerp`` (of constant rotations) at traced times: SciPy's steps, each interval a
    decision (``searchsorted``, taken again by a replay), the rotation within it the
    composition with ``from_rotvec`` of the traced fraction of its rotation vector."""
    times = _as_float64(times)
    if np.ndim(times) > 1:
        raise ValueError("`times` must be at most 1-dimensional.")
    single_time = np.ndim(times) == 0
    times = np.atleast_1d(times)
    ind = np.where(times == self.times[0], 0, np.searchsorted(self.times, times) - 1)
    if np.any((ind < 0) | (ind > len(self.rotations) - 1)):
        raise ValueError(f"Interpolation times must be within the range [{self.times[0]}, "
                         f"{self.times[-1]}], both inclusive.")
    alpha = (times - self.times[ind]) / self.timedelta[ind]
    result = self.rotations[ind] * _Rotation.from_rotvec(self.rotvecs[ind] * alpha[:, None])
    return result[0] if single_time else result


defmethod(_spatial_module.transform.Slerp, "__call__", _slerp_at)


# ----------------------------------------------------------------------------------------------
# SciPy's own code on traced points (ScipysCode): procrustes's centring, scaling and
# orthogonal_procrustes (routed), geometric_slerp's interpolation on the sphere


procrustes = ScipysCode(_spatial_module.procrustes)
geometric_slerp = ScipysCode(_spatial_module.geometric_slerp)


# directed_hausdorff: SciPy's distance and the pair of points it found (a decision on the values,
# which a replay asks SciPy again), differentiated as the distance between that pair
_hausdorff = Value(lambda u, v, rng, seed: _distance.directed_hausdorff(
    u, v, rng) if seed is None else _distance.directed_hausdorff(u, v, seed=seed),
                   "scipy.spatial.distance.directed_hausdorff")  # (SciPy's seed, deprecated)


@stands_in_for(_distance.directed_hausdorff)
def directed_hausdorff(u, v, rng=0, *, seed=None):
    u, v = lists_as_arrays((u, v))
    d, i, j = _hausdorff(u, v, rng, seed)  # (SciPy's, of the points as doubles)
    pair = u[i].astype(np.float64) - v[j].astype(np.float64)
    return scipys_value(d, np.linalg.norm(pair)), i, j
