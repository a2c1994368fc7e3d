"""scipy.spatial.distance's pdist, cdist and squareform of traced points (mutad/scipy/spatial.py):
values against SciPy's (bit for bit for the metrics SciPy accumulates in order, to a stated
tolerance for the others, over many random points), gradients by finite differences under both
policies and in forward mode, the caller's arrays, zero distances, refusals and replay."""

import numpy as np
import pytest
import scipy.spatial
import scipy.spatial.distance as distance
from scipy.spatial.distance import cdist, pdist, squareform
from scipy.spatial.transform import Rotation, Slerp

import mutad
from mutad.errors import UnsupportedOperationError
from mutad.scipy import spatial

POLICIES = ("restore", "checkpoint")
RNG = np.random.default_rng(3)
X = RNG.standard_normal((6, 3))
Y = RNG.standard_normal((4, 3))
W = RNG.uniform(0.5, 2.0, 3)

# (metric, keywords): SciPy's values bit for bit (those SciPy's C rounds otherwise than the
# composition of their derivative, SciPy's own values)
METRICS = [
    ("euclidean", {}),
    ("sqeuclidean", {}),
    ("cityblock", {}),
    ("chebyshev", {}),
    ("minkowski", {}),
    ("minkowski", {"p": 1}),
    ("minkowski", {"p": np.inf}),
    ("minkowski", {"p": 3.0}),
    ("minkowski", {"p": 1.5}),
    ("euclidean", {"w": W}),
    ("sqeuclidean", {"w": W}),
    ("cityblock", {"w": W}),
    ("chebyshev", {"w": W}),
    ("minkowski", {"p": 3.0, "w": W}),
    ("cosine", {}),
    ("correlation", {}),
    ("seuclidean", {}),
    ("seuclidean", {"V": W}),
    ("mahalanobis", {}),
    ("mahalanobis", {"VI": np.diag(W)}),
    ("braycurtis", {}),
    ("canberra", {}),
    ("e", {}),  # SciPy's aliases
    ("cos", {}),
]


def _id(row):
    name, keywords = row
    return name + "".join(f"-{k}" if np.ndim(v) else f"-{k}={v}" for k, v in keywords.items())


def _forms(name, keywords):
    return {"pdist": lambda x: pdist(x, name, **keywords),
            "cdist": lambda x, y: cdist(x, y, name, **keywords)}


@pytest.mark.parametrize("row", METRICS, ids=_id)
def test_values_are_scipys(row):
    name, keywords = row
    rng = np.random.default_rng(0)
    for _ in range(50):
        x = rng.standard_normal((9, 4 if "w" not in keywords and "V" not in keywords
                                 and "VI" not in keywords else 3)) * 10.0 ** rng.integers(-3, 3)
        y = rng.standard_normal((5, np.shape(x)[1]))
        for form, args in (("pdist", (x,)), ("cdist", (x, y))):
            f = _forms(name, keywords)[form]
            mine, _ = mutad.pullback(f, *args)
            expected = f(*args)
            assert mine.dtype == expected.dtype and mine.tobytes() == expected.tobytes()


@pytest.mark.parametrize("row", METRICS, ids=_id)
@pytest.mark.parametrize("form", ["pdist", "cdist"])
def test_gradients(row, form):
    name, keywords = row
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
    lambda x: cdist(x, Y, "braycurtis", w=W),
    lambda x: pdist(x, "cosine", w=W),
    lambda x: pdist(x, out=np.empty(15)),
    lambda x: pdist(x, "minkowski", p=-1.0),
], ids=["hamming", "braycurtis-weights", "cosine-weights", "out", "minkowski-negative"])
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


# ----------------------------------------------------------------------------------------------
# The distances between two points (euclidean(u, v), cosine, ...): SciPy's own steps, on the
# traced vectors its check of them (np.asarray) now gives back

TWO_POINTS = [
    (distance.euclidean, {}), (distance.euclidean, {"w": W}), (distance.sqeuclidean, {}),
    (distance.sqeuclidean, {"w": W}), (distance.cityblock, {"w": W}), (distance.chebyshev, {}),
    (distance.minkowski, {"p": 3.0}), (distance.minkowski, {"p": 1.5, "w": W}),
    (distance.cosine, {}), (distance.cosine, {"w": W}), (distance.correlation, {}),
    (distance.correlation, {"w": W, "centered": False}), (distance.braycurtis, {}),
    (distance.canberra, {"w": W}), (distance.seuclidean, {"V": W}),
    (distance.mahalanobis, {"VI": np.diag(W)}),
]


@pytest.mark.parametrize("metric, options", TWO_POINTS,
                         ids=lambda m: getattr(m, "__name__", "") or ",".join(m))
def test_distances_between_two_points(metric, options):
    """Regression: each converted its traced points (SciPy's _validate_vector, np.asarray)."""
    def f(x, y):
        return metric(x[0], y, **options) + 2.0 * metric(x[1], x[2], **options)

    x, y = np.abs(X), np.abs(Y[0])  # (braycurtis and canberra divide by sums of |u| and |v|)
    value, _ = mutad.value_and_grad(f)(x, y)
    assert np.asarray(value).tobytes() == np.asarray(f(x, y)).tobytes()  # SciPy's, bit for bit
    for policy in POLICIES:
        mutad.check_grads(f, x, y, policy=policy)
    replays_as_traced(f, [(x * s, y + s) for s in (1.0, 0.5, 1.5)], argnums=(0, 1))


