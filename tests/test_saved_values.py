"""Values a differentiated function saves (np.save and its family) and reads back: the read
would give plain numbers without their derivative, so it is refused; other saves and loads run
as NumPy's."""

import io
import os
import pickle

import numpy as np
import pytest

import mutad


def _through(buffer, save, load):
    """Saves with ``save(buffer, x)`` into a new in-memory ``buffer`` and reads it back with
    ``load`` from the start."""

    def read_back(x, d):
        s = buffer()
        save(s, x)
        s.seek(0)
        return load(s)

    read_back.__name__ = f"{save.__name__}_{load.__name__}_{buffer.__name__}"
    return read_back


def _savez_a(s, x):
    np.savez(s, a=x)


def _load_a(s):
    return np.load(s)["a"]


def _savez_compressed_path(x, d):
    np.savez_compressed(os.path.join(d, "u"), x)  # writes u.npz
    return np.load(os.path.join(d, "u.npz"))["arr_0"]


def _save_path(x, d):
    np.save(os.path.join(d, "u"), x)  # writes u.npy
    return np.load(os.path.join(d, ".", "u.npy"))


def _savetxt_open_file(x, d):
    path = os.path.join(d, "u.txt")
    with open(path, "w") as fh:
        np.savetxt(fh, x)
    return np.loadtxt(path)


def _save_path_read_as_file(x, d):
    path = os.path.join(d, "u.npy")
    np.save(path, x)
    with open(path, "rb") as fh:
        return np.load(fh)


def _fromfile_after_save(x, d):
    path = os.path.join(d, "u.npy")
    np.save(path, x)
    return np.fromfile(path, offset=128)


def _getvalue_copy(x, d):
    s = io.StringIO()
    np.savetxt(s, x)
    return np.loadtxt(io.StringIO(s.getvalue()))


_savez_buffer = _through(io.BytesIO, _savez_a, _load_a)
def _savetxt_by_keywords(x, d):
    s = io.StringIO()
    np.savetxt(fname=s, X=x)
    return np.loadtxt(fname=io.StringIO(s.getvalue()))


def _frombuffer_of_getvalue(x, d):
    s = io.BytesIO()
    np.save(s, x)
    return np.frombuffer(s.getvalue(), offset=128)


READ_BACK = [_through(io.StringIO, np.savetxt, np.loadtxt),
             _through(io.StringIO, np.savetxt, np.genfromtxt),
             _through(io.BytesIO, np.save, np.load), _savez_buffer, _savez_compressed_path, _save_path, _savetxt_open_file, _save_path_read_as_file,
             _fromfile_after_save, _getvalue_copy, _savetxt_by_keywords,
             _frombuffer_of_getvalue]


@pytest.mark.parametrize("read_back", READ_BACK, ids=lambda f: f.__name__.strip("_"))
def test_reading_back_saved_traced_values_is_refused(read_back, tmp_path):
    x = np.array([1.0, 2.0])
    before = x.copy()

    def f(x):
        return (read_back(x, str(tmp_path)) * x).sum()

    assert (read_back(x, str(tmp_path)) == x).all()  # NumPy reads the values back
    with pytest.raises(mutad.MutadError, match="lose their derivative"):
        mutad.gradient(f, x)
    if read_back not in (_savez_buffer, _savetxt_by_keywords):  # (a dual by keyword: refused)
        with pytest.raises(mutad.MutadError, match="lose their derivative"):
            mutad.jvp(f, (x,), (np.ones(2),))
    g = mutad.grad(f, replay=True)
    for _ in range(3):  # a replay does not skip the check
        with pytest.raises(mutad.MutadError, match="lose their derivative"):
            g(x)
    assert x.tobytes() == before.tobytes()


def test_pickle_load_of_a_file_a_traced_save_wrote_is_refused(tmp_path):
    path = str(tmp_path / "u.npy")

    def f(x):
        np.save(path, x)
        with open(path, "rb") as fh:
            pickle.load(fh)
        return x.sum()

    with pytest.raises(mutad.MutadError, match="pickle.load reads back"):
        mutad.gradient(f, np.ones(2))


def test_saves_of_plain_values_and_other_files_run_as_numpys(tmp_path):
    other = str(tmp_path / "other.npy")
    np.save(other, np.array([3.0, 4.0]))
    x = np.array([1.0, 2.0])
    before = x.copy()

    def f(x):
        s = io.BytesIO()
        np.save(s, np.arange(2.0) * 2.0)  # a constant: no derivative to lose
        s.seek(0)
        t = io.StringIO()
        np.savetxt(t, mutad.stop_gradient(x))
        t.seek(0)
        np.save(str(tmp_path / "traced.npy"), x)  # saved, never read back
        return (np.load(s) * x + np.load(other) * x ** 2 + np.loadtxt(t) * x).sum()

    expected = np.array([0.0, 2.0]) + 2 * np.array([3.0, 4.0]) * x + x
    np.testing.assert_array_equal(mutad.gradient(f, x)[0], expected)
    assert mutad.jvp(f, (x,), (np.ones(2),))[1] == expected.sum()
    g = mutad.grad(f, replay=True)
    for _ in range(3):
        np.testing.assert_array_equal(g(x), expected)
    assert x.tobytes() == before.tobytes()


def test_a_save_is_forgotten_when_the_differentiation_ends(tmp_path):
    path = str(tmp_path / "u.npy")

    def saves(x):
        np.save(path, x)
        return x.sum()

    def loads(x):
        return (np.load(path) * x).sum()

    mutad.gradient(saves, np.ones(2))
    np.testing.assert_array_equal(mutad.gradient(loads, np.ones(2))[0], np.ones(2))


def test_a_hessian_refuses_the_read_back_too():
    def f(x):
        s = io.BytesIO()
        np.save(s, x)
        s.seek(0)
        return (np.load(s) * x).sum()

    with pytest.raises(mutad.MutadError, match="lose their derivative"):
        mutad.hessian(f, np.array([1.0, 2.0]))
