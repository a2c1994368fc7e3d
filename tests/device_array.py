"""A stand-in for a GPU array library (CuPy), for testing mutad on device arrays without a GPU.

:class:`ndarray` wraps a NumPy array (its "device memory") and behaves as ``cupy.ndarray`` does
where it matters to a library that differentiates code written for it:

* it implements NumPy's protocols: a NumPy ufunc or function given one runs this module's
  version (``__array_ufunc__``, ``__array_function__``), which computes with NumPy on the
  wrapped data and wraps the results; both give way (return ``NotImplemented``) where an
  operand is another library's array, as CuPy's do (a ufunc's operands may be numbers, device
  and NumPy arrays, a function's device and NumPy arrays);
* host data is refused as CuPy refuses it: a NumPy array (of any dimension) among the operands
  of a ufunc or a function raises ``TypeError`` ("Unsupported type"), except in the creation
  functions that copy host data to the device (``asarray``, ``array``) and as the value of an
  assignment (``d[...] = host``, which CuPy copies over);
* implicit conversion to NumPy raises: ``np.asarray(d)`` raises ``TypeError`` ("Implicit
  conversion to a NumPy array is not allowed"), as CuPy's ``__array__`` does; ``d.get()`` and
  :func:`asnumpy` are the explicit copies, and ``float(d)``, ``bool(d)``, ``int(d)``,
  ``d.item()`` and ``d.tolist()`` read values (a synchronising copy on a GPU);
* views share memory: basic indexing, ``reshape``, ``transpose``, ``.T``, ``.real`` and
  ``.imag`` of complex arrays, ``ravel`` of contiguous arrays and :func:`as_strided` give arrays
  over the same data, whose ``base`` is the array that owns it (as in NumPy and CuPy); indexing
  with integers gives a 0-d array view (CuPy never returns a scalar), and reductions give 0-d
  arrays;
* it has no read-only arrays (CuPy has none): ``flags`` holds ``c_contiguous``,
  ``f_contiguous`` and ``owndata`` only.

The module is its own namespace, as ``cupy`` is (``xp.zeros``, ``xp.linalg.solve``,
``xp.fft.fft``), with every NumPy function under its NumPy name. ``xp.scipy`` stands in for
``cupyx.scipy``, the library's SciPy: a sample of SciPy's routines that cupyx.scipy has, in
its submodules (``xp.scipy.linalg.lu_factor``), which compute with SciPy on the arrays' data
and take device arrays only where SciPy takes arrays, as cupyx.scipy's do. ``TRANSFERS`` counts the
explicit copies to the host (``get``, ``asnumpy``, ``item``, ``tolist``, Python's number
conversions), so a test can check that a computation made none, or only those it expected.
"""

import functools
import inspect
import sys
import types
import weakref

import numpy as np

TRANSFERS = [0]
"""How many copies to the host were made (explicit ones: ``get``, ``item``, ``float(d)``...)."""

_owners = weakref.WeakValueDictionary()  # id(NumPy array owning memory) -> its device array


def _numpy_owner(a):
    while True:
        base = a.base
        if not isinstance(base, np.ndarray):
            base = getattr(base, "base", None)  # as_strided's DummyArray
            if not isinstance(base, np.ndarray):
                return a
        a = base


def _wrap(data):
    """The device array over NumPy array ``data`` (whose memory is device memory)."""
    if not isinstance(data, np.ndarray):
        data = np.asarray(data)  # a NumPy scalar result: a 0-d array, as CuPy gives
    known = _owners.get(id(data))
    if known is not None and known._data is data:
        return known  # an argument handed back (np.atleast_1d of a vector): that array
    if not data.flags.writeable and not data.flags.owndata and data.base is not None \
            and not _overlapping(data):
        try:  # CuPy has no read-only arrays (a broadcast's NumPy data stays read-only: a
            data.flags.writeable = True  # write through one is a mistake on a device too)
        except ValueError:
            pass
    new = object.__new__(ndarray)
    new._data = data
    root = _numpy_owner(data)
    if root is data:
        new._base = None
        _owners[id(data)] = new
    else:
        base = _owners.get(id(root))
        if base is None or base._data is not root:
            base = object.__new__(ndarray)
            base._data, base._base = root, None
            _owners[id(root)] = base
        new._base = base
    return new


