"""Arrays of a device library (CuPy): which arrays are, their namespace, and their memory.

mutad's core computes with NumPy's names: on a device array those dispatch, through NumPy's
protocols (``__array_ufunc__``, ``__array_function__``), to the array's own library, so the
code that reads values and computes cotangents is the same for both. What cannot dispatch is
what names no array (``np.zeros(shape)``, ``np.ndarray(shape, dtype, buffer, ...)``) and what
reads memory through NumPy's own structures (``__array_interface__``, ``flags.num``,
``byte_bounds``): those ask this module.

A *device array* is an array of a library that is not NumPy and whose arrays implement both
protocols and say where their memory is with ``__cuda_array_interface__`` (CuPy's
``ndarray``), or the array of a type given to :func:`register`. Its *namespace* is its library
(``cupy``), which has NumPy's creation functions under their NumPy names.

A device library may have a *SciPy counterpart* (``cupyx.scipy`` for ``cupy``): SciPy's
routines under SciPy's names, computing on the device (:func:`scipy_of`).

Nothing here copies device data to the host.
"""

import importlib
import sys

import numpy as np

from .levels import WRAPPERS

NAMESPACES = {}
"""Device array types seen so far: ``type -> namespace`` (None: not a device array)."""

NAMESPACES[np.ndarray] = None

LIBRARIES = {"numpy", "scipy", "mutad", "cupy", "cupyx"}
"""The top-level packages of the libraries whose modules keep their own bindings of NumPy in
the allocation mode (``allocation.INTERNAL``): NumPy, SciPy, mutad, and the device libraries
(their code computes with NumPy's names on host values: CuPy's ``numpy.dtype``)."""


SCIPY = {}
"""The SciPy counterparts given to :func:`register`: ``id(namespace) -> (namespace, module)``."""

SCIPY_LIBRARIES = set()
"""The top-level packages of the SciPy counterparts found (``cupyx``): the allocation mode swaps
mutad's stand-ins into their public modules, as into SciPy's."""

FOUND = []
"""What to call with each device namespace when it becomes known (``mutad.scipy``'s routes of
its SciPy counterpart's functions)."""


def register(kind, namespace, scipy=None):
    """Differentiate arrays of type ``kind`` as device arrays of library ``namespace`` (a module
    with NumPy's creation functions under NumPy's names, and
    ``lib.stride_tricks.as_strided``); the library's modules keep their own bindings of NumPy
    in the allocation mode. Needed only for a library that is not CuPy and whose arrays do not
    name their namespace (``__array_namespace__``). ``scipy``: the library's SciPy counterpart
    (a module with SciPy's submodules, as ``cupyx.scipy``), if not ``namespace.scipy``."""
    NAMESPACES[kind] = namespace
    if scipy is not None:
        SCIPY[id(namespace)] = (namespace, scipy)
    _known(namespace)


def _known(namespace):
    LIBRARIES.add(namespace.__name__.partition(".")[0])
    for found in FOUND:
        found(namespace)


def scipy_of(namespace):
    """The SciPy counterpart of device library ``namespace``: the module given to
    :func:`register`, else its ``scipy`` attribute, else ``cupyx.scipy`` for CuPy; None if it
    has none. Its top-level package's modules keep their own bindings of NumPy in the
    allocation mode, as the library's do."""
    given = SCIPY.get(id(namespace))
    if given is not None and given[0] is namespace:
        found = given[1]
    else:
        found = getattr(namespace, "scipy", None)
        if found is None and getattr(namespace, "__name__", None) == "cupy":
            try:
                found = importlib.import_module("cupyx.scipy")
            except ImportError:
                found = None
        SCIPY[id(namespace)] = (namespace, found)
    if found is not None:
        top = found.__name__.partition(".")[0]
        LIBRARIES.add(top)
        SCIPY_LIBRARIES.add(top)
    return found


def scipy_module(namespace, name):
    """Submodule ``name`` (``"linalg"``) of device library ``namespace``'s SciPy counterpart
    (``cupyx.scipy.linalg``), or None."""
    scipy = scipy_of(namespace)
    if scipy is None:
        return None
    found = getattr(scipy, name, None)
    if found is None:
        try:
            found = importlib.import_module(f"{scipy.__name__}.{name}")
        except ImportError:
            return None
    return found


def namespace_of(kind):
    """The namespace of device arrays of type ``kind``, or None if they are not device arrays."""
    try:
        return NAMESPACES[kind]
    except KeyError:
        pass
    found = None
    if hasattr(kind, "__cuda_array_interface__") and hasattr(kind, "__array_function__") \
            and hasattr(kind, "__array_ufunc__") and not issubclass(kind, np.ndarray):
        top = kind.__module__.split(".")[0]
        if top == "cupy":
            import cupy

            found = cupy
        elif hasattr(kind, "__array_namespace__"):
            try:
                found = kind.__array_namespace__(None)
            except TypeError:
                found = None
        if found is None:
            found = sys.modules.get(top)
    NAMESPACES[kind] = found
    if found is not None:
        _known(found)
    return found


def is_namespace(module):
    """Whether ``module`` is a device library's namespace (``cupy``)."""
    return any(module is found for found in NAMESPACES.values()) or (
        getattr(module, "__name__", None) == "cupy")


def is_device(a):
    """Whether ``a`` is a device array (a plain one: not traced)."""
    kind = type(a)
    return kind is not np.ndarray and namespace_of(kind) is not None


def is_array(a):
    """Whether ``a`` is a plain array, NumPy's or a device's."""
    kind = type(a)
    return kind is np.ndarray or namespace_of(kind) is not None


