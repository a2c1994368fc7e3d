"""Where an array's bytes live: its buffer, its address, and overlap questions.

This is the one module that reads data pointers and strides. A *buffer* is the memory behind
traced arrays: for an argument, that of the array that owns it (the root of NumPy's ``.base``
chain); for a result mutad creates, the result's own.

Every question takes a plain array or a differentiated one (traced, dual), whose memory is that
of the plain array it wraps, at any depth of nesting.
"""

import functools

import numpy as np
from numpy.lib.array_utils import byte_bounds

from . import devices
from .levels import WRAPPERS

NDARRAY = np.ndarray
"""``np.ndarray`` as a name of a module's own, for the checks made several times per operation
(``type(y) is NDARRAY``): NumPy's module defines ``__getattr__``, so Python does not specialize
the lookup of ``np.ndarray``, and each costs a search of the module's names."""


def memory(a):
    """The plain ndarray whose memory ``a`` is: ``a`` itself, or the one a wrapper wraps."""
    while type(a) in WRAPPERS:
        a = a.value
    return a


def wrapped(a):
    """Whether ``a`` is an array some differentiation traces (rather than a plain value)."""
    return type(a) in WRAPPERS


def weaken(y, weak=True):
    """Mark ``y``, a new traced or dual value made by Python's arithmetic on weak values (or by
    ``math``'s functions, which give Python floats), as standing for a Python number, at every
    level it belongs to (its value, an enclosing level's, is handed to that level's NumPy
    calls); with ``weak=False``, as standing for NumPy's scalar (what ``np.float32(v)`` makes
    of a Python number ``v``)."""
    while type(y) in WRAPPERS and y.dtype.kind in "fc" \
            and memory(y).ndim == 0:
        y.weak = weak
        y = y.value


def strided(flat, shape, dtype, offset, strides):
    """The view of one-dimensional ``flat`` at byte ``offset`` with ``shape`` and ``strides``;
    of a traced ``flat``, the traced view (the shadows of nested differentiations are traced
    by the outer one)."""
    if wrapped(flat):
        return flat.restrided(shape, dtype, offset, strides)
    if type(flat) is not np.ndarray:
        return devices.strided(flat, shape, dtype, offset, strides)
    if 0 in shape:  # an empty view may sit at the end of the buffer: it reads no byte
        offset = 0
    return np.ndarray(shape, dtype, flat, offset, strides)


def owner_view(a):
    """The array over all of the memory ``a`` views, at ``a``'s level: the owner of a plain
    array; of a traced or dual one, the same-level wrapper of its value's owner view."""
    return a.owner_view() if wrapped(a) else owner(a)


def view_as(x, y):
    """The view of traced or dual ``x``'s memory that the plain array ``y``, a view of the
    memory of ``x``'s value's owner, is (``np.ndarray(buffer=x)``, a run of ``np.nditer``,
    records viewed as floats), at ``x``'s level; None where that memory is not laid out in
    order, so that no view of it is ``y``."""
    whole = owner_view(x)
    if not memory(whole).flags.c_contiguous:
        flat = whole.reshape(-1, order="A")  # the owner's memory in order: a view
        if not views(memory(flat), memory(whole)):
            return None
        whole = flat
    return whole.restrided(y.shape, y.dtype, address(y) - address(whole), y.strides)


def address(a):
    """The address of ``a``'s first element."""
    if type(a) is not NDARRAY:  # (a plain array, the common case, asked first)
        a = memory(a)
    if type(a) is NDARRAY and _data_at is not None:
        return _data_at(id(a) + _DATA_OFFSET).value
    if devices.is_device(a):
        return devices.address(a)
    return a.__array_interface__["data"][0]