def _overlapping(data):
    return any(stride == 0 and n > 1 for n, stride in zip(data.shape, data.strides))


def _host_refused(x):
    return TypeError(f"Unsupported type {type(x)}")


def _unwrap(x, host=False):
    """The NumPy data of ``x`` for a computation: a device array's data; a host array refused
    (unless ``host``: a copy to the device); lists and tuples element by element."""
    kind = type(x)
    if kind is ndarray:
        return x._data
    if kind is np.ndarray:
        if host or host is None and x.dtype.kind in "iu" and x.ndim <= 1:
            return x.copy()  # (None: a function's parameter, where CuPy takes a host vector of
        raise _host_refused(x)  # integers as the sequence it is: split points, axes)
    if kind is list or kind is tuple:
        return kind(_unwrap(e, host) for e in x)
    if isinstance(x, np.ndarray):  # a NumPy subclass
        raise _host_refused(x)
    if hasattr(x, "__array_function__") and not isinstance(x, (np.generic, type)):
        raise _host_refused(x)  # another library's array: CuPy cannot compute with it
    return x


def _wrap_result(r, outs=()):
    if isinstance(r, np.ndarray):
        for given, data in outs:
            if r is data:
                return given
        return _wrap(r)
    if isinstance(r, np.generic):
        return _wrap(np.asarray(r))
    if isinstance(r, tuple):
        items = [_wrap_result(e, outs) for e in r]
        return type(r)(*items) if hasattr(type(r), "_fields") else type(r)(items)
    if isinstance(r, list):
        return [_wrap_result(e, outs) for e in r]
    return r


def _outs(kwargs):
    """``kwargs`` with device ``out=`` arrays unwrapped, and the pairs (device, data)."""
    out = kwargs.get("out")
    if out is None:
        return kwargs, ()
    outs = out if isinstance(out, tuple) else (out,)
    pairs = tuple((o, _unwrap(o)) for o in outs if o is not None)
    kwargs = dict(kwargs)
    kwargs["out"] = tuple(_unwrap(o) if o is not None else None for o in outs) \
        if isinstance(out, tuple) else _unwrap(out)
    return kwargs, pairs


CREATION = {"asarray", "array", "asanyarray", "ascontiguousarray", "asfortranarray",
            "array_equal", "array_equiv"}
"""Functions that accept host data (copying it to the device)."""

NOT_FUNCTIONS = {"ndarray", "generic", "dtype", "ufunc", "errstate", "finfo", "iinfo",
                 "result_type", "promote_types", "can_cast", "isscalar"}


def _device_function(function, name):
    host = name in CREATION

    @functools.wraps(function)
    def on_device(*args, **kwargs):
        kwargs, outs = _outs(kwargs)
        args = (_unwrap(args[0], host), *_unwrap(args[1:], host or None)) if args else args
        kwargs = {k: (v if k == "out" else _unwrap(v, host or None)) for k, v in kwargs.items()}
        return _wrap_result(function(*args, **kwargs), outs)

    on_device.__module__ = __name__
    return on_device


class _Namespace(types.ModuleType):
    """A namespace of device functions, one per function of a NumPy module (made on first
    use), as ``cupy.linalg`` is of ``numpy.linalg``."""

    def __init__(self, name, numpy_module):
        super().__init__(name)
        self._numpy = numpy_module

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        value = getattr(self._numpy, name)
        if isinstance(value, np.ufunc):
            value = ufunc(value)
        elif callable(value) and not isinstance(value, type) and name not in NOT_FUNCTIONS:
            value = _device_function(value, name)
        setattr(self, name, value)
        return value


