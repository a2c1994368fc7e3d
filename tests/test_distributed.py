"""mutad.distributed on a LocalCluster of two worker processes, started and closed here.

The distributed gradient is the shards' gradients added pairwise on the cluster; a serial sum
adds them in shard order, which rounds differently: each addition rounds to half a unit in the
last place, so the two differ by at most about ``(shards - 1) * eps`` relative to the sum of the
magnitudes, which for these losses (terms of one sign and size) is below 1e-14 of the total.
``rtol=1e-12`` bounds that with room, and the same pairwise order computed in this process
(``client=False``) gives the cluster's numbers bit for bit: each shard's gradient is mutad's
on the same inputs, whichever process computes it.
"""

import os
import subprocess
import sys

import numpy as np
import pytest
from scipy.optimize import minimize

import mutad

distributed = pytest.importorskip("distributed")
md = pytest.importorskip("mutad.distributed")

SHARDS = 16


def model_loss(theta, x, y):
    """Least squares of a two-parameter exponential decay, with its residual made in place."""
    r = np.exp(-theta[0] * x)
    r *= theta[1]
    r -= y
    return (r * r).sum()


def make_shards(true=(0.7, 2.0), count=SHARDS, n=40, seed=0):
    rng = np.random.default_rng(seed)
    shards = []
    for _ in range(count):
        x = np.sort(rng.uniform(0.0, 4.0, n))
        shards.append((x, true[1] * np.exp(-true[0] * x) + 0.01 * rng.standard_normal(n)))
    return shards


def serial(loss, shards, params, argnums=0):
    """The sum in shard order, each term by mutad.value_and_grad in this process."""
    value, grads = 0.0, None
    for shard in shards:
        v, g = mutad.value_and_grad(loss, argnums)(*params, *shard)
        value, grads = value + v, g if grads is None else add(grads, g)
    return value, grads


def add(a, b):
    if isinstance(a, dict):
        return {k: add(a[k], b[k]) for k in a}
    if isinstance(a, tuple):
        return tuple(map(add, a, b))
    return a + b


@pytest.fixture(scope="module")
def cluster():
    with distributed.LocalCluster(n_workers=2, processes=True, threads_per_worker=1,
                                  dashboard_address=None) as cluster:
        yield cluster


@pytest.fixture
def client(cluster):
    with distributed.Client(cluster) as client:
        client.wait_for_workers(2)
        yield client


def test_the_gradient_of_the_sum_is_the_serial_one(client):
    shards, theta = make_shards(), np.array([0.5, 1.5])
    before = theta.tobytes()
    value, grad = md.value_and_grad_sum(model_loss, shards, client=client)(theta)
    expected_value, expected_grad = serial(model_loss, shards, (theta,))
    np.testing.assert_allclose(value, expected_value, rtol=1e-12)
    np.testing.assert_allclose(grad, expected_grad, rtol=1e-12)
    here_value, here_grad = md.value_and_grad_sum(model_loss, shards, client=False)(theta)
    assert value == here_value and grad.tobytes() == here_grad.tobytes()
    assert theta.tobytes() == before


def programs_on_workers(client, options):
    """How many programs each worker's differentiated loss has recorded."""
    def count(options):
        from mutad.distributed import _CACHE
        return [len(f.programs) for key, f in _CACHE.items() if key == options]
    return {worker: n for worker, ns in client.run(count, options).items() for n in ns}


def test_later_calls_reuse_the_workers_differentiated_loss_and_the_scattered_shards(client):
    shards = make_shards(count=4)
    g = md.value_and_grad_sum(model_loss, shards, client=client)
    g(np.array([0.5, 1.5]))
    scattered, recorded = list(g._scattered), programs_on_workers(client, g.options)
    assert recorded and all(n >= 1 for n in recorded.values())
    for theta in (np.array([0.6, 1.7]), np.array([0.8, 2.1])):
        value, grad = g(theta)
        np.testing.assert_allclose(grad, serial(model_loss, shards, (theta,))[1], rtol=1e-12)
    assert g._scattered == scattered
    # Later calls replay what the first recorded (or trace where a recording was refused):
    # no worker records a new program
    assert programs_on_workers(client, g.options) == recorded


def test_pytree_parameters_and_argnums(client):
    def loss(params, x, y):
        return model_loss((params["rate"], params["scale"][0]), x, y)

    shards = make_shards(count=5)
    params = {"rate": np.array(0.5), "scale": np.array([1.5])}
    value, grad = md.value_and_grad_sum(loss, shards, client=client)(params)
    expected = serial(loss, shards, (params,))[1]
    assert set(grad) == {"rate", "scale"}
    for name in grad:
        np.testing.assert_allclose(grad[name], expected[name], rtol=1e-12)

    def two(rate, scale, x, y):
        return model_loss((rate, scale), x, y)

    value, (d_rate, d_scale) = md.value_and_grad_sum(two, shards, client=client,
                                                    argnums=(0, 1))(0.5, 1.5)
    np.testing.assert_allclose((d_rate, d_scale), serial(two, shards, (0.5, 1.5), (0, 1))[1],
                               rtol=1e-12)