def test_distances_between_two_points_of_lists_and_in_place_updates():
    def f(x):
        x *= 1.5
        return distance.euclidean([x[0, 0], x[0, 1]], [1.0, 2.0]) + distance.cosine(x[1], x[2])

    mutad.check_grads(f, X.copy())


def test_jensen_shannon_distance():
    p, q = np.abs(X[:, 0]) + 0.1, np.abs(Y[:, 0]) + 0.1

    def f(p, q):
        return distance.jensenshannon(p[:4], q) + distance.jensenshannon(p[:4], q, base=2.0)

    value, _ = mutad.value_and_grad(f)(p, q)
    assert np.asarray(value).tobytes() == np.asarray(f(p, q)).tobytes()
    mutad.check_grads(f, p, q)
    two = np.abs(X[:4, :2]) + 0.1
    mutad.check_grads(lambda a: np.sum(distance.jensenshannon(a, two[::-1], axis=1)), two.copy())


def test_a_global_viewing_a_written_argument_given_to_a_distance_is_refused():
    point = X[0].copy()
    alias = point  # a global of the function, the argument's memory

    def f(y):
        y *= 2.0
        return distance.euclidean(alias, Y[0] + y)

    with pytest.raises(mutad.errors.ConstantModifiedError):
        mutad.gradient(f, point)
    assert point.tobytes() == X[0].tobytes()


# ----------------------------------------------------------------------------------------------
# k-d trees of traced points, and SciPy's tree queried at traced points

from scipy.spatial import KDTree, cKDTree  # noqa: E402

from cases import replays_as_traced  # noqa: E402

TREE_POINTS = np.random.default_rng(5).uniform(size=(14, 2))
TREE_QUERIES = np.random.default_rng(6).uniform(size=(5, 2))


def _knn_loss(cls, k, **options):
    def f(pos, x):
        tree = cls(pos, **({"boxsize": 1.0} if options.get("periodic") else {}))
        d, i = tree.query(x, k=k, p=options.get("p", 2),
                          distance_upper_bound=options.get("bound", np.inf))
        d = np.where(np.isinf(d), 0.5, d)  # missing neighbours
        return np.sum(np.sin(d) * np.arange(1.0, 1.0 + np.size(d)).reshape(np.shape(d))) \
            + 0.1 * np.sum(pos[np.minimum(i, len(pos) - 1)] ** 2)
    return f


@pytest.mark.parametrize("cls", [KDTree, cKDTree], ids=["KDTree", "cKDTree"])
@pytest.mark.parametrize("k, options", [
    (1, {}), (3, {}), ([1, 3], {}), (4, {"p": 1}), (3, {"p": np.inf}), (2, {"p": 3.0}),
    (6, {"bound": 0.3}), (3, {"periodic": True})],
    ids=["k1", "k3", "k-list", "p1", "p-inf", "p3", "missing", "periodic"])
def test_kdtree_query_of_traced_points(cls, k, options):
    """tree.query of a tree of traced points at traced queries: SciPy's distances bit for bit
    (and its indices), derivatives of the Minkowski distance in both modes and policies."""
    f = _knn_loss(cls, k, **options)
    pos, x = TREE_POINTS.copy(), TREE_QUERIES.copy()
    expected = cls(pos, **({"boxsize": 1.0} if options.get("periodic") else {})).query(
        x, k=k, p=options.get("p", 2), distance_upper_bound=options.get("bound", np.inf))

    def values(pos, x):
        tree = cls(pos, **({"boxsize": 1.0} if options.get("periodic") else {}))
        return tree.query(x, k=k, p=options.get("p", 2),
                          distance_upper_bound=options.get("bound", np.inf))

    (d, i), _ = mutad.jvp(values, (pos, x), (np.ones_like(pos), np.ones_like(x)))
    assert np.asarray(d).tobytes() == expected[0].tobytes()
    assert np.asarray(i).tobytes() == expected[1].tobytes()
    y, _ = mutad.pullback(values, pos, x)
    assert np.asarray(y[0]).tobytes() == expected[0].tobytes()
    assert mutad.value_and_grad(f, argnums=(0, 1))(pos, x)[0] == f(pos, x)
    for policy in POLICIES:
        mutad.check_grads(f, pos, x, policy=policy)
    mutad.check_jvp(f, pos, x)


def test_kdtree_query_derivative_is_the_unit_difference():
    """p = 2: d(distance)/dx = (x - y) / d; a query on a data point (d = 0) takes 0."""
    pos = np.array([[0.0, 0.0], [3.0, 4.0], [10.0, 10.0]])
    x = np.array([[0.0, 0.0], [3.0, 5.0]])
    (gx,) = mutad.gradient(lambda x: np.sum(KDTree(pos).query(x)[0]), x)
    assert np.array_equal(gx, [[0.0, 0.0], [0.0, 1.0]])
    (gp,) = mutad.gradient(lambda p: np.sum(cKDTree(p).query(x[1:], k=2)[0]), pos)
    assert np.allclose(gp, [[-3 / 34 ** 0.5, -5 / 34 ** 0.5], [0.0, -1.0], [0.0, 0.0]])