def _data_pointer_reader():
    """How :func:`address` reads an ndarray's data pointer directly: the first field after the
    object's header in NumPy's array struct (``PyArrayObject_fields.data``), read through
    ``ctypes`` at a tenth of the cost of ``__array_interface__``, which builds a dictionary
    (and the engine asks for addresses several times per operation). Only where reading it
    so gives ``__array_interface__``'s address for every probe (CPython, whose ``id`` is the
    object's address, and NumPy's layout); None otherwise, and the dictionary is read."""
    try:
        import ctypes
    except ImportError:  # an interpreter without ctypes
        return None
    if ctypes.sizeof(ctypes.c_size_t) != ctypes.sizeof(ctypes.c_void_p):
        return None
    read = ctypes.c_size_t.from_address
    base = np.arange(24.0).reshape(4, 6)
    probes = [base, base[1:, ::-2], base[2, 3:], base.T, np.zeros(()), np.empty(0),
              np.arange(5, dtype=np.complex64)[1:].imag]
    try:
        if all(read(id(p) + _DATA_OFFSET).value == p.__array_interface__["data"][0]
               for p in probes):
            return read
    except (ValueError, OverflowError):  # no such address
        pass
    return None


_DATA_OFFSET = object.__basicsize__
_data_at = _data_pointer_reader()


def owner(a):
    """The ndarray at the root of ``a``'s ``.base`` chain: the array that owns its memory.
    ``as_strided`` (and ``sliding_window_view``, built on it) puts an object that is not an
    array in the chain, holding the array it views as its own ``base``."""
    if type(a) is not NDARRAY:
        a = memory(a)
        if devices.is_device(a):  # a device library's views name their owner as NumPy's do
            base = a.base
            return a if base is None else owner(base)
    while True:
        # (ndarray's own base: a subclass's may name the owner otherwise, as a stand-in's of
        # an array made before names the owner's stand-in)
        base = a.base if type(a) is NDARRAY or not isinstance(a, NDARRAY) \
            else NDARRAY.base.__get__(a)
        if type(base) is not NDARRAY and not isinstance(base, NDARRAY):
            if base is None:  # (the common end, answered before getattr's AttributeError)
                return a
            base = getattr(base, "base", None)
            if not isinstance(base, NDARRAY):
                return a
        a = base


def itself(y, x):
    """Whether ``y`` is ``x``'s very array: ``x`` itself, or another wrapper of the plain array
    ``x`` wraps (a function that returns its argument, as ``np.atleast_1d`` of a 1-d array does,
    returns a new dual of it when a forward differentiation runs inside a reverse one)."""
    return y is x or memory(y) is memory(x)


def views(y, x):
    """Whether the result ``y`` views the memory of ``x`` (rather than being fresh)."""
    if type(y) is not np.ndarray:
        y = memory(y)
        if not isinstance(y, np.ndarray) and not devices.is_device(y):
            return False
    return y.base is not None and owner(y) is owner(x)


def _writeable_bit():
    probe = np.empty(1)
    flags = probe.flags.num
    probe.flags.writeable = False
    return flags & ~probe.flags.num


WRITEABLE = _writeable_bit()
"""NumPy's WRITEABLE bit of ``ndarray.flags.num``, found by clearing it on a probe."""


def writeable(a):
    """``a.flags.writeable``, read without the FutureWarning NumPy gives when that flag of an
    ``np.broadcast_arrays`` result is read (the flag itself is unchanged)."""
    if type(a) is not NDARRAY:
        a = memory(a)
        if devices.is_device(a):  # a device library has no read-only arrays: one whose
            return not overlaps_itself(a)  # elements share memory (a broadcast) is taken as one
    return a.flags.num & WRITEABLE != 0


