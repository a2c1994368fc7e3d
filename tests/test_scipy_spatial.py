"""scipy.spatial.distance's pdist, cdist and squareform of traced points (mutad/scipy/spatial.py):
values against SciPy's (bit for bit for the metrics SciPy accumulates in order, to a stated
tolerance for the others, over many random points), gradients by finite differences under both
policies and in forward mode, the caller's arrays, zero distances, refusals and replay."""

import numpy as np
import pytest
import scipy.spatial.distance as distance
from scipy.spatial.distance import cdist, pdist, squareform

import mutad
from mutad.errors import UnsupportedOperationError
from mutad.scipy import spatial

POLICIES = ("restore", "checkpoint")
RNG = np.random.default_rng(3)
X = RNG.standard_normal((6, 3))
Y = RNG.standard_normal((4, 3))
W = RNG.uniform(0.5, 2.0, 3)

# (metric, keywords, the largest relative difference from SciPy's value: 0 is bit for bit)
METRICS = [
    ("euclidean", {}, 0.0),
    ("sqeuclidean", {}, 0.0),
    ("cityblock", {}, 0.0),
    ("chebyshev", {}, 0.0),
    ("minkowski", {}, 0.0),
    ("minkowski", {"p": 1}, 0.0),
    ("minkowski", {"p": np.inf}, 0.0),
    ("minkowski", {"p": 3.0}, 1e-15),
    ("minkowski", {"p": 1.5}, 1e-15),
    ("euclidean", {"w": W}, 0.0),
    ("sqeuclidean", {"w": W}, 0.0),
    ("cityblock", {"w": W}, 0.0),
    ("chebyshev", {"w": W}, 0.0),
    ("minkowski", {"p": 3.0, "w": W}, 1e-15),
    ("cosine", {}, 1e-13),
    ("correlation", {}, 1e-12),
    ("seuclidean", {}, 1e-15),
    ("seuclidean", {"V": W}, 1e-15),
    ("mahalanobis", {}, 1e-13),
    ("mahalanobis", {"VI": np.diag(W)}, 1e-13),
    ("e", {}, 0.0),  # SciPy's aliases
    ("cos", {}, 1e-13),
]


def _id(row):
    name, keywords, _ = row
    return name + "".join(f"-{k}" if np.ndim(v) else f"-{k}={v}" for k, v in keywords.items())


def _forms(name, keywords):
    return {"pdist": lambda x: pdist(x, name, **keywords),
            "cdist": lambda x, y: cdist(x, y, name, **keywords)}


def _relative_difference(mine, scipys):
    differ = mine != scipys
    if not differ.any():
        return 0.0
    return float(np.max(np.abs(mine - scipys)[differ] / np.abs(scipys)[differ]))


@pytest.mark.parametrize("row", METRICS, ids=_id)
def test_values_are_scipys(row):
    name, keywords, tolerance = row
    rng = np.random.default_rng(0)
    worst = 0.0
    for _ in range(50):
        x = rng.standard_normal((9, 4 if "w" not in keywords and "V" not in keywords
                                 and "VI" not in keywords else 3)) * 10.0 ** rng.integers(-3, 3)
        y = rng.standard_normal((5, np.shape(x)[1]))
        for form, args in (("pdist", (x,)), ("cdist", (x, y))):
            f = _forms(name, keywords)[form]
            mine, _ = mutad.pullback(f, *args)
            expected = f(*args)
            assert mine.dtype == expected.dtype and mine.shape == expected.shape
            worst = max(worst, _relative_difference(mine, expected))
    assert worst <= tolerance


@pytest.mark.parametrize("row", METRICS, ids=_id)
@pytest.mark.parametrize("form", ["pdist", "cdist"])
def test_gradients(row, form):
    name, keywords, _ = row
    f = _forms(name, keywords)[form]
    args = (X.copy(),) if form == "pdist" else (X.copy(), Y.copy())
    for policy in POLICIES:
        mutad.check_grads(f, *args, policy=policy)
    mutad.check_jvp(f, *args)
    assert np.array_equal(args[0], X)


@pytest.mark.parametrize("name", ["euclidean", "seuclidean", "correlation"])
def test_second_order(name):
    mutad.check_grads(lambda x: np.sum(np.sin(pdist(x, name))), X.copy(), order=2)


def test_differentiated_weights_and_variances():
    for f in (lambda x, w: pdist(x, "minkowski", p=3.0, w=w),
              lambda x, w: cdist(x, Y, "euclidean", w=w),
              lambda x, v: pdist(x, "seuclidean", V=v)):
        mutad.check_grads(f, X.copy(), W.copy())
        mutad.check_jvp(f, X.copy(), W.copy())


