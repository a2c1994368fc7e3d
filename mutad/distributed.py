"""Gradients across a Dask cluster: a sum of losses over shards, and a map of independent
gradients, each computed by mutad on the workers of a ``distributed.Client``.

>>> import numpy as np, mutad.distributed
>>> def loss(theta, x, y):
...     r = x * theta[0]
...     r += theta[1] - y          # in place, as mutad allows
...     return (r * r).sum()
>>> shards = [(np.arange(3.0), 2 * np.arange(3.0) + 1), (np.ones(2), np.full(2, 3.0))]
>>> value, grad = mutad.distributed.value_and_grad_sum(loss, shards, client=False)(np.zeros(2))
>>> float(value), grad.tolist()
(53.0, [-38.0, -30.0])

``client=False`` runs in this process (as above, and for debugging); ``client=None``, the
default, takes Dask's default client (``distributed.get_client()``). Dask's distributed
scheduler is an optional dependency: ``pip install "mutad[distributed]"``.

On a worker, each loss is differentiated by one ``mutad.value_and_grad(loss, replay=True)``
kept in a module-level cache keyed by a token of the loss computed on the client, so that the
recorded programs live on across the tasks and calls a worker runs. The loss travels pickled,
as bytes scattered to every worker once, and is unpickled only where the cache misses: a
function of ``__main__`` or a closure is pickled by value (cloudpickle), so unpickled afresh it
would be a new object on every task and could not be its own key; and while mutad runs it, its
module's ``np`` is mutad's stand-in, which cannot be pickled, so Dask must never have to pickle
the live function to send it on to another worker.
"""

from __future__ import annotations

import collections
import concurrent.futures
import copy
import pickle
import threading
import uuid
from collections.abc import Callable, Sequence
from typing import Any, Literal

try:
    import cloudpickle
    import dask.base
    import distributed
except ImportError as _missing:
    raise ImportError('mutad.distributed needs Dask\'s distributed scheduler: '
                      'pip install "mutad[distributed]"') from _missing

from .api import value_and_grad
from .core.errors import MutadError
from .core.trees import flatten

__all__ = ["ShardedGradient", "value_and_grad_map", "value_and_grad_sum"]

_LARGE = 1 << 20
"""Parameters of more bytes than this are scattered to the workers once per call rather than
copied into every task (Dask warns about large objects in its task graph)."""


def value_and_grad_sum(loss: Callable[..., Any], shards: Sequence[Any],
                       client: Any = None, argnums: int | tuple[int, ...] = 0,
                       policy: Literal["restore", "checkpoint"] = "restore",
                       replay: bool = True, retries: int = 0) -> ShardedGradient:
    """The value and gradient of ``sum(loss(*params, *shard) for shard in shards)`` as a
    function of the parameters, computed shard by shard on a Dask cluster: what
    ``scipy.optimize.minimize(fun, x0, jac=True)`` takes with the default ``argnums=0``.

    Each shard is a tuple of the arguments that follow the parameters (anything else is one
    argument), or a ``distributed.Future`` of one (data already on the cluster). The
    shards are scattered to the workers at the first call and kept there for the later ones
    (again if a lost worker took them). Every shard's ``(value, gradient)`` is computed by
    mutad on a worker, ``replay=True`` by default, and the results are added up pairwise on
    the cluster: only the total comes back. The pairwise order rounds differently from a sum
    in shard order, by a few units in the last place of the larger terms.

    A worker lost during a call is Dask's to handle: its tasks run again elsewhere
    (``distributed.scheduler.allowed-failures`` times). ``retries`` re-runs a task that raised;
    an error of mutad's is deterministic and is not worth retrying. An error in a shard
    reaches the caller with the shard's index in its message and its own type.
    """
    return ShardedGradient(loss, shards, client, argnums, policy, replay, retries)


def value_and_grad_map(loss: Callable[..., Any], arguments: Sequence[Any],
                       client: Any = None, argnums: int | tuple[int, ...] = 0,
                       policy: Literal["restore", "checkpoint"] = "restore",
                       replay: bool = True, retries: int = 0) -> list[tuple[Any, Any]]:
    """``[mutad.value_and_grad(loss, argnums)(*args) for args in arguments]``, each on a
    worker of a Dask cluster: independent gradients, as of the members of an ensemble or the
    points of a sweep. Each item of ``arguments`` is a tuple of arguments (anything else is
    one argument) or a ``distributed.Future`` of one; ``client``, ``policy``, ``replay``
    and ``retries`` are as for :func:`value_and_grad_sum`, and an error names its item.

    >>> import numpy as np, mutad.distributed
    >>> def f(x, k):
    ...     x *= k
    ...     return (x * x).sum()
    >>> [(float(v), g.tolist()) for v, g in mutad.distributed.value_and_grad_map(
    ...     f, [(np.ones(2), 2.0), (np.ones(2), 3.0)], client=False)]
    [(8.0, [8.0, 8.0]), (18.0, [18.0, 18.0])]
    """
    options = _options(loss, argnums, policy, replay)
    if client is False:
        return [_value_and_grad(options, loss, i, (), args) for i, args in enumerate(arguments)]
    client = _client(client)
    [function] = client.scatter([cloudpickle.dumps(loss)], broadcast=True, hash=False)
    futures = [client.submit(_value_and_grad, options, function, i, (), args, pure=False,
                             retries=retries) for i, args in enumerate(arguments)]
    return client.gather(futures)