def made_writable(a):
    """Make ``a`` writable again, an array of the caller's that was writable before mutad made
    it read-only for a while (while a differentiation runs, to see writes by another route).
    NumPy refuses ("cannot set WRITEABLE flag to True of this array") where the arrays ``a``
    views lead to an object that is no array and exports no writable buffer: ``as_strided``'s
    and ``sliding_window_view``'s results, an ``__array_interface__`` object's array. There its
    flag is set back in NumPy's array struct, as it was before (``_flags_field``)."""
    try:
        a.flags.writeable = True
    except ValueError:
        if _flags_at is None or type(a) is not NDARRAY and not isinstance(a, NDARRAY):
            raise
        _flags_at(id(a) + _FLAGS_OFFSET).value |= WRITEABLE


def _flags_field():
    """Where :func:`made_writable` finds an ndarray's flags: the offset of the ``int`` field of
    NumPy's array struct (``PyArrayObject_fields.flags``) that holds ``flags.num``, for every
    probe of several different flags; (None, None) where no offset does (another interpreter
    or layout), and NumPy's refusal stands."""
    try:
        import ctypes
    except ImportError:  # an interpreter without ctypes
        return None, None
    read = ctypes.c_int.from_address
    base = np.arange(24.0).reshape(4, 6)
    frozen = base[1:, ::2].copy()
    frozen.flags.writeable = False
    probes = [base, base[1:, ::-2], base.T, frozen, np.zeros(()), np.empty(0, np.int8),
              np.lib.stride_tricks.as_strided(base, (2, 2), (8, 8))]
    if _data_at is None:  # (not CPython's ids, or not NumPy's layout: no direct access)
        return None, None
    for offset in range(_DATA_OFFSET, _DATA_OFFSET + 128, ctypes.sizeof(ctypes.c_int)):
        if all(read(id(p) + offset).value == p.flags.num for p in probes):
            return read, offset
    return None, None


_flags_at, _FLAGS_OFFSET = _flags_field()


def stands_for_scalar(x):
    """Whether traced or dual ``x`` stands for a NumPy scalar (a reduction's result, ``x[i]``, a
    float argument): a 0-d array of its own, read-only, as NumPy's scalars are immutable. An
    augmented assignment to it makes a new value, as Python does for immutable numbers, so
    another name for the old value keeps it."""
    value = memory(x)
    return value.ndim == 0 and value.base is None and not writeable(value)  # (a device's: no)


WARN_ON_WRITE = 0x80000000
"""NumPy's NPY_ARRAY_WARN_ON_WRITE bit of ``ndarray.flags.num``: set on the results of
``np.broadcast_arrays``, writeable for now, which warn when written (their elements may share
memory) and are to become read-only."""


def writes_freely(a):
    """Whether ``a`` (a plain array) can be written without a warning: writeable, and not a
    result of ``np.broadcast_arrays``. mutad writes into an array it did not make only then."""
    if type(a) is not np.ndarray and devices.is_device(memory(a)):
        return writeable(a)
    num = a.flags.num
    return num & WRITEABLE != 0 and num & WARN_ON_WRITE == 0


def may_overlap(a, b):
    a, b = memory(a), memory(b)
    if type(a) is np.ndarray and type(b) is np.ndarray:  # NumPy's own: no dispatch
        return _may_share_memory(a, b)
    return np.may_share_memory(a, b)  # a device library's, through NumPy's protocol


_may_share_memory = getattr(np.may_share_memory, "_implementation", np.may_share_memory)


def may_share(a, b, work=64):
    """Whether the arrays ``a`` and ``b`` may share a byte, told more sharply than by
    ``may_overlap``'s bounds: where the bounds of two NumPy arrays meet, NumPy's exact test,
    given at most ``work`` (an answer it cannot reach within it is taken as sharing), so that
    two columns of one matrix, or interleaved elements, lie apart. A device library's arrays:
    their bounds (its namespace may have no exact test)."""
    a, b = memory(a), memory(b)
    if not (isinstance(a, np.ndarray) and isinstance(b, np.ndarray)):
        return np.may_share_memory(a, b)
    if not _may_share_memory(a, b):
        return False
    try:
        return _shares_memory(a, b, max_work=work)
    except np.exceptions.TooHardError:
        return True