def test_shards_already_scattered_and_large_parameters_scattered(client, monkeypatch):
    shards = make_shards(count=3)
    futures = client.scatter(shards)
    monkeypatch.setattr(md, "_LARGE", 0)  # every parameter array counts as large
    theta = np.array([0.5, 1.5])
    value, grad = md.value_and_grad_sum(model_loss, futures, client=client)(theta)
    np.testing.assert_allclose(grad, serial(model_loss, shards, (theta,))[1], rtol=1e-12)


def test_the_default_client(client):
    shards, theta = make_shards(count=3), np.array([0.5, 1.5])
    value, grad = md.value_and_grad_sum(model_loss, shards)(theta)
    np.testing.assert_allclose(grad, serial(model_loss, shards, (theta,))[1], rtol=1e-12)


def test_a_map_of_independent_gradients(client):
    members = [(np.array([0.4 + 0.1 * i, 1.0 + i]), *shard)
               for i, shard in enumerate(make_shards(count=6))]
    results = md.value_and_grad_map(model_loss, members, client=client)
    for (value, grad), member in zip(results, members, strict=True):
        expected_value, expected_grad = mutad.value_and_grad(model_loss)(*member)
        assert value == expected_value and grad.tobytes() == expected_grad.tobytes()


def test_minimize_fits_the_model_to_all_shards(client):
    shards = make_shards(true=(0.7, 2.0))
    result = minimize(md.value_and_grad_sum(model_loss, shards, client=client),
                      np.array([0.3, 1.0]), jac=True, method="BFGS")
    assert result.success
    np.testing.assert_allclose(result.x, [0.7, 2.0], atol=0.01)


def test_an_error_names_its_shard_and_keeps_its_type(client):
    shards = make_shards(count=4)
    shards[2] = (shards[2][0], np.stack([shards[2][1]] * 2, axis=1))  # a non-scalar loss

    def loss(theta, x, y):
        r = np.exp(-theta[0] * x)[:, None] * theta[1] - y if y.ndim == 2 else \
            np.exp(-theta[0] * x) * theta[1] - y
        return (r * r).sum(axis=0)

    with pytest.raises(mutad.errors.NonScalarOutputError, match=r"^shard 2: ") as caught:
        md.value_and_grad_sum(loss, shards, client=client)(np.array([0.5, 1.5]))
    assert "scalar" in str(caught.value)
    with pytest.raises(mutad.errors.NonScalarOutputError, match=r"^shard 2: "):
        md.value_and_grad_sum(loss, shards, client=False)(np.array([0.5, 1.5]))
    with pytest.raises(mutad.MutadError, match=r"^shard 2: "):
        md.value_and_grad_map(loss, [(np.array([0.5, 1.5]), *s) for s in shards], client=client)


def killing_loss(theta, x, y, marker):
    """model_loss, but the first time any process evaluates it with a marker that does not
    exist yet, that process dies (a worker lost in the middle of a call)."""
    if marker and not os.path.exists(marker):
        open(marker, "w").close()
        os._exit(1)
    return model_loss(theta, x, y)


def test_a_killed_worker_does_not_change_the_result(client, tmp_path):
    marker = str(tmp_path / "killed")
    shards = [(x, y, marker if i == 5 else "") for i, (x, y) in enumerate(make_shards())]
    theta = np.array([0.5, 1.5])
    pids = set(client.run(os.getpid).values())
    g = md.value_and_grad_sum(killing_loss, shards, client=client, replay=False)
    value, grad = g(theta)
    assert os.path.exists(marker)  # a worker did die
    expected_value, expected_grad = serial(model_loss, [s[:2] for s in shards], (theta,))
    np.testing.assert_allclose(value, expected_value, rtol=1e-12)
    np.testing.assert_allclose(grad, expected_grad, rtol=1e-12)
    # The nanny starts a new worker process; the next call runs on the cluster as it is now,
    # with whatever shards the lost worker held scattered again.
    client.wait_for_workers(2)
    assert set(client.run(os.getpid).values()) != pids
    np.testing.assert_allclose(g(theta)[1], expected_grad, rtol=1e-12)


def test_import_mutad_does_not_import_dask_and_its_absence_is_explained():
    code = ("import sys; import mutad; assert 'dask' not in sys.modules, 'dask imported'; "
            "assert 'distributed' not in sys.modules; sys.modules['distributed'] = None\n"
            "try:\n    import mutad.distributed\n"
            "except ImportError as e:\n    print(e)\n")
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    assert run.returncode == 0, run.stderr
    assert 'pip install "mutad[distributed]"' in run.stdout