@pytest.mark.parametrize("name", ["euclidean", "seuclidean", "mahalanobis", "minkowski",
                                  "cityblock", "chebyshev"])
def test_zero_distances_have_a_gradient(name):
    # Identical points: the distance's kink, where the gradient takes the subgradient 0.
    x = np.vstack([X, X[:2]])
    keywords = {"p": 0.5} if name == "minkowski" else {}
    g = mutad.gradient(lambda x: np.sum(pdist(x, name, **keywords)), x)[0]
    assert np.all(np.isfinite(g))
    dy = np.zeros(len(pdist(x)))
    dy[distance.squareform(np.arange(1.0, len(dy) + 1))[0, 6].astype(int) - 1] = 1.0
    _, back = mutad.pullback(lambda x: pdist(x, name, **keywords), x)
    (g,) = back(dy)  # the gradient of the distance between X[0] and its copy alone
    assert np.array_equal(g, np.zeros_like(x))


def test_squareform():
    v = pdist(X)
    # (a matrix perturbed by finite differences is not symmetric: checks=False)
    for f, arg in ((squareform, v.copy()),
                   (lambda m: squareform(m, checks=False), distance.squareform(v)),
                   (lambda v: squareform(v, force="tomatrix"), v.copy()),
                   (lambda v: squareform(np.sqrt(v[:1])), v.copy())):
        y, _ = mutad.pullback(f, arg)
        assert y.tobytes() == f(arg).tobytes() and y.dtype == f(arg).dtype
        mutad.check_grads(f, arg)
        mutad.check_jvp(f, arg)
    with pytest.raises(ValueError, match="symmetric"):
        mutad.gradient(lambda m: np.sum(squareform(m)), np.triu(distance.squareform(v)))
    with pytest.raises(ValueError, match="binomial"):
        mutad.gradient(lambda v: np.sum(squareform(v[:4])), v.copy())


def test_a_function_of_two_rows_is_called_on_each_pair():
    def metric(u, v):
        return np.sum((u - v) ** 4)

    for f, args in ((lambda x: pdist(x, metric), (X.copy(),)),
                    (lambda x, y: cdist(x, y, metric), (X.copy(), Y.copy()))):
        y, _ = mutad.pullback(f, *args)
        assert np.array_equal(y, f(*args))
        mutad.check_grads(f, *args)
    # SciPy's own function of a metric is the metric by its name
    y, _ = mutad.pullback(lambda x: pdist(x, distance.cityblock), X.copy())
    assert np.array_equal(y, pdist(X, "cityblock"))


@pytest.mark.parametrize("call", [
    lambda x: pdist(x, "hamming"),
    lambda x: cdist(x, Y, "braycurtis"),
    lambda x: pdist(x, "cosine", w=W),
    lambda x: pdist(x, out=np.empty(15)),
    lambda x: pdist(x, "minkowski", p=-1.0),
], ids=["hamming", "braycurtis", "cosine-weights", "out", "minkowski-negative"])
def test_refused(call):
    x = X.copy()
    with pytest.raises(UnsupportedOperationError):
        mutad.gradient(lambda x: np.sum(call(x)), x)
    assert np.array_equal(x, X)


def test_scipys_errors():
    for f in (lambda x: pdist(x, "nonsense"), lambda x: pdist(x[0]),
              lambda x: cdist(x, Y[:, :2]),
              lambda x: pdist(x[:3], "mahalanobis")):
        with pytest.raises(ValueError):
            f(X)
        with pytest.raises(ValueError):
            mutad.gradient(lambda x: np.sum(f(x)), X.copy())


def test_mutad_scipy_names():
    y, _ = mutad.pullback(lambda x: spatial.squareform(spatial.pdist(x)), X.copy())
    assert y.tobytes() == squareform(pdist(X)).tobytes()


def test_replay():
    def f(x, y):
        return np.sum(squareform(pdist(x)) ** 2) + np.sum(cdist(x, y, "cityblock")) \
            + np.sum(pdist(x, "cosine"))

    replayed = mutad.grad(f, argnums=(0, 1), replay=True)
    for k in range(4):
        x, y = X * (k + 1), Y - k
        traced = mutad.gradient(f, x.copy(), y.copy())
        for ours, expected in zip(replayed(x.copy(), y.copy()), traced, strict=True):
            assert ours.tobytes() == expected.tobytes()
