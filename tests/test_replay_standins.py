"""Replays of stand-ins that read the plain values of traced ones: each decision a stand-in
takes of a traced value must be one a replay takes again (a traced step, a guard), else the
replay keeps the recorded call's. Each replaying function's calls are compared with fresh
traced ones bit for bit, the caller's arrays too, and asserted replayed."""

import numpy as np
import pytest
import scipy.sparse
import scipy.sparse.csgraph
import scipy.stats

import mutad
from test_replay_budget import replays
from test_replay_hunt20 import _replayed_as_traced, _same

# ----------------------------------------------------------------------------------------------
# A.maximum(c) (A.minimum(c)) of a scipy.sparse matrix: whether the zeros SciPy does not store
# stay zeros was decided on c's plain value, outside any step: a replay recorded at c < 0 kept
# the sparse result at c > 0, where SciPy's is dense (and the other way round).

_ROWS, _COLS = np.array([0, 1, 2]), np.array([0, 2, 1])
_DATA = np.array([1.0, -2.0, 3.0])


@pytest.mark.filterwarnings("ignore::scipy.sparse.SparseEfficiencyWarning")  # (SciPy's: dense)
@pytest.mark.parametrize("name, form, argnums", [
    ("maximum", "csr", 0), ("maximum", "csr", (0, 1)), ("minimum", "csr", (0, 1)),
    ("maximum", "coo", 0)])
def test_sparse_extremum_zeros_by_the_calls_number(name, form, argnums):
    def f(data, c):
        A = scipy.sparse.coo_array((data, (_ROWS, _COLS)), shape=(3, 3)).asformat(form)
        return np.sum(getattr(A, name)(c[0]).toarray() ** 2) + c[0]

    # recorded where the zeros stay (c <= 0 for maximum, c >= 0 for minimum), replayed where
    # they do not, and back
    kept, filled = np.array([-0.5]), np.array([0.5])
    if name == "minimum":
        kept, filled = -kept, -filled
    calls = [(_DATA, kept), (_DATA, kept), (_DATA, filled), (_DATA, filled), (_DATA, kept)]
    _replayed_as_traced(f, calls, argnums, least=2)


# ----------------------------------------------------------------------------------------------
# np.histogramdd (np.histogram2d) of a sample the program computes without derivative (an
# integer sample, a stop_gradient's): the edges NumPy takes from its extremes were those of
# its plain values, outside any step, so a replay kept the recorded call's edges (and the
# densities they divide). They are computed of the traced sample, as a differentiated one's.

_SAMPLE = np.array([[0.1, 0.2], [0.5, 0.9], [0.3, 0.4], [0.8, 0.1]])
_WEIGHTS = np.array([1.0, 2.0, 3.0, 4.0])


@pytest.mark.parametrize("made", ["stopped", "integers"])
@pytest.mark.parametrize("argnums", [(0, 1), 1])
def test_histogramdd_edges_of_the_calls_sample(made, argnums):
    def f(x, w):
        s = mutad.stop_gradient(x) if made == "stopped" else (x * 4.0).astype(int)
        h, edges = np.histogramdd(s, bins=3, weights=w, density=True)
        return np.sum(h * np.arange(1.0, 10.0).reshape(3, 3)) + edges[0].sum() + edges[1][1]

    moved = _SAMPLE * 2.0 + 0.3
    calls = [(_SAMPLE, _WEIGHTS), (_SAMPLE, _WEIGHTS), (moved, _WEIGHTS), (moved, _WEIGHTS),
             (_SAMPLE, _WEIGHTS)]
    _replayed_as_traced(f, calls, argnums, least=2)


def test_histogramdd_integer_edges_are_numpys():
    def f(x):
        h, edges = np.histogramdd((x * 4.0).astype(int), bins=3)
        found.append([mutad.stop_gradient(e) for e in edges])
        return np.sum(h) + np.sum(x)

    for x in (_SAMPLE, _SAMPLE * 2.0 + 0.3):
        found = []
        mutad.gradient(f, x.copy())
        expected = np.histogramdd((x * 4.0).astype(int), bins=3)[1]
        assert all(type(a) is np.ndarray and a.dtype == b.dtype and a.tobytes() == b.tobytes()
                   for a, b in zip(found[0], expected, strict=True))



# ----------------------------------------------------------------------------------------------
# A.sqrt() of a scipy.sparse matrix made of a dense traced array: the entries SciPy leaves out
# for being zero took the plain stored values, outside any step, so a replay whose zeros
# moved kept the recorded call's values there (a root's place of the recording given its
# number, not 0).


