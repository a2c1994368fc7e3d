"""Where an array's bytes live: its buffer, its address, and overlap questions.

This is the one module that reads data pointers and strides. A *buffer* is the memory behind
traced arrays: for an argument, that of the array that owns it (the root of NumPy's ``.base``
chain); for a result mutad creates, the result's own.
"""

import numpy as np
from numpy.lib.array_utils import byte_bounds


def address(a):
    """The address of ``a``'s first element."""
    return a.__array_interface__["data"][0]


def owner(a):
    """The ndarray at the root of ``a``'s ``.base`` chain: the array that owns its memory."""
    while isinstance(a.base, np.ndarray):
        a = a.base
    return a


def same_region(a, b):
    """True when ``a`` and ``b`` are the same elements of the same memory, in the same order."""
    return a is b or (
        a.shape == b.shape and a.strides == b.strides and a.dtype == b.dtype
        and address(a) == address(b)
    )


def spans(a, base):
    """True when contiguous ``a`` covers exactly the memory of ``base``."""
    return (a.flags.c_contiguous and a.nbytes == base.nbytes and a.dtype == base.dtype
            and address(a) == address(base))


def byte_span(array):
    """``(low, span)``: the address of ``array``'s lowest byte, and how many elements of its
    dtype its memory spans, whatever its strides."""
    itemsize = array.dtype.itemsize
    if array.flags.c_contiguous or array.flags.f_contiguous:
        return address(array), array.size
    low, high = byte_bounds(array)
    if any(stride % itemsize for stride in array.strides):
        from .errors import UnsupportedOperationError

        raise UnsupportedOperationError(
            "an array whose strides are not multiples of its item size (a view of a structured "
            "or reinterpreted buffer) cannot be traced; pass a copy of it instead.")
    return low, (high - low) // itemsize