class ufunc:
    """A NumPy ufunc computing on device arrays, with its methods."""

    def __init__(self, numpy_ufunc):
        self._ufunc = numpy_ufunc
        self.__name__ = numpy_ufunc.__name__
        self.nin, self.nout, self.nargs = numpy_ufunc.nin, numpy_ufunc.nout, numpy_ufunc.nargs

    def __call__(self, *args, **kwargs):
        return _call_ufunc(self._ufunc, "__call__", args, kwargs)

    def __getattr__(self, method):
        if method in ("reduce", "accumulate", "reduceat", "outer", "at"):
            return lambda *args, **kwargs: _call_ufunc(self._ufunc, method, args, kwargs)
        return getattr(self._ufunc, method)

    def __repr__(self):
        return f"<device ufunc '{self.__name__}'>"


def _call_ufunc(numpy_ufunc, method, inputs, kwargs):
    kwargs, outs = _outs(kwargs)
    if method == "at":  # the indices of ufunc.at, as an index: host ones are copied over
        inputs = (_unwrap(inputs[0]), _index(inputs[1]), *_unwrap(inputs[2:]))
    else:
        inputs = _unwrap(inputs)
    kwargs = {k: (v if k == "out" else _unwrap(v)) for k, v in kwargs.items()}
    result = getattr(numpy_ufunc, method)(*inputs, **kwargs) if method != "__call__" \
        else numpy_ufunc(*inputs, **kwargs)
    if method == "at":
        return None
    return _wrap_result(result, outs)


class _Flags:
    __slots__ = ("c_contiguous", "f_contiguous", "owndata")

    def __init__(self, data, owndata):
        self.c_contiguous = data.flags.c_contiguous
        self.f_contiguous = data.flags.f_contiguous
        self.owndata = owndata

    def __getitem__(self, name):
        return getattr(self, {"C_CONTIGUOUS": "c_contiguous", "F_CONTIGUOUS": "f_contiguous",
                              "OWNDATA": "owndata"}.get(name, name))


class MemoryPointer:
    """Where a device array's data starts (``d.data.ptr``), as ``cupy.cuda.MemoryPointer``."""

    __slots__ = ("ptr",)

    def __init__(self, ptr):
        self.ptr = ptr


def _index(key):
    """A key with device arrays unwrapped (CuPy takes host integer arrays and lists as
    indices too), and an Ellipsis added to all-integer keys so that NumPy gives a 0-d view."""
    if type(key) is not tuple:
        key = (key,)
    key = tuple(k._data if type(k) is ndarray else k for k in key)
    if all(isinstance(k, (int, np.integer)) and not isinstance(k, bool) for k in key):
        key = key + (Ellipsis,)
    return key