def test_a_ckdtree_of_constant_points_built_inside_takes_traced_queries():
    """Regression: SciPy's cKDTree (compiled methods) of constant points, built inside the
    function, converted the traced queries."""
    def f(x):
        tree = scipy.spatial.cKDTree(TREE_POINTS)
        assert isinstance(tree, scipy.spatial.cKDTree)
        d, i = tree.query(x, k=2)
        return np.sum(d ** 2) + np.sum(tree.query(x[0])[0])

    x = TREE_QUERIES.copy()
    value, _ = mutad.value_and_grad(f)(x)
    assert value == f(x)
    mutad.check_grads(f, x)
    replays_as_traced(f, [(TREE_QUERIES * s,) for s in (1.0, 0.7, 1.3)])


def test_kdtree_of_constant_points_at_traced_queries():
    tree = KDTree(TREE_POINTS)

    def f(x):
        d, i = tree.query(x, k=2, p=1)
        return np.sum(d ** 2) + len(tree.query_ball_point(x[0], 0.3)) \
            + np.sum(tree.query_ball_point(x, 0.3, return_length=True))

    x = TREE_QUERIES.copy()
    assert mutad.value_and_grad(f)(x)[0] == f(x)
    mutad.check_grads(f, x)
    mutad.check_jvp(f, x)
    replays_as_traced(f, [(TREE_QUERIES * s,) for s in (1.0, 0.7, 1.3, 0.7)])


CKDTREE_BEFORE = cKDTree(TREE_POINTS)


class _Neighbours:
    def __init__(self):
        self.tree = cKDTree(TREE_POINTS)


NEIGHBOURS_BEFORE = _Neighbours()


def test_a_ckdtree_built_before_the_differentiation_takes_traced_queries():
    """A cKDTree built before the differentiation (a module's, a closure's, an object's
    attribute) converted the traced queries in its compiled methods (ConversionError): it
    is swapped, where the function reaches it, for one whose queries are KDTree's routed
    ones, asking the same tree."""
    closure_tree = cKDTree(TREE_POINTS)
    query = closure_tree.query

    def f(x, y):
        assert isinstance(CKDTREE_BEFORE, cKDTree)
        d, i = CKDTREE_BEFORE.query(x, k=2)
        d2, _ = query(y, k=1, p=1)
        near = NEIGHBOURS_BEFORE.tree.query_ball_point(x[0], 0.4)
        pairs = closure_tree.sparse_distance_matrix(KDTree(y), 0.5, output_type="coo_matrix")
        counts = closure_tree.query_ball_point(y, 0.3, return_length=True)
        plain, _ = CKDTREE_BEFORE.query(TREE_POINTS[:2])  # of plain values: SciPy's own
        return (np.sum(d ** 2) + np.sum(np.sin(d2)) + len(near) + np.sum(pairs.data ** 2)
                + np.sum(counts) + np.sum(plain) + 0.1 * np.sum(TREE_POINTS[i] * x[:, None]))

    x, y = TREE_QUERIES.copy(), TREE_QUERIES[::-1] * 0.9
    before = (x.tobytes(), y.tobytes())
    assert mutad.value_and_grad(f, argnums=(0, 1))(x, y)[0] == f(x, y)
    mutad.check_grads(f, x, y)
    mutad.check_jvp(f, x, y)
    assert (x.tobytes(), y.tobytes()) == before
    replays_as_traced(f, [(x * s, y) for s in (1.0, 0.7, 1.3)], argnums=(0, 1))
    assert type(CKDTREE_BEFORE) is cKDTree and type(NEIGHBOURS_BEFORE.tree) is cKDTree


def test_kdtree_neighbour_lists_of_traced_points():
    """query_ball_point and query_pairs of traced points: SciPy's lists, sets and arrays."""
    def lists(pos):
        tree = cKDTree(pos)
        return (tree.query_ball_point(pos[0], 0.4), tree.query_ball_point(pos[:3], 0.4),
                tree.query_ball_point(pos[:3], [0.2, 0.3, 0.4], return_length=True),
                tree.query_pairs(0.3), tree.query_pairs(0.3, p=1, output_type="ndarray"))

    expected = lists(TREE_POINTS)
    got, _ = mutad.pullback(lists, TREE_POINTS.copy())
    assert got[0] == expected[0] and got[3] == expected[3]
    assert all(a == b for a, b in zip(got[1], expected[1], strict=True))
    assert got[1].shape == expected[1].shape
    assert np.array_equal(np.asarray(got[2]), expected[2])
    assert np.asarray(got[4]).tobytes() == expected[4].tobytes()

    def energy(pos):  # a pair potential over SciPy's neighbour list
        pairs = KDTree(pos).query_pairs(0.35, output_type="ndarray")
        r = np.linalg.norm(pos[pairs[:, 0]] - pos[pairs[:, 1]], axis=1)
        return np.sum((0.35 - r) ** 2)

    mutad.check_grads(energy, TREE_POINTS.copy())
    mutad.check_jvp(energy, TREE_POINTS.copy())


