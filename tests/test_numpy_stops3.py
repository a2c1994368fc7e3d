"""NumPy programs that stopped with an error, or issued NumPy's warnings at a line of mutad's,
where NumPy gives a value: each checked as ``test_scipy_stops.check`` does (NumPy's value bit
for bit, reverse mode, forward mode and a replay against central differences, the caller's
arrays unchanged)."""

import warnings

import numpy as np
import pytest

import mutad
from test_scipy_stops import check

X = np.array([0.3, -0.7, 1.1, 0.4])


# ----------------------------------------------------------------------------------------------
# warnings NumPy issues with a stacklevel naming its caller (a cast's ComplexWarning, np.nanmean's
# "Mean of empty slice"): at the user's line, as NumPy's own call issues them, where the call a
# rule or an assignment makes would name a line of mutad's

def _complex_assigned(x):
    y = np.empty_like(x)
    y[:] = x * (1 + 2j)
    return np.sum(y * x)


def _complex_copied_unsafely(x):
    y = np.empty_like(x)
    np.copyto(y, x * (1 - 3j), casting="unsafe")
    return np.sum(y ** 2)


def _nanmean_of_an_all_nan_row(x):
    a = np.stack([x, x * np.nan])
    return np.nansum(np.nanmean(a, axis=1) * 3.0)


def _nanmax_of_an_all_nan_row(x):
    a = np.stack([x, x * np.nan])
    return np.nansum(np.nanmax(a, axis=1) + np.nanmin(a, axis=1))


def _nanmedian_of_an_all_nan_row(x):
    a = np.stack([x, x * np.nan])
    return np.nansum(np.nanmedian(a, axis=1) * 2.0)


def _heard(run):
    with warnings.catch_warnings(record=True) as heard:
        warnings.simplefilter("always")
        run()
    return [(str(w.message), w.category, w.filename, w.lineno) for w in heard]


@pytest.mark.parametrize("f", [_complex_assigned, _complex_copied_unsafely,
                               _nanmean_of_an_all_nan_row, _nanmax_of_an_all_nan_row,
                               _nanmedian_of_an_all_nan_row])
def test_numpys_warnings_at_the_users_line(f):
    numpys = _heard(lambda: f(X.copy()))
    assert numpys and all(w[2] == __file__ for w in numpys)
    assert _heard(lambda: mutad.gradient(f, X)) == numpys
    assert _heard(lambda: mutad.jvp(f, (X,), (np.cos(X),))) == numpys
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        check(f, X)


def test_a_warning_at_the_users_line_is_issued_once_there():
    # the "default" action: once per location, as NumPy's own in a loop
    def f(x):
        total = 0.0
        for _ in range(3):
            total = total + _nanmean_of_an_all_nan_row(x)
        return total

    with warnings.catch_warnings(record=True) as heard:
        warnings.simplefilter("default")
        warnings.filterwarnings("ignore", module="numpy")
        globals().pop("__warningregistry__", None)  # (this module's locations heard before)
        mutad.gradient(f, X)
    assert [str(w.message) for w in heard] == ["Mean of empty slice"]


# ----------------------------------------------------------------------------------------------
# np.var and np.std given a constant mean=: NumPy centres on it (not on the elements' mean), and
# so does the derivative

_CENTRE = np.array([[0.5], [-0.25]])


def _variance_about_a_given_mean(x):
    a = np.stack([x, x ** 2])
    return np.sum(np.var(a, axis=1, mean=_CENTRE, keepdims=True) * [[1.0], [2.0]]) \
        + np.std(a, axis=1, ddof=1, mean=_CENTRE).sum()


def test_variance_about_a_given_mean():
    check(_variance_about_a_given_mean, X)


# ----------------------------------------------------------------------------------------------
# np.astype (NumPy's function, beside the method): a cast, its derivative the cast's

def _numpy_astype(x):
    y = np.astype(x, np.complex128)
    y *= 1 + 2j
    z = np.astype(np.abs(y), np.float64, copy=False)
    return np.sum(z ** 2) + np.astype(x, np.float32).astype(np.float64).sum() * 0.0


def test_numpy_astype():
    check(_numpy_astype, X)


# ----------------------------------------------------------------------------------------------
# np.linalg.eigh and eigvalsh of a real matrix that is not symmetric: LAPACK reads one triangle
# (UPLO's), the derivative of the call that of the symmetric matrix it stands for, 0 along the
# other triangle

def _not_symmetric(x):
    return np.outer(x, x[::-1]) + np.diag(x) * 3.0 + np.triu(np.ones((4, 4)), 1)


def _eigh_of_one_triangle(x):
    a = _not_symmetric(x)
    w, v = np.linalg.eigh(a, UPLO="U")
    wl, vl = np.linalg.eigh(a)
    return w @ [1.0, 2.0, 3.0, 4.0] + np.sum(v ** 2 * a) + np.sum(wl ** 2) + np.sum(vl ** 4)


def _eigvalsh_of_one_triangle(x):
    a = _not_symmetric(x)
    return np.linalg.eigvalsh(a, UPLO="U") @ [1.0, -2.0, 3.0, 0.5] \
        + np.sum(np.linalg.eigvalsh(a, "L") ** 3)


@pytest.mark.parametrize("f", [_eigh_of_one_triangle, _eigvalsh_of_one_triangle])
def test_eigh_of_a_matrix_not_symmetric(f):
    check(f, X, rtol=1e-5)