class ShardedGradient:
    """What :func:`value_and_grad_sum` returns: ``g(*params)`` gives ``(value, grads)``."""

    def __init__(self, loss: Callable[..., Any], shards: Sequence[Any], client: Any = None,
                 argnums: int | tuple[int, ...] = 0,
                 policy: Literal["restore", "checkpoint"] = "restore", replay: bool = True,
                 retries: int = 0) -> None:
        self.loss = loss
        self.shards = list(shards)
        self.options = _options(loss, argnums, policy, replay)
        self.retries = retries
        self.client = client
        self._scattered: list[Any] | None = None  # the shards' futures, once scattered
        self._function: Any = None  # the pickled loss's future, on every worker

    def __call__(self, *params: Any) -> tuple[Any, Any]:
        if self.client is False:  # in this process, in the order of the cluster's sum
            return _tree_sum([_value_and_grad(self.options, self.loss, i, params, shard)
                              for i, shard in enumerate(self.shards)], _add)
        client = _client(self.client)
        try:
            return self._on(client, params)
        except concurrent.futures.CancelledError:  # Dask's FutureCancelledError is one
            # Scattered data has no recipe: a worker lost with the only copy of a shard
            # cancels the tasks that needed it. Scatter again and run the call once more.
            self._scattered = None
            return self._on(client, params)

    def _on(self, client, params):
        if self._scattered is None or any(f.status != "finished" for f in self._scattered):
            [self._function] = client.scatter([cloudpickle.dumps(self.loss)], broadcast=True,
                                              hash=False)
            here = [shard for shard in self.shards if not _on_cluster(shard)]
            # One message for them all; new keys each time, never those of data lost before
            sent = iter(client.scatter(here, hash=False) if here else [])
            self._scattered = [shard if _on_cluster(shard) else next(sent)
                               for shard in self.shards]
        if sum(leaf.nbytes for leaf in flatten(params)[0] if hasattr(leaf, "nbytes")) > _LARGE:
            [params] = client.scatter([params], broadcast=True, hash=False)
        parts = [client.submit(_value_and_grad, self.options, self._function, i, params, shard,
                               pure=False, retries=self.retries)
                 for i, shard in enumerate(self._scattered)]
        return _tree_sum(parts, lambda a, b: client.submit(_add, a, b, pure=False,
                                                           retries=self.retries)).result()


def _options(loss, argnums, policy, replay):
    """What a worker's differentiated loss is made with, and the token it is cached under."""
    try:
        token = dask.base.tokenize(loss)
    except Exception:  # an object Dask cannot tokenize: a cache of its own per call site
        token = uuid.uuid4().hex
    return (token, argnums, policy, replay)


def _client(client):
    return distributed.get_client() if client is None else client


def _on_cluster(shard):
    return isinstance(shard, distributed.Future) or (
        isinstance(shard, tuple) and any(isinstance(a, distributed.Future) for a in shard))


def _tree_sum(items, add):
    """Adds ``items`` pairwise, level by level: ``((0 + 1) + (2 + 3)) + 4``."""
    if not items:
        raise ValueError("a sum over no shards: give at least one")
    while len(items) > 1:
        items = [add(items[i], items[i + 1]) if i + 1 < len(items) else items[i]
                 for i in range(0, len(items), 2)]
    return items[0]


def _add(a, b):
    """The sum of two ``(value, grads)`` pairs of one structure; ``None`` stays ``None``."""
    left, rebuild = flatten(a)
    right, _ = flatten(b)
    return rebuild([None if x is None else x + y for x, y in zip(left, right, strict=True)])


_CACHE: collections.OrderedDict = collections.OrderedDict()
"""On a worker: ``options -> mutad.value_and_grad(loss, ...)``, the most recently used last."""
_CACHE_SIZE = 32
_CACHE_LOCK = threading.Lock()  # a worker may run several tasks at once, one per thread


def _value_and_grad(options, loss, index, params, shard):
    """One shard's ``(value, grads)``, by the worker's cached differentiated loss (``loss`` is
    the function, or on a worker its pickle)."""
    token, argnums, policy, replay = options
    with _CACHE_LOCK:
        differentiated = _CACHE.get(options)
        if differentiated is None:
            if isinstance(loss, bytes):
                loss = pickle.loads(loss)
            differentiated = _CACHE[options] = value_and_grad(loss, argnums, policy=policy,
                                                              replay=replay)
            if len(_CACHE) > _CACHE_SIZE:
                _CACHE.popitem(last=False)
        _CACHE.move_to_end(options)
    arguments = shard if isinstance(shard, tuple) else (shard,)
    try:
        return differentiated(*params, *arguments)
    except MutadError as error:
        raise _naming_shard(error, index) from error
    except Exception as error:
        if hasattr(error, "add_note"):  # Python 3.11: a note, not a new message
            error.add_note(f"(in shard {index})")
        raise


def _naming_shard(error, index):
    """``error`` with ``shard {index}: `` before its message, of its own type."""
    named = copy.copy(error)
    named.args = (f"shard {index}: {error}", *error.args[1:])
    return named