def namespace(a):
    """The namespace of plain array ``a``: NumPy for a NumPy array."""
    found = namespace_of(type(a))
    return np if found is None else found


def device_of(array):
    """The namespace of the device library whose memory ``array`` (plain, traced or dual; at
    any depth of nesting) is, or None for NumPy's memory and for what is not an array."""
    while type(array) in WRAPPERS:
        array = array.value
    return None if type(array) is np.ndarray else namespace_of(type(array))


def address(a):
    """The address of device array ``a``'s first element."""
    return a.__cuda_array_interface__["data"][0]


def byte_bounds(a):
    """``(low, high)``: the addresses of device array ``a``'s lowest byte and one past its
    highest, from its shape and strides (``numpy.lib.array_utils.byte_bounds``)."""
    low = high = address(a)
    if a.size == 0:
        return low, high
    for n, stride in zip(a.shape, a.strides):
        if stride < 0:
            low += (n - 1) * stride
        else:
            high += (n - 1) * stride
    return low, high + a.dtype.itemsize


def strided(flat, shape, dtype, offset, strides):
    """The view of one-dimensional device array ``flat`` at byte ``offset`` with ``shape``,
    ``dtype`` and ``strides`` (``np.ndarray(shape, dtype, flat, offset, strides)``)."""
    dtype = np.dtype(dtype)
    if flat.dtype != dtype:  # the floats of a complex buffer
        flat = flat.view(dtype)
    if 0 in shape:
        offset = 0
    start = flat[offset // dtype.itemsize:] if offset else flat
    return namespace(flat).lib.stride_tricks.as_strided(start, shape, strides)


def span_of(root, dtype, offset, count):
    """The one-dimensional view of ``count`` elements of ``dtype`` at byte ``offset`` of the
    memory of device array ``root``, an array that owns its memory (laid out contiguously)
    (``np.ndarray((count,), dtype, root, offset)``)."""
    dtype = np.dtype(dtype)
    whole = root.size * root.dtype.itemsize // dtype.itemsize
    flat = namespace(root).lib.stride_tricks.as_strided(
        root if root.dtype == dtype else root.view(dtype), (whole,), (dtype.itemsize,))
    return flat[offset // dtype.itemsize:offset // dtype.itemsize + count]


def zeros(like, shape, dtype):
    """Zeros of ``shape`` and ``dtype`` where ``like`` (a plain array) lives."""
    if type(like) is np.ndarray:
        return np.zeros(shape, dtype)
    return namespace(like).zeros(shape, dtype)


def index_for(like, key):
    """``key``, an index into the plain array ``like``, with its lists and NumPy arrays copied
    to ``like``'s device where ``like`` is a device array (CuPy's ``ufunc.at`` takes device
    arrays and numbers only); ``key`` itself otherwise."""
    if type(like) is np.ndarray or not is_device(like):
        return key
    xp = namespace(like)
    if type(key) is tuple:
        return tuple(index_for(like, k) for k in key)
    if type(key) is list or type(key) is np.ndarray:
        return xp.asarray(key)
    return key


def ufunc_at(ufunc, a, key, *values):
    """``ufunc.at(a, key, *values)``; on a device array, its library's ufunc's ``at``, given the
    key on the device (NumPy's protocol hands CuPy no key but one array: not a tuple of them,
    nor a list)."""
    if type(a) is np.ndarray or not is_device(a):
        return ufunc.at(a, key, *values)
    return getattr(namespace(a), ufunc.__name__).at(a, index_for(a, key), *values)


def beside(like, value):
    """``value`` where the plain array ``like`` lives: a number or NumPy array given beside a
    device array copied to its device (a host-to-device copy), anything else as it is."""
    if type(like) is np.ndarray or not is_device(like):
        return value
    if isinstance(value, (np.ndarray, np.generic, float, int, complex)) and not is_device(value):
        return namespace(like).asarray(value)
    return value


def traced_refused(error):
    """For the TypeError of a device library handed a traced value it cannot compute with
    (CuPy's "Unsupported type <class '...Traced'>": it computes with its own arrays only), the
    UntracedWriteError that says where it comes from and what to do instead (the TypeError its
    cause); else None. Such a value reaches the library's own code where it is written into, or
    computed with by the methods of, a device array mutad does not follow: the floats made from
    an integer or boolean result of a function without a derivative stay the library's plain
    arrays on a device (``w = (x > 0).astype(float)``, ``np.where(x > 0, 1.0, 0.5)``,
    ``np.argsort(x) * 1.0``), as integer arrays must stay the library's own to index its other
    arrays; so do device arrays made before the differentiation started."""
    from .errors import UntracedWriteError
    text = str(error)
    if type(error) is not TypeError or not any(f"Unsupported type {kind}" in text
                                              for kind in WRAPPERS):
        return None
    refusal = UntracedWriteError(
        f"a traced value reached the device library's own code ({error}), which computes with "
        "its own arrays only: it was written into, or computed with by a method of, a device "
        "array that mutad does not follow. On a device, the floats made from an integer or "
        "boolean result of a function without a derivative are such arrays "
        "(w = (x > 0).astype(float), np.where(x > 0, 1.0, 0.5), np.argsort(x) * 1.0), and so "
        "are device arrays made before the differentiation started. Make the array from a float "
        "array the function computes or allocates, which mutad follows: "
        "w = (x > 0) * np.ones_like(x), np.where(x > 0, 1.0, 0.5) + np.zeros_like(x), or "
        "w = np.zeros_like(x); w[...] = ... .")
    refusal.__cause__ = error
    return refusal.with_traceback(error.__traceback__)