class ndarray:
    """A device array (see the module's docstring)."""

    __slots__ = ("_data", "_base", "__weakref__")
    __array_priority__ = 100

    def __init__(self, shape, dtype=float, memptr=None, strides=None, order="C"):
        if memptr is not None:
            raise NotImplementedError("the stand-in makes views with as_strided")
        self._data = np.empty(shape, dtype, order=order)
        self._base = None
        _owners[id(self._data)] = self

    # NumPy's protocols ----------------------------------------------------------------------

    def __array__(self, dtype=None, copy=None):
        raise TypeError("Implicit conversion to a NumPy array is not allowed. "
                        "Please use `.get()` to construct a NumPy array explicitly.")

    def __array_ufunc__(self, numpy_ufunc, method, *inputs, **kwargs):
        for x in inputs + tuple(kwargs.get("out", ())):
            if not isinstance(x, (ndarray, np.ndarray, int, float, complex, bool, np.generic)) \
                    and not hasattr(x, "__cuda_array_interface__"):
                return NotImplemented  # another library's array: its turn
        return _call_ufunc(numpy_ufunc, method, inputs, kwargs)

    def __array_function__(self, func, types_, args, kwargs):
        try:
            module = functools.reduce(getattr, func.__module__.split(".")[1:], _this())
            device_func = getattr(module, func.__name__)
        except AttributeError:
            return NotImplemented
        if device_func is func or not callable(device_func):
            return NotImplemented
        if not all(issubclass(t, (ndarray, np.ndarray)) for t in types_):
            return NotImplemented  # another library's array among the operands: its turn
        return device_func(*args, **kwargs)

    def __array_namespace__(self, api_version=None):
        return _this()

    # Attributes -----------------------------------------------------------------------------

    shape = property(lambda self: self._data.shape)
    dtype = property(lambda self: self._data.dtype)
    ndim = property(lambda self: self._data.ndim)
    size = property(lambda self: self._data.size)
    nbytes = property(lambda self: self._data.nbytes)
    itemsize = property(lambda self: self._data.itemsize)
    strides = property(lambda self: self._data.strides)
    base = property(lambda self: self._base)
    flags = property(lambda self: _Flags(self._data, self._base is None))
    data = property(lambda self: MemoryPointer(self._data.__array_interface__["data"][0]))
    device = property(lambda self: "stand-in device 0")
    T = property(lambda self: _wrap(self._data.T))
    mT = property(lambda self: _wrap(self._data.mT))

    @property
    def __cuda_array_interface__(self):
        interface = dict(self._data.__array_interface__)
        interface["data"] = (interface["data"][0], False)
        interface["version"] = 3
        return interface

    @property
    def real(self):
        return _wrap(self._data.real)

    @real.setter
    def real(self, value):
        self._data.real = _unwrap(value, host=True)

    @property
    def imag(self):
        return _wrap(self._data.imag) if self.dtype.kind == "c" else _wrap(np.zeros_like(self._data))

    @imag.setter
    def imag(self, value):
        self._data.imag = _unwrap(value, host=True)

    # Copies to the host, and values Python reads ---------------------------------------------

    def get(self, stream=None, order="C", out=None):
        TRANSFERS[0] += 1
        return np.array(self._data, order=order)

    def item(self, *args):
        TRANSFERS[0] += 1
        return self._data.item(*args)

    def tolist(self):
        TRANSFERS[0] += 1
        return self._data.tolist()

    def _read(self, convert):
        TRANSFERS[0] += 1
        return convert(self._data)

    def __float__(self):
        return self._read(float)

    def __int__(self):
        return self._read(int)

    def __complex__(self):
        return self._read(complex)

    def __bool__(self):
        return self._read(bool)

    def __index__(self):
        if self.dtype.kind not in "iub" or self.ndim != 0:
            raise TypeError("only integer scalar arrays can be converted to a scalar index")
        return self._read(int)

    def __len__(self):
        return len(self._data)

    def __iter__(self):
        if self.ndim == 0:
            raise TypeError("iteration over a 0-d array")
        return (self[i] for i in range(len(self)))

    def __repr__(self):
        return f"device_array({np.array2string(self._data, separator=', ')}, dtype={self.dtype})"

    __str__ = __repr__

    def __hash__(self):
        raise TypeError("unhashable type: 'ndarray'")

    def __reduce__(self):
        return (_from_host, (self._data.copy(),))

    def __copy__(self):
        return self.copy()

    def __deepcopy__(self, memo):
        return self.copy()

    # Indexing -------------------------------------------------------------------------------

    def __getitem__(self, key):
        return _wrap(self._data[_index(key)])

    def __setitem__(self, key, value):
        self._data[_index(key)] = _unwrap(value, host=True)

    # Methods (those of NumPy's ndarray, computing on the device) ------------------------------

    def copy(self, order="C"):
        return _wrap(self._data.copy(order=order))

    def view(self, dtype=None):
        return _wrap(self._data.view() if dtype is None else self._data.view(dtype))

    def astype(self, dtype, order="K", casting=None, subok=None, copy=True):
        return _wrap(self._data.astype(dtype, order=order, copy=copy))

    def fill(self, value):
        self._data.fill(_unwrap(value))

    def conj(self):
        return conj(self)

    conjugate = conj

    def __getattr__(self, name):  # reshape, sum, transpose...: the namespace's function
        if name.startswith("_") or name not in _METHODS:
            raise AttributeError(f"'ndarray' object has no attribute {name!r}")
        method = getattr(self._data, name)

        def on_device(*args, **kwargs):
            kwargs, outs = _outs(kwargs)
            args = _unwrap(args, host=True)
            kwargs = {k: (v if k == "out" else _unwrap(v, True)) for k, v in kwargs.items()}
            return _wrap_result(method(*args, **kwargs), outs)

        return on_device