def test_kdtree_replay_asks_the_tree_again():
    """A replay recomputes the neighbours of the replayed points, never the recorded ones: the
    inputs change the neighbours between calls."""
    f = _knn_loss(cKDTree, 3)
    rng = np.random.default_rng(7)
    calls = [(rng.uniform(size=(14, 2)), rng.uniform(size=(5, 2))) for _ in range(4)]
    replaying = replays_as_traced(f, calls, argnums=(0, 1))
    assert not replaying.reasons  # replayed, the tree asked again at each call
    indices = [cKDTree(p).query(x, k=3)[1] for p, x in calls]
    assert not all(np.array_equal(indices[0], i) for i in indices[1:])

    def energy(pos):
        pairs = KDTree(pos).query_pairs(0.35, output_type="ndarray")
        return np.sum((pos[pairs[:, 0]] - pos[pairs[:, 1]]) ** 2)

    replays_as_traced(energy, [(rng.uniform(size=(14, 2)),) for _ in range(6)])


def test_kdtree_refusals():
    pos = TREE_POINTS.copy()
    for f in (lambda p: cKDTree(p).sparse_distance_matrix(cKDTree(p), 0.3),
              lambda p: cKDTree(p).sparse_distance_matrix(cKDTree(p), 0.3, output_type="ndarray"),
              lambda p: cKDTree(p).count_neighbors(cKDTree(p), 0.3),
              lambda p: cKDTree(p).query_ball_tree(cKDTree(p), 0.3),
              lambda p: cKDTree(p).maxes,
              lambda p: cKDTree(p).query(p, k=1, p=p[0, 0])):
        with pytest.raises(mutad.MutadError):
            mutad.gradient(lambda p: np.sum(f(p)), pos)
    constant = cKDTree(pos)  # (swapped where reached, as its queries are followed)
    with pytest.raises(mutad.MutadError):
        mutad.gradient(lambda x: np.sum(constant.count_neighbors(KDTree(x), 0.3)),
                       TREE_QUERIES.copy())
    tree_type = []
    mutad.gradient(lambda p: tree_type.append(
        (isinstance(KDTree(p), KDTree), isinstance(cKDTree(p), KDTree), KDTree(p).n))
        or np.sum(p), pos)
    assert tree_type == [(True, False, 14)]


def test_a_constant_trees_sparse_distance_matrix_with_a_tree_of_traced_points():
    # The constant tree's method takes its rule when given a tree of traced points (a
    # refusal before, by way of the tree's refused .value, which no longer tells traced arrays)
    def f(p):
        distances = KDTree(TREE_POINTS).sparse_distance_matrix(KDTree(p), 0.3,
                                                               output_type="coo_matrix")
        return np.sum(distances.toarray() ** 2)

    pos = TREE_POINTS.copy()
    value, _ = mutad.value_and_grad(f)(pos)
    assert np.asarray(value).tobytes() == np.asarray(f(pos.copy())).tobytes()
    mutad.check_grads(f, pos)


@pytest.mark.parametrize("output_type", ["coo_matrix", "dict"])
@pytest.mark.parametrize("other", ["traced", "constant"])
def test_kdtree_sparse_distance_matrix(output_type, other):
    """sparse_distance_matrix of a tree of traced points with a tree of traced or constant
    points: SciPy's pairs and distances bit for bit, differentiated in both trees' points."""
    constant = KDTree(TREE_QUERIES)

    def matrix(pos, q):
        return cKDTree(pos).sparse_distance_matrix(KDTree(q) if other == "traced" else constant,
                                                   0.4, output_type=output_type)

    def dense(pos, q):
        found = matrix(pos, q)
        if output_type == "dict":
            return sum(np.sin(v) * (i + 2 * j + 1) for (i, j), v in found.items())
        return np.sum(np.sin(found.toarray()) * np.arange(1.0, 6.0))

    expected = matrix(TREE_POINTS, TREE_QUERIES)
    got, _ = mutad.pullback(matrix, TREE_POINTS.copy(), TREE_QUERIES.copy())
    if output_type == "dict":
        assert list(got) == list(expected)
        assert [np.asarray(v).tobytes() for v in got.values()] == [
            np.float64(v).tobytes() for v in expected.values()]
    else:
        assert np.asarray(got.toarray()).tobytes() == expected.toarray().tobytes()
    for policy in POLICIES:
        mutad.check_grads(dense, TREE_POINTS, TREE_QUERIES, policy=policy)
    mutad.check_jvp(dense, TREE_POINTS, TREE_QUERIES)
    replays_as_traced(dense, [(TREE_POINTS * s, TREE_QUERIES) for s in (1.0, 0.8, 1.2)],
                      argnums=(0, 1))