_shares_memory = getattr(np.shares_memory, "_implementation", np.shares_memory)


def same_region(a, b):
    """True when ``a`` and ``b`` are the same elements of the same memory, in the same order."""
    return a is b or (
        a.shape == b.shape and a.strides == b.strides and a.dtype == b.dtype
        and address(a) == address(b)
    )


def overlaps_itself(a):
    """Whether two elements of ``a`` may share bytes: a broadcast (stride 0) or a sliding
    window view. A shadow of such a view cannot be added into directly, nor written through."""
    a = memory(a)
    return self_overlapping(a.shape, a.strides, a.dtype.itemsize)


@functools.lru_cache(maxsize=4096)
def self_overlapping(shape, strides, itemsize):
    """``overlaps_itself`` from a layout. Sufficient test, so True may be conservative: taken
    by increasing stride, each axis must step past all the bytes the axes before it span."""
    if 0 in shape:  # no element: none shares bytes with another (NumPy gives them stride 0)
        return False
    reach = itemsize
    for stride, n in sorted((abs(s), n) for n, s in zip(shape, strides) if n > 1):
        if stride < reach:
            return True
        reach += (n - 1) * stride
    return False


def element_indices(shape, strides, offset, itemsize):
    """The index of each element of a view into the one-dimensional array of its memory
    (``offset`` bytes from its start), as an array of the view's shape."""
    index = np.full(shape, offset // itemsize, dtype=np.intp)
    for axis, (n, stride) in enumerate(zip(shape, strides)):
        step = np.arange(n, dtype=np.intp) * (stride // itemsize)
        index += step.reshape((n,) + (1,) * (len(shape) - axis - 1))
    return index


def spans(a, base):
    """True when contiguous ``a`` covers exactly the memory of ``base``."""
    return spanned_from(a, base) is not None


def spanned_from(a, base):
    """The address of ``a``'s first byte when contiguous ``a`` covers exactly the memory of
    ``base`` (read once: a buffer laid out as ``a`` records it), else None."""
    if type(a) is not NDARRAY or type(base) is not NDARRAY:  # (plain arrays: asked first)
        a, base = memory(a), memory(base)
    if a.flags.c_contiguous and a.nbytes == base.nbytes and a.dtype == base.dtype:
        at = address(a)
        if at == address(base):
            return at
    return None


def byte_span(array):
    """``(low, span)``: the address of ``array``'s lowest byte, and how many elements of its
    dtype its memory spans, whatever its strides."""
    array = memory(array)
    itemsize = array.dtype.itemsize
    if array.flags.c_contiguous or array.flags.f_contiguous:
        return address(array), array.size
    low, high = byte_bounds(array) if type(array) is np.ndarray else devices.byte_bounds(array)
    if any(stride % itemsize for stride in array.strides):
        from .errors import UnsupportedOperationError

        raise UnsupportedOperationError(
            "an array whose strides are not multiples of its item size (a view of a structured "
            "or reinterpreted buffer) cannot be traced; pass a copy of it instead.")
    return low, (high - low) // itemsize


def real_part_if(like, g):
    """``g`` as the (co)tangent of a value of ``like``'s dtype: its real part where ``like``
    is real and ``g`` complex. A complex cotangent is dL/dx + i dL/dy (docs/guide.md, "Complex
    numbers and the FFT"), so its real part is the derivative along the only axis a real value
    moves on; a complex tangent's real part is the real value's change. Of a value computed
    with an array of references (``x * np.array([2**70, 1])``, whose product holds Python
    floats), ``g`` holds Python numbers: it is taken as the array of numbers NumPy makes of
    them."""
    if type(g) is np.ndarray and g.dtype.hasobject and like.dtype.kind in "fc":
        g = np.array(g.tolist())
    if like.dtype.kind == "f" and getattr(g, "dtype", None) is not None and g.dtype.kind == "c":
        return g.real
    return g