_METHODS = {"reshape", "transpose", "swapaxes", "ravel", "flatten", "squeeze", "sum", "prod",
            "mean", "var", "std", "max", "min", "argmax", "argmin", "cumsum", "cumprod", "dot",
            "nonzero", "clip", "round", "trace", "diagonal", "all", "any", "sort", "argsort",
            "take", "put", "repeat", "choose", "partition", "argpartition", "searchsorted",
            "ptp", "compress"}


def _binary(name, reflected=False):
    numpy_ufunc = getattr(np, name)

    def operator_(self, other):
        if getattr(type(other), "__array_ufunc__", 0) is None:
            return NotImplemented
        if type(other) is not ndarray and not isinstance(other, np.ndarray) \
                and getattr(type(other), "__array_ufunc__", None) is not None:
            return NotImplemented
        return numpy_ufunc(other, self) if reflected else numpy_ufunc(self, other)

    return operator_


def _inplace(name):
    numpy_ufunc = getattr(np, name)

    def operator_(self, other):
        if type(other) is not ndarray and not isinstance(other, np.ndarray) \
                and getattr(type(other), "__array_ufunc__", None) is not None:
            return NotImplemented
        return numpy_ufunc(self, other, out=self)

    return operator_


for _op, _ufunc in [("add", "add"), ("sub", "subtract"), ("mul", "multiply"),
                    ("truediv", "true_divide"), ("floordiv", "floor_divide"), ("mod", "remainder"),
                    ("pow", "power"), ("matmul", "matmul"), ("and", "bitwise_and"),
                    ("or", "bitwise_or"), ("xor", "bitwise_xor"), ("lshift", "left_shift"),
                    ("rshift", "right_shift")]:
    setattr(ndarray, f"__{_op}__", _binary(_ufunc))
    setattr(ndarray, f"__r{_op}__", _binary(_ufunc, reflected=True))
    setattr(ndarray, f"__i{_op}__", _inplace(_ufunc))
for _op, _ufunc in [("lt", "less"), ("le", "less_equal"), ("gt", "greater"),
                    ("ge", "greater_equal"), ("eq", "equal"), ("ne", "not_equal")]:
    setattr(ndarray, f"__{_op}__", _binary(_ufunc))
ndarray.__neg__ = lambda self: np.negative(self)
ndarray.__pos__ = lambda self: np.positive(self)
ndarray.__abs__ = lambda self: np.absolute(self)
ndarray.__invert__ = lambda self: np.invert(self)
ndarray.__divmod__ = lambda self, other: np.divmod(self, other)


def _from_host(data):
    return _wrap(data)


def asnumpy(a, stream=None, order="C", out=None):
    """The host copy of device array ``a`` (``a`` itself if it is a host array)."""
    if type(a) is ndarray:
        return a.get(order=order)
    return np.asarray(a, order=order)


def get_array_module(*args):
    """This module if any of ``args`` is a device array, else NumPy (``cupy.get_array_module``)."""
    return _this() if any(type(a) is ndarray for a in args) else np


_AS_STRIDED = np.lib.stride_tricks.as_strided


def as_strided(x, shape=None, strides=None):
    """The view of device array ``x``'s memory with ``shape`` and ``strides``."""
    return _wrap(_AS_STRIDED(x._data, shape, strides))


def _this():
    import sys

    return sys.modules[__name__]


def __getattr__(name):
    """Every other NumPy function and ufunc, on the device (made on first use)."""
    if name.startswith("__"):
        raise AttributeError(name)
    return getattr(_NUMPY, name)  # (cached there: not among this module's globals, where
    # a name such as ``any`` would hide Python's builtin from this module's own code)