def test_eigh_reads_one_triangle_only():
    a = _not_symmetric(X)
    g, = mutad.gradient(lambda a: np.sum(np.linalg.eigvalsh(a, UPLO="U") ** 3), a)
    assert not np.tril(g, -1).any() and np.triu(g, 1).any()


# ----------------------------------------------------------------------------------------------
# np.linalg.qr of a wide matrix (mode='r', 'reduced', 'complete': the same factors), that of its
# leading square block, R's further columns Qᴴ Y

_B = np.random.default_rng(5).random((3, 4))


def _wide(x):
    return _B + np.outer(x[:3], x) * 0.5


def _qr_r_of_a_wide_matrix(x):
    r = np.linalg.qr(_wide(x), mode="r")
    return np.sum(r * _B) + np.sum(r ** 2)


def _qr_of_a_wide_matrix(x):
    q, r = np.linalg.qr(_wide(x))
    qc, rc = np.linalg.qr(_wide(x)[None] * [[[1.0]], [[2.0]]], mode="complete")
    return np.sum((q @ r[:, 1:]) ** 2) + np.sum(r * _B) + np.sum(rc * qc[..., :1] ** 2)


@pytest.mark.parametrize("f", [_qr_r_of_a_wide_matrix, _qr_of_a_wide_matrix])
def test_qr_of_a_wide_matrix(f):
    check(f, X, rtol=1e-5)


def test_complete_qr_of_a_tall_matrix_still_refused():
    with pytest.raises(mutad.MutadError, match="complete"):
        mutad.gradient(lambda x: np.sum(np.linalg.qr(_wide(x).T, mode="complete")[0]), X)


# ----------------------------------------------------------------------------------------------
# np.polyint with integration constants given as a list holding traced values (or one for all)

def _polyint_of_traced_constants(x):
    return np.sum(np.polyint(x, 2, k=[x[0], 1.0]) ** 2) + np.sum(np.polyint(x, 3, [x[1] * 2])) \
        + np.sum(np.polyint(x, 2, k=(0.5, x[3])) * x[0])


def test_polyint_of_traced_constants():
    check(_polyint_of_traced_constants, X)


# ----------------------------------------------------------------------------------------------
# np.ma: MaskedArray.T, transpose and anom of a masked array of differentiated values

_MASK = np.array([[0, 1, 0, 0], [0, 0, 0, 1], [1, 0, 0, 0]], bool)


def _masked_transposed_and_anomalies(x):
    m = np.ma.masked_array(np.outer(x[:3], x), mask=_MASK)
    total = (m.T * np.arange(12.0).reshape(4, 3)).sum() + m.transpose(1, 0)[1:].sum()
    total = total + (m.anom(axis=1) ** 2).sum() + (m.anom(0) ** 3).sum()
    return total + (np.ma.masked_array(x, mask=[0, 1, 0, 0]).anom() ** 2).filled(0.0).sum()


def test_masked_transposed_and_anomalies():
    check(_masked_transposed_and_anomalies, X)


# ----------------------------------------------------------------------------------------------
# np.polyfit with full=True (residuals, rank, singular values, rcond) and cov=True of traced y;
# its RankWarning at the user's line, as NumPy's

_T = np.array([0.0, 0.5, 1.0, 1.5])


def _polyfit_full(x):
    c, residuals, rank, s, rcond = np.polyfit(_T, x, 1, full=True)
    return np.sum(c ** 2) + 3.0 * residuals[0] + rank + np.sum(s) + rcond


def _polyfit_cov(x):
    c, v = np.polyfit(_T, x, 1, cov=True)
    _, u = np.polyfit(_T, np.stack([x, x ** 2], axis=1), 1, cov="unscaled")
    return np.sum(c * [1.0, 2.0]) + np.sum(v * [[1.0, 0.5], [0.5, 3.0]]) + np.sum(u)


@pytest.mark.parametrize("f", [_polyfit_full, _polyfit_cov])
def test_polyfit_full_and_cov(f):
    check(f, X)


def _polyfit_of_a_rank_short_matrix(x):
    return np.polyfit(np.ones(4), x, 2) @ [1.0, 2.0, 3.0]


def test_polyfit_rank_warning_at_the_users_line():
    numpys = _heard(lambda: _polyfit_of_a_rank_short_matrix(X.copy()))
    assert [w[0] for w in numpys] == ["Polyfit may be poorly conditioned"]
    assert _heard(lambda: mutad.gradient(_polyfit_of_a_rank_short_matrix, X)) == numpys
    assert _heard(lambda: mutad.jvp(_polyfit_of_a_rank_short_matrix, (X,), (X,))) == numpys


# ----------------------------------------------------------------------------------------------
# np.maximum.reduceat(..., out=) of a differentiated array: the result written into out

def _reduceat_into_out(x):
    a = np.outer(x, x[::-1]) + np.arange(16.0).reshape(4, 4) * 0.1
    o = np.zeros((4, 2))
    r = np.maximum.reduceat(a, [0, 2], axis=1, out=o)
    p = np.empty((2, 4))
    np.minimum.reduceat(a, [1, 3], out=(p,))
    return np.sum(o * [1.0, 2.0]) + np.sum(r ** 2) + np.sum(p * x)


def test_reduceat_into_out():
    check(_reduceat_into_out, X)