def test_kdtree_second_order_and_traced_bound():
    f = lambda pos, x: np.sum(np.sin(KDTree(pos).query(x, k=2)[0]))  # noqa: E731
    mutad.check_grads(f, TREE_POINTS, TREE_QUERIES, order=2)

    def bounded(pos, bound):  # the bound decides which neighbours are missing: no derivative
        d, _ = cKDTree(pos).query(TREE_QUERIES, k=4, distance_upper_bound=bound)
        return np.sum(np.where(np.isinf(d), 0.0, d) ** 2)

    bound = np.array(0.3)
    value, (_, g_bound) = mutad.value_and_grad(bounded, argnums=(0, 1))(TREE_POINTS, bound)
    assert value == bounded(TREE_POINTS, 0.3) and g_bound == 0.0


# scipy.spatial.transform.Rotation of traced values: SciPy's values bit for bit, the derivatives
# of SciPy's Array API backend's steps

ROTVEC = np.array([0.3, -0.2, 0.5])
ROTVECS = np.array([[0.3, -0.2, 0.5], [1.0, 0.4, -0.7]])
VECTORS = np.array([[1.0, 2.0, 3.0], [-1.0, 0.5, 0.2]])
ROTATIONS = {
    "from_rotvec as_matrix": (lambda v: Rotation.from_rotvec(v).as_matrix(), ROTVEC),
    "degrees": (lambda v: Rotation.from_rotvec(v, True).as_matrix(), 30 * ROTVEC),
    "apply": (lambda v: Rotation.from_rotvec(v).apply(VECTORS), ROTVEC),
    "apply inverse to one vector": (
        lambda v: Rotation.from_rotvec(v).apply(VECTORS[0], inverse=True), ROTVEC),
    "a stack applied": (lambda v: Rotation.from_rotvec(v).apply(VECTORS), ROTVECS),
    "a constant rotation applied to traced vectors": (
        lambda p: Rotation.from_rotvec(ROTVEC).apply(p), VECTORS),
    "inv and composition": (
        lambda v: (Rotation.from_rotvec(v[0]) * Rotation.from_rotvec(v[1]).inv()).as_quat(),
        ROTVECS),
    "magnitude": (lambda v: Rotation.from_rotvec(v).magnitude(), ROTVECS),
    "from_euler intrinsic": (lambda a: Rotation.from_euler("ZYX", a).as_rotvec(), ROTVEC),
    "from_euler extrinsic degrees": (
        lambda a: Rotation.from_euler("xz", a, degrees=True).as_matrix(), 40 * ROTVECS[:, :2]),
    "from_quat": (lambda q: Rotation.from_quat(q).as_matrix(), np.array([0.1, 0.2, 0.3, 0.9])),
    "Rotation(quat) scalar first": (
        lambda q: Rotation(q, scalar_first=True).apply(VECTORS), np.array([0.9, 0.1, 0.2, 0.3])),
    "from_matrix as_mrp": (
        lambda v: Rotation.from_matrix(Rotation.from_rotvec(v).as_matrix()).as_mrp(), ROTVEC),
    "from_mrp": (lambda m: Rotation.from_mrp(m).as_rotvec(), 0.5 * ROTVEC),
    "as_euler extrinsic": (lambda v: Rotation.from_rotvec(v).as_euler("xyz"), ROTVECS),
    "as_euler intrinsic degrees": (
        lambda v: Rotation.from_rotvec(v).as_euler("ZYX", degrees=True), ROTVECS),
    "as_euler symmetric": (lambda v: Rotation.from_rotvec(v).as_euler("zxz"), ROTVECS),
    "as_euler intrinsic symmetric": (lambda v: Rotation.from_rotvec(v).as_euler("YXY"), ROTVEC),
    "from_matrix of a matrix that is not orthogonal": (
        lambda m: Rotation.from_matrix(m).as_quat(),
        np.array([[0.9, -0.3, 0.1], [0.35, 1.1, 0.2], [-0.1, 0.15, 0.95]])),
    "indexed": (lambda v: Rotation.from_rotvec(v)[1].apply(VECTORS), ROTVECS),
    "approx_equal": (lambda v: Rotation.from_rotvec(v).as_rotvec() * Rotation.from_rotvec(
        v).approx_equal(Rotation.from_rotvec(ROTVECS[0]), atol=0.01)[:, None], ROTVECS),
}


@pytest.mark.parametrize("name", ROTATIONS)
def test_rotations_of_traced_values(name):
    """Rotation.from_rotvec(v).as_matrix(), .apply(x), ... of traced values (a stop: SciPy's
    code converted them): SciPy's values bit for bit, gradients by finite differences in both
    modes, the caller's arrays unchanged, replayed on other values as traced."""
    f, x = ROTATIONS[name]
    value, _ = mutad.value_and_gradient(lambda x: np.sum(f(x)), x.copy())
    assert value == np.sum(f(x))
    y, _ = mutad.jvp(f, (x.copy(),), (np.ones_like(x),))
    assert np.asarray(y).tobytes() == np.asarray(f(x)).tobytes()
    for policy in POLICIES:
        mutad.check_grads(f, x.copy(), policy=policy, modes=("rev", "fwd"))
    replays_as_traced(lambda x: np.sum(f(x) * np.cos(f(x))), [(x,), (0.7 * x,), (x + 0.1,)])


