"""Where an array's bytes live: its buffer, its address, and overlap questions.

This is the one module that reads data pointers and strides. A *buffer* here is the ndarray
whose identity keys a shadow: for an argument, the array that owns the memory (the root of
NumPy's ``.base`` chain); for a result mutad creates, the result itself. A view's shadow is the
same view, by byte offset and strides, of its buffer's shadow.
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


def flat_shadow(buffer):
    """A zero-filled 1-d array covering ``buffer``'s bytes, with the offset of its first byte.

    Views of ``buffer`` map into it by byte offset, whatever the buffer's strides.
    """
    low, high = byte_bounds(buffer)
    itemsize = buffer.dtype.itemsize
    if any(stride % itemsize for stride in buffer.strides):
        from .errors import UnsupportedOperationError

        raise UnsupportedOperationError(
            "an array whose strides are not multiples of its item size (a view of a structured "
            "or reinterpreted buffer) cannot be traced; pass a copy of it instead.")
    return np.zeros((high - low) // itemsize, buffer.dtype), low


def view_into(flat, low, a):
    """The view of ``flat`` that ``a`` is of the memory whose first byte is at ``low``."""
    return np.ndarray(a.shape, a.dtype, flat, address(a) - low, a.strides)