_NUMPY = _Namespace(__name__, np)
linalg = _Namespace(__name__ + ".linalg", np.linalg)
fft = _Namespace(__name__ + ".fft", np.fft)
random = _Namespace(__name__ + ".random", np.random)
lib = types.SimpleNamespace(stride_tricks=types.SimpleNamespace(
    as_strided=as_strided,
    sliding_window_view=_device_function(np.lib.stride_tricks.sliding_window_view,
                                         "sliding_window_view")))
newaxis, pi, e, inf, nan = None, np.pi, np.e, np.inf, np.nan
float16, float32, float64, complex64, complex128 = (np.float16, np.float32, np.float64,
                                                    np.complex64, np.complex128)
int8, int16, int32, int64, intp, bool_, uint8 = (np.int8, np.int16, np.int32, np.int64, np.intp,
                                                 np.bool_, np.uint8)
dtype, finfo, iinfo, promote_types, errstate = (np.dtype, np.finfo, np.iinfo, np.promote_types,
                                                np.errstate)


def result_type(*arrays_and_dtypes):
    """NumPy's type promotion, device arrays taken by their dtypes (as ``cupy.result_type``)."""
    return np.result_type(*(a.dtype if type(a) is ndarray else a for a in arrays_and_dtypes))


def can_cast(from_, to, casting="safe"):
    return np.can_cast(from_.dtype if type(from_) is ndarray else from_, to, casting=casting)
conj = _NUMPY.conj


# SciPy's routines on the device (cupyx.scipy's layout) -----------------------------------------

SCIPY_ROUTINES = {
    "linalg": {"solve_triangular": ("a", "b"), "lu_factor": ("a",),
               "lu_solve": ("lu_and_piv", "b")},
    "special": {"logsumexp": ("a", "b")},
    "signal": {"lfilter": ("b", "a", "x", "zi"), "convolve": ("in1", "in2"),
               "fftconvolve": ("in1", "in2")},
    "ndimage": {"correlate": ("input", "weights"), "correlate1d": ("input", "weights"),
                "uniform_filter1d": ("input",), "convolve": ("input", "weights"),
                "gaussian_filter": ("input",), "uniform_filter": ("input",)},
}
"""The routines of ``xp.scipy``, by submodule, with their array parameters: a sample of those
cupyx.scipy has (its linalg has no ``solve``, ``cho_factor`` nor ``cho_solve``)."""


def _on_device(value):
    return value is None or type(value) is ndarray or (
        type(value) in (tuple, list) and all(type(v) is ndarray for v in value))


def _scipy_function(function, arrays, module_name):
    """SciPy's ``function`` on the device: its ``arrays`` parameters must be device arrays (a
    list, a number or a host array raises, as cupyx.scipy's functions index and compute with
    them as device arrays); it computes with SciPy on their data."""
    signature = inspect.signature(function)

    @functools.wraps(function)
    def on_device(*args, **kwargs):
        for name, value in signature.bind(*args, **kwargs).arguments.items():
            if name in arrays and not _on_device(value):
                raise _host_refused(value)
        args = _unwrap(args)
        kwargs = {k: _unwrap(v) for k, v in kwargs.items()}
        return _wrap_result(function(*args, **kwargs))

    on_device.__module__ = module_name
    del on_device.__wrapped__  # (not SciPy's function, to mutad: the device's)
    on_device.__signature__ = signature
    return on_device


def _scipy_namespace():
    import importlib

    scipy_ = types.ModuleType(__name__ + ".scipy", "SciPy on the device (cupyx.scipy's stand-in).")
    for sub, routines in SCIPY_ROUTINES.items():
        module = importlib.import_module("scipy." + sub)
        namespace = types.ModuleType(f"{scipy_.__name__}.{sub}")
        for name, arrays in routines.items():
            setattr(namespace, name, _scipy_function(getattr(module, name), arrays,
                                                     namespace.__name__))
        setattr(scipy_, sub, namespace)
        sys.modules[namespace.__name__] = namespace
    sys.modules[scipy_.__name__] = scipy_
    return scipy_


scipy = _scipy_namespace()