def test_rotation_second_order():
    mutad.check_grads(lambda v: Rotation.from_rotvec(v).apply(VECTORS), ROTVEC.copy(), order=2)


def test_rotation_refusals():
    """What mutad does not follow is named (mean, whose eigenvector is a choice of sign)."""
    with pytest.raises(UnsupportedOperationError, match="not mean"):
        mutad.gradient(lambda v: np.sum(Rotation.from_rotvec(v).mean().as_quat()), ROTVECS.copy())
    # constant rotations stay SciPy's
    assert mutad.gradient(lambda s: s * np.sum(Rotation.from_rotvec(ROTVEC).as_euler("xyz")),
                          2.0) == (np.sum(Rotation.from_rotvec(ROTVEC).as_euler("xyz")),)


# scipy.spatial.ConvexHull of traced points: SciPy's facets, the volume and area differentiated


@pytest.mark.parametrize("dimension", [2, 3, 4])
@pytest.mark.parametrize("measure", ["volume", "area", "equations"])
def test_convex_hull_volume_and_area(dimension, measure):
    """ConvexHull(points).volume, .area and .equations of traced points (a stop: SciPy's code
    converted them): SciPy's values bit for bit, the derivatives of the same sums (normals)
    over SciPy's facets (0 for the points inside), both modes, both policies; the caller's
    points unchanged."""
    rng = np.random.default_rng(dimension)
    shell = rng.standard_normal((2 * dimension + 2, dimension))  # few facets, far from flat
    shell *= (1.0 + 0.2 * rng.random((len(shell), 1))) / np.linalg.norm(shell, axis=1)[:, None]
    points = np.concatenate([shell, 0.1 * rng.standard_normal((4, dimension))])
    n = len(points)

    def f(p):
        return getattr(scipy.spatial.ConvexHull(p), measure)

    value, (gradient,) = mutad.value_and_gradient(lambda p: np.sum(f(p)), points.copy())
    assert value == np.sum(f(points))
    y, _ = mutad.jvp(f, (points.copy(),), (np.ones_like(points),))
    assert np.asarray(y).tobytes() == np.asarray(f(points)).tobytes()
    inside = np.setdiff1d(np.arange(n), scipy.spatial.ConvexHull(points).vertices)
    assert inside.size and not gradient[inside].any()
    for policy in POLICIES:
        mutad.check_grads(f, points.copy(), policy=policy, modes=("rev", "fwd"))


def test_convex_hull_replay_asks_qhull_again():
    """A replay takes the facets of the replayed points: the calls' hulls differ."""
    rng = np.random.default_rng(5)
    calls = [(rng.random((10, 2)),) for _ in range(4)]

    def f(p):
        hull = scipy.spatial.ConvexHull(p)
        return hull.volume * hull.area + np.sum(p[hull.vertices] ** 2)

    replays_as_traced(f, calls)
    assert len({scipy.spatial.ConvexHull(p).vertices.size for (p,) in calls}) > 1


def test_convex_hull_of_traced_points_is_scipys_in_what_it_gives():
    points = np.random.default_rng(1).random((9, 3))

    def f(p):
        hull = scipy.spatial.ConvexHull(p)
        expected = scipy.spatial.ConvexHull(points)
        assert isinstance(hull, scipy.spatial.ConvexHull)
        for name in ("simplices", "vertices", "neighbors", "coplanar"):
            assert np.array_equal(getattr(hull, name), getattr(expected, name))
        assert hull.good is expected.good is None  # (without qhull_options="QG...")
        assert (hull.npoints, hull.ndim, hull.nsimplex) == (9, 3, expected.nsimplex)
        return hull.volume

    mutad.gradient(f, points.copy())
    for g, match in ((lambda p: scipy.spatial.ConvexHull(p).points_of_facets, "follows"),
                     (lambda p: scipy.spatial.ConvexHull(p, incremental=True), "incremental")):
        with pytest.raises(UnsupportedOperationError, match=match):
            mutad.gradient(lambda p: np.sum(g(p)), points.copy())


# ----------------------------------------------------------------------------------------------
# scipy.spatial.Delaunay of traced points: SciPy's simplices, the transforms differentiated


def barycentric_loss(p, queries):
    """Barycentric coordinates of ``queries`` in their simplices, and the triangles' areas
    (a mesh's), from a triangulation of the points ``p``."""
    triangulation = scipy.spatial.Delaunay(p)
    found = triangulation.find_simplex(queries)
    transform = triangulation.transform[found]
    coordinates = np.einsum("kij,kj->ki", transform[:, :2], queries - transform[:, 2])
    corners = p[triangulation.simplices]
    edges = corners[:, 1:] - corners[:, :1]
    areas = 0.5 * np.abs(edges[:, 0, 0] * edges[:, 1, 1] - edges[:, 0, 1] * edges[:, 1, 0])
    return np.sum(coordinates ** 2) + np.sum(areas ** 2) + np.sum(p[triangulation.convex_hull])