@pytest.mark.parametrize("kind", ["csr_array", "csr_matrix"])
def test_sparse_sqrt_zeros_of_the_calls_values(kind):
    def f(x):
        roots = getattr(scipy.sparse, kind)(x).sqrt().toarray()
        return np.sum(roots * np.arange(1.0, 7.0).reshape(2, 3))

    full = np.array([[1.0, 4.0, 9.0], [0.0, 2.0, 3.0]])
    holed = np.array([[1.0, 0.0, 9.0], [0.0, 2.0, 3.0]])
    _replayed_as_traced(f, [(full,), (full,), (holed,), (holed,), (full,)], least=2)


# ----------------------------------------------------------------------------------------------
# scipy.sparse.csgraph's shortest paths of a traced graph with unweighted=True: SciPy's counts
# of edges, found on the plain weights outside any step, were returned as they are, so a
# replay kept the recorded call's where the graph's edges changed. Such calls are traced, with
# the reason (the weighted ones were already: their lengths are SciPy's plain values).


@pytest.mark.parametrize("name, sparse", [("dijkstra", False), ("shortest_path", True)])
def test_csgraph_unweighted_paths_are_traced(name, sparse):
    def f(g):
        graph = scipy.sparse.csr_array(g) if sparse else g
        d = getattr(scipy.sparse.csgraph, name)(graph, unweighted=True, directed=not sparse)
        return np.sum(np.where(np.isfinite(d), d, 0.0) * g)

    chain = np.array([[0.0, 1.0, 0.0], [0.0, 0.0, 2.0], [0.0, 0.0, 0.0]])
    shortcut = np.array([[0.0, 1.0, 5.0], [0.0, 0.0, 2.0], [0.0, 0.0, 0.0]])
    replaying = mutad.value_and_grad(f, replay=True)
    for g in (chain, chain, shortcut, shortcut):
        given = g.copy()
        got = replaying(given)
        assert given.tobytes() == g.tobytes()
        assert _same(got, mutad.value_and_grad(f)(g.copy()))
    assert replays(replaying) == 0
    assert any(f"csgraph.{name}" in reason for reason in replaying.reasons.values())


# ----------------------------------------------------------------------------------------------
# scipy.stats.vonmises_fisher: SciPy's checks of mu (a unit vector) and kappa (positive) were
# taken on the plain values, outside any step, so a replay recorded where they held gave a
# number where SciPy raises its error. They are decisions a replay takes again.


@pytest.mark.parametrize("argnums", [0, (0, 1)])
def test_vonmises_fisher_checks_of_the_calls_values(argnums):
    x = np.array([0.6, 0.8, 0.0])

    def f(mu, kappa):
        return scipy.stats.vonmises_fisher.logpdf(x, mu, kappa[0])

    unit, other = np.array([0.0, 1.0, 0.0]), np.array([0.6, 0.0, 0.8])
    kappa = np.array([2.0])
    _replayed_as_traced(f, [(unit, kappa), (unit, kappa), (other, kappa), (unit, kappa)],
                        argnums, least=2)
    replaying = mutad.value_and_grad(f, argnums=argnums, replay=True)
    replaying(unit, kappa)
    replaying(unit, kappa)
    assert replays(replaying) == 1
    with pytest.raises(ValueError, match="unit vector"):
        replaying(2.0 * unit, kappa)
    with pytest.raises(ValueError, match="kappa"):
        replaying(unit, np.array([0.0]))


# ----------------------------------------------------------------------------------------------
# scipy.stats.multivariate_normal.cdf (logcdf) of a covariance the function computes without
# derivative (a stop_gradient's): SciPy's integral was set up with its plain values, outside
# any step, so a replay kept the recorded call's covariance. Its values are now checked again
# by a replay (``settled``).


@pytest.mark.parametrize("name", ["cdf", "logcdf"])
def test_multivariate_normal_cdf_of_the_calls_covariance(name):
    def f(x, cov):
        return getattr(scipy.stats.multivariate_normal, name)(x, np.zeros(2),
                                                              mutad.stop_gradient(cov))

    x = np.array([0.3, -0.2])
    near, far = np.array([[1.0, 0.2], [0.2, 1.0]]), np.array([[2.0, 0.5], [0.5, 1.5]])
    _replayed_as_traced(f, [(x, near), (x, near), (x, far), (x, far)], (0, 1), least=2)