def test_delaunay_of_traced_points():
    """Delaunay(points) of traced points (a stop: SciPy's code converted them): SciPy's
    triangulation of the plain points, its transforms SciPy's bit for bit with the derivatives
    of the same inverses, both modes and policies, replayed (the triangulation asked again of
    each call's points); the caller's points unchanged."""
    rng = np.random.default_rng(3)
    points, queries = rng.standard_normal((12, 2)), 0.5 * rng.standard_normal((5, 2))
    before = points.tobytes()

    def f(p):
        return barycentric_loss(p, queries)

    def given(p):
        triangulation = scipy.spatial.Delaunay(p)
        expected = scipy.spatial.Delaunay(points)
        assert isinstance(triangulation, scipy.spatial.Delaunay)
        assert np.asarray(mutad.stop_gradient(triangulation.transform)).tobytes() == \
            expected.transform.tobytes()
        for name in ("simplices", "neighbors", "coplanar", "convex_hull", "vertex_to_simplex"):
            assert np.array_equal(getattr(triangulation, name), getattr(expected, name))
        for mine, scipys in zip(triangulation.vertex_neighbor_vertices,
                                expected.vertex_neighbor_vertices, strict=True):
            assert np.array_equal(mine, scipys)
        assert np.array_equal(triangulation.find_simplex(queries),
                              expected.find_simplex(queries))
        return np.sum(triangulation.transform)

    mutad.gradient(given, points.copy())
    value, _ = mutad.value_and_gradient(f, points.copy())
    assert value == f(points.copy())
    for policy in POLICIES:
        mutad.check_grads(f, points.copy(), policy=policy, modes=("rev", "fwd"))
    replays_as_traced(f, [(points + 0.05 * i * rng.standard_normal(points.shape),)
                          for i in range(4)])
    assert points.tobytes() == before
    for g, match in ((lambda p: scipy.spatial.Delaunay(p).equations, "equations"),
                     (lambda p: scipy.spatial.Delaunay(p, incremental=True), "incremental")):
        with pytest.raises(UnsupportedOperationError, match=match):
            mutad.gradient(lambda p: np.sum(g(p)), points.copy())


@pytest.mark.parametrize("seq", ["xyz", "ZYX", "zxz", "YXY"])
@pytest.mark.filterwarnings("ignore:invalid value:RuntimeWarning")  # (0 / 0 in a partial)
def test_as_euler_at_gimbal_lock_is_scipys(seq):
    """At gimbal lock SciPy sets the third angle to 0 (and warns): the same values, bit for
    bit (the angles have no derivative there: a kink of the second, a jump of the others)."""
    middle = np.pi / 2 if seq.lower()[0] != seq.lower()[2] else 0.0
    a = np.array([0.3, middle, 0.2])

    def f(a):
        return Rotation.from_euler(seq, a).as_euler(seq)

    with pytest.warns(UserWarning, match="Gimbal lock"):
        expected = f(a)
    with pytest.warns(UserWarning, match="Gimbal lock"):
        y, _ = mutad.jvp(f, (a,), (np.ones(3),))
    assert np.asarray(y).tobytes() == expected.tobytes()


# ----------------------------------------------------------------------------------------------
# SciPy's own code on traced points: procrustes and geometric_slerp (they stopped with a
# ConversionError at SciPy's np.array of the points)

from cases import followed_as_scipy  # noqa: E402

_SHAPE = np.cos(np.arange(14.0)).reshape(7, 2) + np.arange(14.0).reshape(7, 2) % 3


@pytest.mark.parametrize("name, f, x", [
    ("procrustes disparity", lambda p: scipy.spatial.procrustes(_SHAPE, p.reshape(7, 2))[2],
     _SHAPE.ravel() * 1.1 + 0.05 * np.sin(np.arange(14.0))),
    ("procrustes standardised", lambda p: np.sum(
        scipy.spatial.procrustes(p.reshape(7, 2), _SHAPE)[1] ** 3)
     + np.sum(scipy.spatial.procrustes(p.reshape(7, 2), _SHAPE)[0][:, 0] ** 2),
     _SHAPE.ravel() * 1.1 + 0.05 * np.sin(np.arange(14.0))),
    ("geometric_slerp t", lambda t: np.sum(scipy.spatial.geometric_slerp(
        np.array([1.0, 0.0]), np.array([0.0, 1.0]), t) * np.array([1.0, 2.0])), np.array(0.3)),
    ("geometric_slerp ends", lambda v: np.sum(scipy.spatial.geometric_slerp(
        v[:3] / np.linalg.norm(v[:3]), v[3:] / np.linalg.norm(v[3:]),
        np.linspace(0.0, 1.0, 4)) ** 3), np.array([1.0, 0.1, 0.2, 0.1, 1.0, 0.3]))])
def test_scipys_own_code_on_traced_points(name, f, x):
    followed_as_scipy(f, x, x * 1.07)


@pytest.mark.parametrize("side", ["u", "v", "both, the pair's indices read"])
def test_directed_hausdorff_is_the_distance_of_scipys_pair(side):
    """SciPy's distance, differentiated as the distance between the pair of points it found (it
    stopped with a ConversionError at SciPy's asarray); a replay at other points asks SciPy
    for their pair again."""
    other = np.sin(np.arange(8.0)).reshape(4, 2)

    def f(p):
        points = p.reshape(7, 2)
        if side == "u":
            return distance.directed_hausdorff(points, other)[0]
        if side == "v":
            return distance.directed_hausdorff(other, points, seed=1)[0] ** 2
        d, i, j = distance.directed_hausdorff(points, points[::-1] * 0.8 + 0.1)
        return d + points[i, 0] * points[j, 1]

    x = np.cos(np.arange(14.0) ** 1.3)
    followed_as_scipy(f, x, np.cos(np.arange(14.0) ** 1.1))


def test_directed_hausdorff_of_float32_points_is_scipys_double():
    """SciPy measures float32 points as doubles and gives a Python float: its bits, in both
    modes (the distance of the pair computed in float32 gave its rounding in reverse mode)."""
    other = np.sin(np.arange(8.0)).reshape(4, 2).astype(np.float32)

    def f(p):
        return distance.directed_hausdorff(p.reshape(4, 2).astype(np.float32), other)[0]

    x = np.cos(np.arange(8.0) ** 1.3)
    expected = np.float64(f(x))
    value, _ = mutad.value_and_gradient(f, x)
    assert np.asarray(value).tobytes() == expected.tobytes()
    value, _ = mutad.jvp(f, (x,), (np.ones(8),))
    assert np.asarray(value).tobytes() == expected.tobytes()
    (grad,) = mutad.gradient(f, x)  # (the pair's distance, in doubles of the rounded points)
    pair = x.reshape(4, 2).astype(np.float32)[3].astype(np.float64) - other[3]  # (SciPy's)
    np.testing.assert_allclose(grad, [0.0] * 6 + list(pair / np.linalg.norm(pair)), rtol=1e-6)


ROTATION_BEFORE = Rotation.from_euler("xyz", [0.1, 0.2, 0.3])


def test_a_rotation_made_before_applied_then_inverted():
    """A Rotation made before the differentiation, applied to traced vectors, then inverted
    (or asked for its matrix, or composed with a traced one): the apply read its quaternions
    as a constant, which the differentiation keeps read-only, and SciPy's compiled inv then
    stopped (ConstantModifiedError: a read-only buffer)."""
    def f(v):
        w = ROTATION_BEFORE.apply(v)
        u = ROTATION_BEFORE.inv().apply(w * 2.0)
        turned = Rotation.from_rotvec(v[0] * 0.3) * ROTATION_BEFORE
        return (np.sum(w ** 2 * np.arange(3.0)) + np.sum(u * v)
                + np.sum(v @ ROTATION_BEFORE.as_matrix()) + np.sum(turned.apply(v[1:]) ** 2))

    v = np.random.default_rng(3).uniform(size=(4, 3))
    quat = ROTATION_BEFORE.as_quat()
    followed_as_scipy(f, v, v * 0.8)
    assert ROTATION_BEFORE.as_quat().tobytes() == quat.tobytes()


TRIANGULATION_BEFORE = scipy.spatial.Delaunay(TREE_POINTS)


def test_find_simplex_of_a_constant_triangulation_at_traced_points():
    """SciPy's triangulation of constant points (built before the differentiation or inside
    it) asked for the simplex of traced points converted them (ConversionError): its answer
    on the plain values is a decision, and the barycentric coordinates computed from it are
    differentiated; a replay asks again."""
    def f(q):
        inside = scipy.spatial.Delaunay(TREE_POINTS)
        found = TRIANGULATION_BEFORE.find_simplex(q)
        assert np.array_equal(found, inside.find_simplex(q))
        transform = TRIANGULATION_BEFORE.transform[found]
        barycentric = np.einsum("ijk,ik->ij", transform[:, :2], q - transform[:, 2])
        return np.sum(barycentric ** 2) + np.sum(found)

    q = TREE_QUERIES * 0.8 + 0.1
    followed_as_scipy(f, q, q * 0.6)


SLERP_BEFORE = Slerp([0.0, 1.0, 3.0], Rotation.from_euler(
    "xyz", [[0.0, 0.0, 0.0], [0.3, 0.9, -0.2], [1.0, 0.1, 0.4]]))


def test_slerp_at_traced_times():
    """Slerp of constant rotations at traced times converted them (ConversionError): SciPy's
    steps, the interval a decision a replay takes again, the rotation within it composed with
    from_rotvec of the traced fraction: SciPy's values bit for bit, differentiated."""
    def f(t):
        inside = Slerp([0.0, 3.0], Rotation.from_rotvec([[0.0, 0.0, 0.0], [0.2, -0.4, 0.9]]))
        return (np.sum(SLERP_BEFORE(t).as_quat() * np.arange(1.0, 5.0))
                + np.sum(SLERP_BEFORE(t[1]).as_rotvec()) + np.sum(inside(t[:2]).as_matrix()))

    t = np.array([0.2, 0.4, 1.7, 2.9])
    y, _ = mutad.jvp(lambda t: SLERP_BEFORE(t).as_quat(), (t,), (np.ones(4),))
    assert np.asarray(y).tobytes() == SLERP_BEFORE(t).as_quat().tobytes()
    followed_as_scipy(f, t, t[::-1] * 0.9)
