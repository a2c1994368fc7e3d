"""``numpy.ma`` of differentiated values: masked arrays whose data a differentiation follows.

NumPy's ``MaskedArray`` is an ndarray subclass that owns its data, so it cannot hold a traced
array: ``np.ma.masked_array(x, mask=...)`` of a traced ``x`` converted it. While a
differentiation runs, ``MaskedArray.__new__`` (``np.ma.masked_array``, ``np.ma.array``,
``np.ma.MaskedArray``) and the functions that make or read masked arrays (``masked_where``,
``masked_invalid``, ``masked_less``, ..., ``np.ma.sum``, ``np.ma.mean``, ``np.ma.filled``,
...) give a :class:`Masked` where a value carrying a derivative is among their arguments: the
traced data beside the mask, a plain boolean array or ``np.ma.nomask`` (a traced boolean one
while a replay records, which it guards).

Each operation is ``numpy.ma``'s own code path written on the data and the mask, so the
values (the data under the mask too) are NumPy's bit for bit and the derivative is that of
what NumPy computed: the arithmetic operators (``_MaskedBinaryOperation``: the first operand's
data where either is masked; division as ``_DomainedBinaryOperation``, masking divisions by
zero and results that are not finite; ``**`` as ``np.ma.power``), NumPy's ufuncs called on a
masked array (``MaskedArray.__array_wrap__``: the inputs' masks and the ufunc's domain),
``sum``, ``mean``, ``var``, ``std``, ``prod``, ``ptp``, ``round``, ``clip``, ``trace``,
``take``, ``sort``, ``count``, ``filled``, ``compressed``, ``tolist``, ``np.ma.median``
(of all the elements NumPy's median of the unmasked ones, alike to the bit; along an axis
np.ma's code), np.ma's functions of the data and the mask apart (``stack``, ``atleast_2d``,
...), ``maximum``, ``minimum``, ``where``, ``dot``, ``inner``, ``choose``, and the
attributes ``data``, ``mask``, ``shape``, ``ndim``, ``size``, ``dtype``, ``fill_value``.
``+=``, ``-=``, ``*=`` and ``/=`` update the data in place as ``MaskedArray``'s do; indexing,
writes (``m[key] = v``, ``m.mask = ...``) and comparisons (masked arrays of booleans) are
``MaskedArray``'s, sharing masks where NumPy's share them. What is not written here (``**=``,
other NumPy functions, complex data) raises ``UnsupportedOperationError`` saying to compute
with ``m.filled(v)`` or ``m.compressed()``, never a value without its derivative.
"""

import functools
import sys
from builtins import type as builtins_type
import warnings

import numpy as np
from numpy.lib.array_utils import normalize_axis_index
from numpy.ma import core as _ma

from ..core.allocation import by_user_code, from_user, holds_derivative
from ..core.debug import caller, warn_at
from ..core.tape import source_line
from ..core.errors import UnsupportedOperationError
from ..core.registry import defmethod, defroute
from ..core.levels import CARRIERS
from ..core.views import memory, owner, stands_for_scalar, wrapped
from ..engines.arraylike import settled

NOMASK = np.ma.nomask
FIX = ("Compute with m.filled(value) (the data, masked elements replaced) or m.compressed() "
       "(the elements kept), which mutad differentiates, or with the data and the mask apart: "
       "np.where(mask, 0.0, x).")


class MissingAttributeError(UnsupportedOperationError, AttributeError):
    """An attribute of MaskedArray that :class:`Masked` does not have: refused, and an
    AttributeError to ``hasattr``."""


FOLLOWED = ("mutad follows np.ma's constructors, indexing, writes, comparisons, arithmetic, "
            "ufuncs, sum, mean, var, std, max, min, count, average, median, "
            "anom, cumsum, cumprod, prod, ptp, round, clip, diagonal, trace, take, sort, "
            "concatenate, stack (and vstack, hstack, ...), atleast_1d (2d, 3d), diagflat, "
            "apply_along_axis, apply_over_axes, expand_dims, flat, unique, "
            "diff, maximum, minimum (and their reduce), where, allclose, dot, inner, choose, "
            "cov, corrcoef, np.ma.multiply.outer (and add's, ...), ravel, flatten, view, "
            "reshape, transpose (T), squeeze, conj, argsort, argmin, argmax, copy, "
            "filled, compressed, tolist, set_fill_value, shrink_mask, harden_mask and "
            "soften_mask. ")


def _refuse(what):
    raise UnsupportedOperationError(
        f"{what} of a masked array of differentiated values: " + FOLLOWED + FIX)


def _data(a):
    """``np.ma.getdata``: a masked array's data; a traced array as it is; else NumPy's array
    (a Python number as a 0-d float64 array, as np.ma converts it)."""
    if type(a) is Masked:
        return a.data
    if wrapped(a):
        return a
    if isinstance(a, np.ma.MaskedArray):
        return a.data
    return np.array(a, copy=None, subok=True)


def _data_of_masked(a):
    """A masked array's data (NumPy's masked array's too), anything else as it is."""
    return _data(a) if type(a) is Masked or isinstance(a, np.ma.MaskedArray) else a


def _mask(a):
    """``np.ma.getmask``: the mask, or ``nomask``."""
    if type(a) is Masked:
        return a._mask
    return np.ma.getmask(a) if isinstance(a, np.ma.MaskedArray) else NOMASK


def _hard_of(*operands):
    """Whether a result's mask is hard: as the first masked operand's (``_update_from``)."""
    for a in operands:
        if type(a) is Masked:
            return a._hard
        if isinstance(a, np.ma.MaskedArray):
            return a.hardmask
    return False


def _mask_array(a):
    """``np.ma.getmaskarray``: the mask as a full boolean array."""
    m = _mask(a)
    return np.zeros(np.shape(_data(a)), bool) if m is NOMASK else m


def _mask_or(m1, m2):
    """``np.ma.mask_or`` of two masks (each ``nomask`` or boolean), shrunk as NumPy's: ``nomask``
    where nothing is masked (an empty mask too, whose ``all`` would mask a sum)."""
    if m1 is NOMASK:
        return m2 if m2 is NOMASK else _shrunk(m2)
    if m2 is NOMASK or m1 is m2:
        return _shrunk(m1)
    return _shrunk(np.logical_or(m1, m2))


def _shrunk(m):
    """``np.ma.core._shrink_mask``: ``nomask`` for a mask with nothing masked."""
    return NOMASK if not np.any(m) else m


def _comparison(compare):
    """``MaskedArray``'s comparison (``_comparison``): the data's, a masked array of
    booleans masked where either operand is (there, for == and !=, whether both are)."""
    def compared(self, other):
        if other is None or isinstance(other, (str, type)):
            return NotImplemented  # (Python's own answer: not the same object)
        smask, omask = self._mask, _mask(other)
        mask = _mask_or(smask, omask)
        if mask is smask or mask is omask:  # (np.ma.mask_or(..., copy=True))
            mask = mask if mask is NOMASK else np.copy(mask)
        check = compare(self.data, _data(other))
        if not np.ndim(check):
            return np.ma.masked if mask is not NOMASK and bool(mask) else check
        if mask is not NOMASK:
            if compare in (np.equal, np.not_equal):
                check = _where(mask, compare(smask, omask), check)
            if np.shape(mask) != np.shape(check):
                mask = np.broadcast_to(mask, np.shape(check)).copy()
        fill = self._fill_value
        if fill is not None:  # (NumPy's cast to a boolean, the default where it fails)
            try:
                fill = _ma._check_fill_value(fill, np.bool_)
            except (TypeError, ValueError):
                fill = _ma._check_fill_value(None, np.bool_)
        return Masked(check, mask, fill, self._hard)
    return compared


class Masked:
    """A masked array of differentiated values (the module's docstring)."""

    __array_priority__ = 16  # above MaskedArray's: its operators defer to this one's
    takes_over_operations = True  # over traced operands' (engines.arraylike.takes_over)
    __slots__ = ("data", "_mask", "_fill_value", "_hard")

    def __init__(self, data, mask=NOMASK, fill_value=None, hard=False):
        if np.dtype(data.dtype).kind not in "fb":  # (booleans: a comparison's result)
            _refuse(f"np.ma of {data.dtype} values (mutad follows masked arrays of real "
                    "floats)")
        self.data, self._mask, self._fill_value, self._hard = data, mask, fill_value, hard

    # isinstance(m, np.ma.MaskedArray) holds, as of NumPy's (user code branches on it)
    __class__ = property(lambda self: np.ma.MaskedArray)
    shape = property(lambda self: np.shape(self.data))
    ndim = property(lambda self: np.ndim(self.data))
    size = property(lambda self: np.size(self.data))
    dtype = property(lambda self: self.data.dtype)

    def _set_mask(self, mask):
        """``MaskedArray.__setmask__``: written into the mask in place (other masked arrays
        sharing it see it, as NumPy's do), made where there is none; a hard mask is only
        joined (``|=``), never unmasks."""
        if mask is np.ma.masked:
            mask = True
        if mask is self._mask:  # (m.mask |= v: written already)
            return
        if self._mask is NOMASK:
            if mask is NOMASK:
                return
            self._mask = np.zeros(self.shape, bool)
        if self._hard:
            current = self._mask
            current |= mask
            return
        if np.size(mask) not in (1, self.size):
            _refuse("Setting the mask to one of another size (m.mask = ...)")
        self._mask[...] = np.reshape(mask, self.shape) if np.size(mask) > 1 else mask

    mask = property(lambda self: np.False_ if self._mask is NOMASK else self._mask, _set_mask)
    _data = property(lambda self: self.data)  # (np.ma's own code reads it: compress_nd)

    def _set_flat(self, value):
        self.ravel()[:] = value  # (MaskedArray's: written where ravel is a view)

    flat = property(lambda self: _Flat(self), _set_flat)
    hardmask = property(lambda self: self._hard)

    def harden_mask(self):
        """``MaskedArray.harden_mask``: writes no longer unmask an element."""
        self._hard = True
        return self

    def soften_mask(self):
        self._hard = False
        return self

    @property
    def fill_value(self):
        if self._fill_value is None:  # (kept, as NumPy keeps it: results then take it)
            self._fill_value = _ma._check_fill_value(None, self.dtype)
        return self._fill_value[()]  # (NumPy's scalar)

    @fill_value.setter
    def fill_value(self, value):
        self._fill_value = _ma._check_fill_value(value, self.dtype)

    # shapes: views of the data and of the mask, as MaskedArray's

    def ravel(self, order="C"):
        mask = self._mask
        return Masked(np.ravel(self.data, order), mask if mask is NOMASK else
                      np.reshape(np.ravel(mask, order), (self.size,)), self._fill_value,
                      self._hard)

    def conj(self):
        """``MaskedArray.conj``: np.conjugate's (of real data, the data)."""
        return _wrapped_ufunc(np.conjugate, (self,))

    conjugate = conj

    def squeeze(self, axis=None):
        """``MaskedArray.squeeze``: the data's and the mask's."""
        m = self._mask
        return Masked(np.squeeze(self.data, axis), m if m is NOMASK else np.squeeze(m, axis),
                      self._fill_value, self._hard)

    def reshape(self, *shape, order="C"):
        mask = self._mask
        return Masked(self.data.reshape(*shape, order=order),
                      mask if mask is NOMASK else mask.reshape(*shape, order=order),
                      self._fill_value, self._hard)

    def transpose(self, *axes):
        mask = self._mask
        return Masked(self.data.transpose(*axes),
                      mask if mask is NOMASK else mask.transpose(*axes), self._fill_value,
                      self._hard)

    T = property(transpose)

    def argsort(self, axis=np._NoValue, kind=None, order=None, endwith=True, fill_value=None,
                *, stable=None):
        """``MaskedArray.argsort``: of the data, the masked elements filled to sort last
        (``endwith``) or first; the axis by default NumPy's (``_deprecate_argsort_axis``)."""
        if stable is not None:
            raise ValueError("`stable` parameter is not supported for masked arrays.")
        if axis is np._NoValue:
            axis = _ma._deprecate_argsort_axis(self)
        if fill_value is None:
            like = np.empty(0, self.dtype)
            fill_value = (np.nan if self.dtype.kind == "f" else _ma.minimum_fill_value(like)) \
                if endwith else _ma.maximum_fill_value(like)
        return np.argsort(self.filled(fill_value), axis=axis, kind=kind, order=order)

    def argmin(self, axis=None, fill_value=None, out=None, *, keepdims=np._NoValue):
        """``MaskedArray.argmin``: of the data, the masked elements filled with the largest
        value of the dtype (NumPy's ``minimum_fill_value``), so that none is the least; an
        index array, NumPy's (not a masked one)."""
        return self._position(np.argmin, _ma.minimum_fill_value, axis, fill_value, out,
                              keepdims)

    def argmax(self, axis=None, fill_value=None, out=None, *, keepdims=np._NoValue):
        """``MaskedArray.argmax``: as ``argmin``, the masked elements filled with the least."""
        return self._position(np.argmax, _ma.maximum_fill_value, axis, fill_value, out,
                              keepdims)

    def _position(self, func, filler, axis, fill_value, out, keepdims):
        if fill_value is None:
            fill_value = filler(np.empty(0, self.dtype))
        keepdims = False if keepdims is np._NoValue else bool(keepdims)
        return func(self.filled(fill_value), axis, out=out, keepdims=keepdims)

    def copy(self, order="C"):
        """``MaskedArray.copy``: the data and the mask copied."""
        mask = self._mask
        return Masked(np.copy(self.data, order=order),
                      mask if mask is NOMASK else np.copy(mask, order=order), self._fill_value,
                      self._hard)

    def shrink_mask(self):
        """``MaskedArray.shrink_mask``: ``nomask`` where nothing is masked."""
        self._mask = _shrunk(self._mask) if self._mask is not NOMASK else NOMASK
        return self

    def cumsum(self, axis=None, dtype=None, out=None):
        """``MaskedArray.cumsum``: of the data with the masked elements 0, masked where this
        is (a mask of its own), of the default fill value (a view of plain data's)."""
        return self._accumulated(np.cumsum, 0, axis, dtype, out, "cumsum")

    def cumprod(self, axis=None, dtype=None, out=None):
        """``MaskedArray.cumprod``: as ``cumsum``, the masked elements 1."""
        return self._accumulated(np.cumprod, 1, axis, dtype, out, "cumprod")

    def _accumulated(self, accumulate, neutral, axis, dtype, out, name):
        _no_out(name, out)
        mask = self._mask
        result = accumulate(self.filled(neutral), axis=axis, dtype=dtype)
        if mask is not NOMASK and np.shape(result) != self.shape:
            mask = np.reshape(mask, np.shape(result))  # (flattened where axis is None)
        return Masked(result, mask if mask is NOMASK else np.copy(mask))

    def unshare_mask(self):
        """``MaskedArray.unshare_mask``: a mask of its own (a copy, as NumPy makes of a shared
        one; the copy is harmless where it was not shared)."""
        if self._mask is not NOMASK:
            self._mask = np.copy(self._mask)
        return self

    def __len__(self):
        return len(self.data)

    def __repr__(self):
        return f"Masked(data={self.data!r}, mask={self.mask!r})"

    # reading -------------------------------------------------------------------------------

    def filled(self, fill_value=None):
        m = self._mask
        if m is NOMASK or not np.any(m):
            return self.data
        if wrapped(fill_value):  # (m.filled(m.mean()): _check_fill_value's cast, followed)
            fill = fill_value if fill_value.dtype == self.dtype else fill_value.astype(
                self.dtype)
            return _where(m, fill, self.data)
        fill = self.fill_value if fill_value is None else _ma._check_fill_value(
            fill_value, self.dtype)
        return _where(m, np.asarray(fill, self.dtype), self.data)

    def compressed(self):
        data = np.ravel(self.data)
        if self._mask is not NOMASK:
            data = data[np.logical_not(np.ravel(self._mask))]
        return data

    def count(self, axis=None, keepdims=np._NoValue):
        kwargs = {} if keepdims is np._NoValue else {"keepdims": keepdims}
        if self._mask is NOMASK:  # MaskedArray.count's own arithmetic on the shape
            return np.ma.MaskedArray.count(np.ma.masked_array(np.empty(self.shape)), axis,
                                           **kwargs)
        return np.sum(np.logical_not(self._mask), axis=axis, dtype=np.intp, **kwargs)

    # reductions ----------------------------------------------------------------------------

    def sum(self, axis=None, dtype=None, out=None, keepdims=np._NoValue):
        return self._reduced(np.sum, 0, axis, dtype, out, keepdims)

    def prod(self, axis=None, dtype=None, out=None, keepdims=np._NoValue):
        """``MaskedArray.prod``: as ``sum``, the masked elements 1."""
        return self._reduced(np.prod, 1, axis, dtype, out, keepdims)

    def _reduced(self, reduce, neutral, axis, dtype, out, keepdims):
        """``MaskedArray.sum`` or ``.prod``: of the data with the masked elements ``neutral``,
        masked where every element reduced is."""
        _no_out(reduce.__name__, out)
        kwargs = {} if keepdims is np._NoValue else {"keepdims": keepdims}
        m = self._mask
        newmask = NOMASK if m is NOMASK else np.all(m, axis=axis, **kwargs)
        result = reduce(self.filled(neutral), axis, dtype=dtype, **kwargs)
        if np.ndim(result):
            return Masked(result, newmask, self._fill_value)
        return np.ma.masked if newmask is not NOMASK and bool(newmask) else result

    def mean(self, axis=None, dtype=None, out=None, keepdims=np._NoValue):
        _no_out("mean", out)
        kwargs = {} if keepdims is np._NoValue else {"keepdims": keepdims}
        if self._mask is NOMASK:
            result = np.mean(self.data, axis=axis, dtype=dtype, **kwargs)
            return Masked(result, NOMASK, self._fill_value, self._hard) if np.ndim(result) \
                else result
        dsum = self.sum(axis=axis, dtype=dtype, **kwargs)
        cnt = self.count(axis=axis, **kwargs)
        if np.shape(cnt) == () and cnt == 0:
            return np.ma.masked
        return _divide(_binary(np.multiply, dsum, 1.0), cnt)

    def var(self, axis=None, dtype=None, out=None, ddof=0, keepdims=np._NoValue):
        _no_out("var", out)
        kwargs = {} if keepdims is np._NoValue else {"keepdims": keepdims}
        if self._mask is NOMASK:
            result = np.var(self.data, axis=axis, dtype=dtype, ddof=ddof, **kwargs)
            return Masked(result, NOMASK, self._fill_value, self._hard) if np.ndim(result) \
                else result
        cnt = self.count(axis=axis, **kwargs) - ddof
        danom = _binary(np.subtract, self, self.mean(axis, dtype, keepdims=True))
        # danom *= danom (MaskedArray.__imul__): 1 for the factor where danom is masked
        factor = _where(danom._mask, 1.0, danom.data)
        danom = Masked(danom.data * factor, danom._mask, danom._fill_value)
        dvar = _divide(danom.sum(axis, **kwargs), cnt)
        if np.ndim(_data(dvar)):
            mask = _mask_or(np.all(self._mask, axis=axis, **kwargs), cnt <= 0)
            return Masked(_data(dvar), mask, self._fill_value, self._hard)
        return dvar

    def max(self, axis=None, out=None, fill_value=None, keepdims=np._NoValue):
        return self._extreme(np.max, _ma.maximum_fill_value, axis, out, fill_value, keepdims)

    def min(self, axis=None, out=None, fill_value=None, keepdims=np._NoValue):
        return self._extreme(np.min, _ma.minimum_fill_value, axis, out, fill_value, keepdims)

    def _extreme(self, reduce, filler, axis, out, fill_value, keepdims):
        """``MaskedArray.max`` or ``.min``, as NumPy computes it: of the data with the masked
        elements filled by the value that never wins; a result reduced from masked elements
        alone is masked, its data the dtype's default fill value."""
        _no_out(reduce.__name__, out)
        kwargs = {} if keepdims is np._NoValue else {"keepdims": keepdims}
        if fill_value is None:
            fill_value = filler(np.empty(0, self.dtype))
        result = reduce(self.filled(fill_value), axis=axis, **kwargs)
        m = self._mask
        newmask = NOMASK if m is NOMASK else np.all(m, axis=axis, **kwargs)
        if np.ndim(result):
            if np.ndim(newmask):
                result = _where(newmask, np.ma.default_fill_value(result), result)
            return Masked(result, newmask)
        return np.ma.masked if newmask is not NOMASK and bool(newmask) else result

    def anom(self, axis=None, dtype=None):
        """``MaskedArray.anom``: the deviations from the mean, as NumPy computes them (an
        ``axis`` of 0 is taken as None is: the mean broadcasts along it)."""
        m = self.mean(axis, dtype)
        if not axis:
            return _binary(np.subtract, self, m)
        if type(m) is not Masked:  # (a 0-d mean: np.ma.masked where every element is masked)
            return _binary(np.subtract, self, m)
        mask = m._mask
        return _binary(np.subtract, self, Masked(
            np.expand_dims(m.data, axis), mask if mask is NOMASK else np.expand_dims(mask, axis),
            m._fill_value))

    def std(self, axis=None, dtype=None, out=None, ddof=0, keepdims=np._NoValue):
        kwargs = {} if keepdims is np._NoValue else {"keepdims": keepdims}
        dvar = self.var(axis, dtype, out, ddof, **kwargs)
        return dvar if dvar is np.ma.masked else _sqrt(dvar)

    def ptp(self, axis=None, out=None, fill_value=None, keepdims=False):
        """``MaskedArray.ptp``: the greatest less the least, as NumPy subtracts them."""
        _no_out("ptp", out)
        result = self.max(axis=axis, fill_value=fill_value, keepdims=keepdims)
        result -= self.min(axis=axis, fill_value=fill_value, keepdims=keepdims)
        return result

    def round(self, decimals=0, out=None):
        """``MaskedArray.round``: the data's, sharing this array's mask."""
        _no_out("round", out)
        result = np.round(self.data, decimals)
        if np.ndim(result):
            return Masked(result, self._mask, self._fill_value, self._hard)
        return np.ma.masked if self._mask is not NOMASK and bool(self._mask) else result

    def clip(self, *args, **kwargs):
        """``MaskedArray.clip``: the data's, with a copy of this array's mask."""
        _no_out("clip", kwargs.get("out"))
        mask = self._mask
        return Masked(self.data.clip(*args, **kwargs),
                      mask if mask is NOMASK else np.copy(mask), self._fill_value, self._hard)

    def diagonal(self, offset=0, axis1=0, axis2=1):
        """``MaskedArray.diagonal``: the data's and the mask's."""
        mask = self._mask
        return Masked(self.data.diagonal(offset, axis1, axis2),
                      mask if mask is NOMASK else mask.diagonal(offset, axis1, axis2),
                      self._fill_value, self._hard)

    def trace(self, offset=0, axis1=0, axis2=1, dtype=None, out=None):
        """``MaskedArray.trace``: the data's where nothing is masked; else the sum of the
        diagonal's elements that are not masked."""
        _no_out("trace", out)
        if self._mask is NOMASK:
            result = self.data.trace(offset=offset, axis1=axis1, axis2=axis2)
            return result.astype(dtype) if dtype is not None else result
        diagonal = self.diagonal(offset, axis1, axis2)
        data = diagonal.data if dtype is None else diagonal.data.astype(dtype)
        return Masked(data, diagonal._mask, diagonal._fill_value).filled(0).sum(axis=-1)

    def take(self, indices, axis=None, out=None, mode="raise"):
        """``MaskedArray.take`` of plain indices: the data's elements with the mask's (a
        mask of its own); one element NumPy's scalar, or ``np.ma.masked``."""
        _no_out("take", out)
        if type(indices) is Masked or isinstance(indices, np.ma.MaskedArray):
            _refuse("MaskedArray.take of masked indices")
        mask = self._mask
        result = Masked(np.take(self.data, indices, axis=axis, mode=mode)[...],
                        mask if mask is NOMASK else
                        np.take(mask, indices, axis=axis, mode=mode)[...],
                        self._fill_value, self._hard)
        return result[()]

    def sort(self, axis=-1, kind=None, order=None, endwith=True, fill_value=None, *,
             stable=False):
        """``MaskedArray.sort``: in place, the data's where nothing is masked; else the
        elements (data and mask) taken in ``argsort``'s order."""
        if stable:
            raise ValueError("`stable` parameter is not supported for masked arrays.")
        if self._mask is NOMASK:
            self.data.sort(axis=axis, kind=kind, order=order)
            return
        order_of = self.argsort(axis=axis, kind=kind, order=order, fill_value=fill_value,
                                endwith=endwith)
        index = list(np.indices(np.shape(order_of), sparse=True))
        index[axis] = order_of  # (np.take_along_axis's index)
        self[...] = self[tuple(index)]

    def view(self, dtype=None, type=None, fill_value=None):
        """``MaskedArray.view`` as a masked array (sharing the data and the mask) or as the
        data's ndarray; in another dtype, refused."""
        if isinstance(dtype, builtins_type) and issubclass(dtype, np.ndarray) and type is None:
            dtype, type = None, dtype
        if dtype is not None or fill_value is not None \
                or type not in (None, np.ma.MaskedArray, np.ndarray):
            _refuse("MaskedArray.view in another dtype or class, or with a fill value")
        return self.data[...] if type is np.ndarray else self[...]

    def flatten(self, order="C"):
        """``MaskedArray.flatten``: a copy of the data and of the mask, flattened."""
        return self.ravel(order).copy()

    def set_fill_value(self, value=None):
        self.fill_value = value

    def tolist(self, fill_value=None):
        """``MaskedArray.tolist``: the data's numbers (traced ones where they carry a
        derivative), None where masked, nested as the array."""
        if fill_value is not None:
            return self.filled(fill_value).tolist()
        mask = self._mask
        if mask is NOMASK:
            return self.data.tolist()
        if 0 in self.shape:
            return np.empty(self.shape).tolist()
        items = [None if masked else item for item, masked in
                 zip(np.ravel(self.data).tolist(), np.ravel(mask).tolist())]
        for n in reversed(self.shape[1:]):
            items = [items[i:i + n] for i in range(0, len(items), n)]
        return items if self.ndim else items[0]

    # arithmetic ----------------------------------------------------------------------------

    def __add__(self, other):
        return _binary(np.add, self, other)

    def __radd__(self, other):
        return _binary(np.add, other, self)

    def __sub__(self, other):
        return _binary(np.subtract, self, other)

    def __rsub__(self, other):
        return _binary(np.subtract, other, self)

    def __mul__(self, other):
        return _binary(np.multiply, self, other)

    def __rmul__(self, other):
        return _binary(np.multiply, other, self)

    def __truediv__(self, other):
        return _divide(self, other)

    def __rtruediv__(self, other):
        return _divide(other, self)

    def __pow__(self, other):
        return _power(self, other)

    def __rpow__(self, other):
        return _power(other, self)

    def __neg__(self):
        return np.negative(self)

    def __pos__(self):
        return np.positive(self)

    def __abs__(self):
        return np.absolute(self)

    # NumPy's protocols ---------------------------------------------------------------------

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        if kwargs.get("dtype", self.dtype) == self.dtype:  # (np.ma.average's dtype=, the data's)
            kwargs.pop("dtype", None)
        if method != "__call__" or kwargs or ufunc.nout != 1:
            _refuse(f"np.{ufunc.__name__}{'' if method == '__call__' else '.' + method}"
                    f"({', '.join(kwargs)}{'=...' if kwargs else ''})")
        return _wrapped_ufunc(ufunc, inputs)

    def __array_function__(self, func, types, args, kwargs):
        if func is np.diff and type(args[0]) is Masked:
            return _diff(*args, **kwargs)
        if func is np.broadcast_to and not kwargs.get("subok"):  # (of the data, as NumPy's)
            return np.broadcast_to(_data(args[0]), *args[1:], **kwargs)
        if func is np.expand_dims and type(args[0]) is Masked:  # (NumPy's: a reshape of it)
            return args[0].reshape(np.expand_dims(np.broadcast_to(0, args[0].shape),
                                                  *args[1:], **kwargs).shape)
        if func in _SHAPED or func in _OF_DATA:  # (of the data, as NumPy's)
            return func(*map(_data_of_masked, args),
                        **{k: _data_of_masked(v) for k, v in kwargs.items()})
        if func is np.unique and type(args[0]) is Masked:
            return _unique(*args, **kwargs)
        method = _FUNCTIONS.get(func)
        if method is None or type(args[0]) is not Masked:
            _refuse(f"np.{func.__name__}")
        return getattr(args[0], method)(*args[1:], **kwargs)

    def __array__(self, dtype=None, copy=None):
        _refuse("A conversion to a plain array (np.asarray)")

    def __mutad_output__(self):
        """As ``f``'s output (of one element, unmasked): its data, whose value is returned as
        NumPy's masked array of it (the mask, the fill value, the hardness of this one's)."""
        if self.size != 1:
            return self, None  # (refused as NumPy's output of other shapes is)
        if self._mask is not NOMASK and bool(np.any(self._mask)):  # (a replay guards it)
            raise UnsupportedOperationError(
                "f returned a masked array whose one element is masked, which has no value "
                "to differentiate: return m.filled(value) (the value a masked element stands "
                "for), or np.ma.masked itself, whose gradient is zero.")
        mask = NOMASK if self._mask is NOMASK else np.zeros(self.shape, bool)
        fill_value, hard = self._fill_value, self._hard

        def as_masked(value):
            return np.ma.MaskedArray(value, mask=mask, fill_value=fill_value,
                                     hard_mask=hard)
        return self.data, as_masked

    def __getattr__(self, name):
        if name.startswith("_") or name == "value":  # Python's and mutad's probes
            raise AttributeError(name)
        raise MissingAttributeError(
            f"MaskedArray.{name} of a masked array of differentiated values: " + FOLLOWED + FIX)

    def _key(self, key):
        """An index as NumPy's indexing takes it: of a masked array, its data; a plain array
        (``m.mask``: ``m[m.mask] = v``) copied (``_own``)."""
        if type(key) is Masked or isinstance(key, np.ma.MaskedArray):
            key = key.data
        return _own(key)

    def __getitem__(self, key):
        """``MaskedArray.__getitem__``: the data's element or view, with the mask's; an element
        is NumPy's scalar, or ``np.ma.masked`` where masked. A view shares the data and the
        mask, as NumPy's does."""
        key = self._key(key)
        dout = self.data[key]
        mout = NOMASK if self._mask is NOMASK else self._mask[key]
        if not np.ndim(dout) and (stands_for_scalar(dout) if wrapped(dout)
                                  else not isinstance(dout, np.ndarray)):
            return np.ma.masked if mout is not NOMASK and bool(mout) else dout
        if mout is not NOMASK:
            mout = np.reshape(mout, np.shape(dout))
        return Masked(dout, mout, self._fill_value, self._hard)

    def __setitem__(self, key, value):
        """``MaskedArray.__setitem__``: the data written in place, and the mask where the
        array has one (or the value brings one): ``np.ma.masked`` masks, another value
        unmasks unless it is masked itself; a masked index beside a value that is not a
        masked array writes the data alone, as NumPy does. A hard mask is never cleared and
        its masked elements keep their data; the value's mask joins it."""
        masked_key = type(key) is Masked or isinstance(key, np.ma.MaskedArray)
        key_mask = _mask(key)
        key = self._key(key)
        if value is np.ma.masked:
            if self._mask is NOMASK:
                self._mask = np.zeros(self.shape, bool)
            self._mask[key] = True
            return
        masked_value = type(value) is Masked or isinstance(value, np.ma.MaskedArray)
        dval = _data(value) if masked_value else value
        mval = _mask(value)
        if self._mask is NOMASK:
            self.data[key] = dval
            if mval is not NOMASK:
                self._mask = np.zeros(self.shape, bool)
                self._mask[key] = mval
        elif not self._hard and masked_key and not masked_value:
            self.data[key] = dval
        elif self._hard and getattr(key, "dtype", None) == bool:
            # NumPy's key * ~mask: the masked elements dropped, but where the key (a masked
            # array) is masked, its data; the value's mask ignored
            keep = np.logical_not(self._mask)
            keep = keep if key_mask is NOMASK else np.logical_or(keep, key_mask)
            self.data[np.logical_and(key, keep)] = dval
        elif self._hard:
            mkey = np.logical_or(self._mask[key], mval) if mval is not NOMASK \
                else np.copy(self._mask[key])
            if np.any(mkey):  # (NumPy's np.copyto(..., where=~mask) of the indexed data)
                dval = _where(mkey, self.data[key], dval)
            self.data[key] = dval
            self._mask[key] = mkey
        else:
            self.data[key] = dval
            self._mask[key] = mval

    # in-place arithmetic: MaskedArray's, which updates the data in place (the array the
    # masked array was made over, where it was not copied) -----------------------------------

    def _joined(self, m):
        """``self._mask += m`` (``self._mask |= m``) of NumPy's in-place operators: a new mask
        where this array has none. NumPy changes an existing mask in place, which other masked
        arrays may share (a unary ufunc's result shares its input's): that is refused."""
        if self._mask is NOMASK:
            self._mask = np.logical_or(np.zeros(self.shape, bool), m)
        elif np.any(np.logical_and(m, np.logical_not(self._mask))):
            raise UnsupportedOperationError(
                "An in-place update of a masked array of differentiated values that masks more "
                "of its elements (m += v of a v masked elsewhere, m /= v dividing by zero): "
                "NumPy changes the mask in place, which other masked arrays may share. Write "
                "m = m + v (a new masked array), which mutad differentiates.")

    def _updated(self, ufunc, other, neutral):
        """``+=``, ``-=``, ``*=``: the other's mask joins this one's (only if it masks some
        element, where this has none), and the data is updated where neither is masked, by
        ``neutral`` elsewhere."""
        m = _mask(other)
        if m is not NOMASK and (self._mask is not NOMASK or np.any(m)):
            self._joined(m)
        other_data = _data(other)
        other_data = _where(self._mask, other_data.dtype.type(neutral), other_data)
        ufunc(self.data, other_data, out=self.data)
        return self

    def __iadd__(self, other):
        return self._updated(np.add, other, 0)

    def __isub__(self, other):
        return self._updated(np.subtract, other, 0)

    def __imul__(self, other):
        return self._updated(np.multiply, other, 1)

    def __itruediv__(self, other):
        """``/=``: masked also where the divisor is tiny against the dividend (np.ma's
        domain, a decision on the values), dividing by 1 where masked."""
        other_data = _data(other)
        dom_mask = _outside(_ma._DomainSafeDivide(), self.data, other_data)
        new_mask = _mask_or(_mask(other), dom_mask)
        if dom_mask.any():
            fill = _ma.ufunc_fills[np.true_divide][1]
            other_data = _where(dom_mask, other_data.dtype.type(fill), other_data)
        if new_mask is not NOMASK:  # (nomask |= nomask: still none)
            self._joined(new_mask)
        other_data = _where(self._mask, other_data.dtype.type(1), other_data)
        np.true_divide(self.data, other_data, out=self.data)
        return self

    def __ipow__(self, other):
        _refuse("An in-place power (m **= v)")

    def __bool__(self):
        _refuse("bool()")

    def python_float(self):
        """``float(m)`` as ``MaskedArray.__float__`` gives it, the traced value of its one
        element (nan, with NumPy's warning, where it is masked), which the mode's ``float``
        calls (a Python float cannot carry a derivative)."""
        if self.size > 1:
            raise TypeError("Only length-1 arrays can be converted to Python scalars")
        if self._mask is not NOMASK and bool(np.any(self._mask)):
            line = source_line(caller(skip=1))  # (the program's line, as NumPy's stacklevel)
            if line is None:
                warnings.warn("Warning: converting a masked element to nan.", stacklevel=2)
            else:
                warn_at("Warning: converting a masked element to nan.", UserWarning, *line)
            return np.nan
        return self.data.item()

    __lt__, __le__ = _comparison(np.less), _comparison(np.less_equal)
    __gt__, __ge__ = _comparison(np.greater), _comparison(np.greater_equal)
    __eq__, __ne__ = _comparison(np.equal), _comparison(np.not_equal)
    __hash__ = object.__hash__

    # a comparison's booleans: ndarray's operators, which are NumPy's ufuncs
    def __invert__(self):
        return _wrapped_ufunc(np.invert, (self,))

    def __and__(self, other):
        return _wrapped_ufunc(np.bitwise_and, (self, other))

    def __or__(self, other):
        return _wrapped_ufunc(np.bitwise_or, (self, other))

    def __xor__(self, other):
        return _wrapped_ufunc(np.bitwise_xor, (self, other))

    __rand__, __ror__, __rxor__ = __and__, __or__, __xor__

    __float__ = __int__ = __bool__


class _Flat:
    """``m.flat`` of a masked array of differentiated values, as np.ma's ``MaskedIterator``:
    an index reads the flattened data with its mask (an element NumPy's scalar, or
    ``np.ma.masked`` where masked; several a new masked array), a loop the elements in C
    order, and a write writes the data and the mask (``getmaskarray`` of the value)."""

    __slots__ = ("masked", "position")
    __class__ = property(lambda self: _ma.MaskedIterator)

    def __init__(self, masked):
        self.masked, self.position = masked, 0

    def __getitem__(self, key):
        y = self.masked.ravel()[key]
        return y.copy() if type(y) is Masked else y  # (NumPy's flat iterator's: a copy)

    def __setitem__(self, key, value):
        masked = self.masked
        masked.data.flat[key] = _data(value)
        if masked._mask is not NOMASK:
            masked._mask.flat[key] = _mask_array(value)

    def __iter__(self):
        return self

    def __next__(self):
        if self.position >= self.masked.size:
            raise StopIteration
        self.position += 1
        return self[self.position - 1]

    def __len__(self):
        return self.masked.size


_FUNCTIONS = {np.sum: "sum", np.mean: "mean", np.var: "var", np.std: "std", np.max: "max",
              np.amax: "max", np.min: "min", np.amin: "min", np.prod: "prod", np.ptp: "ptp",
              np.round: "round", np.around: "round", np.clip: "clip", np.trace: "trace",
              np.diagonal: "diagonal", np.take: "take"}
_SHAPED = (np.shape, np.ndim, np.size, np.result_type)
_OF_DATA = (np.vander, np.interp, np.polyfit, np.may_share_memory, np.shares_memory)
"""NumPy's functions that read a masked array as its data (``np.asarray``, its memory): the
mask dropped, as NumPy's (``np.ma.polyfit`` calls ``np.polyfit`` of the unmasked elements)."""
FLOAT_BINARY = (np.add, np.subtract, np.multiply, np.arctan2, np.hypot)
"""np.ma's ``_MaskedBinaryOperation``s of floats that give floats (not its comparisons)."""


def _outside(domain, *data):
    """Where ``data`` lie outside a function's domain (``domain``, np.ma's test of it): a
    decision on the values, taken of the traced data so that a replay records it (a traced
    boolean array, guarded where it decides) rather than keeping the first call's."""
    if isinstance(domain, _ma._DomainSafeDivide):  # (whose np.asarray would take the values)
        a, b = data
        tolerance = np.finfo(float).tiny if domain.tolerance is None else domain.tolerance
        with np.errstate(all="ignore"):
            return np.absolute(a) * tolerance >= np.absolute(b)
    return domain(*data)


def _own(mask):
    """A copy of a plain boolean ``mask`` for an operation mutad records, which keeps what it
    reads read-only: a masked array's mask stays writeable (``m[i] = np.ma.masked``), as
    NumPy's is."""
    return np.copy(mask) if isinstance(mask, np.ndarray) and not wrapped(mask) else mask


def _unique(ar, *args, **kwargs):
    """``np.unique`` of a masked array, NumPy's own code run on it (np.ma's sort, masked
    elements last and one of them kept): NumPy's call of its plain values says which elements
    it keeps, where (``return_index``), whose data and mask are gathered from this one's. The
    choice is a decision on the values, which a replay does not take again."""
    flags = {**dict(zip(("return_index", "return_inverse", "return_counts", "axis"), args)),
             **kwargs}
    if flags.get("axis") is not None:
        _refuse("np.unique along an axis")
    plain = _as_numpy(ar)
    plain = np.ma.MaskedArray(settled(ar.data, "np.unique of a masked array"), plain.mask,
                              fill_value=plain.fill_value)
    kept, index, *rest = np.unique(plain, **{**flags, "return_index": True})
    if np.ravel(plain.data)[index].tobytes() != np.ma.getdata(kept).tobytes():
        _refuse("np.unique keeping other values than its elements'")  # (never: NumPy's own)
    data = np.ravel(ar.data)[index]
    mask = np.ma.getmask(kept)
    y = Masked(data, mask if mask is NOMASK else np.copy(mask))
    results = (y, index, *rest) if flags.get("return_index") else (y, *rest)
    return results if len(results) > 1 else y


def _where(condition, x, y):
    return np.where(_own(condition), x, y)


def _no_out(name, out):
    if out is not None:
        _refuse(f"MaskedArray.{name}(out=...)")


def _binary(ufunc, a, b):
    """``np.ma.core._MaskedBinaryOperation(ufunc)(a, b)``: the data's result, masked where
    either operand is, holding ``a``'s data there."""
    da, db = _data(a), _data(b)
    with np.errstate(divide="ignore", invalid="ignore"):
        result = ufunc(da, db)
    ma, mb = _mask(a), _mask(b)
    if ma is NOMASK:
        m = NOMASK if mb is NOMASK else np.logical_or(_mask_array(a), mb)
    else:
        m = np.logical_or(ma, _mask_array(b) if mb is NOMASK else mb)
    if not np.ndim(result):
        return np.ma.masked if m is not NOMASK and bool(m) else result
    if m is not NOMASK and np.any(m):  # (np.copyto(result, da, casting="unsafe", where=m))
        result = _where(m, da if da.dtype == result.dtype else da.astype(result.dtype), result)
    return Masked(result, m, _fill_of(a, b), _hard_of(a, b))


def _domained(op):
    """``op`` of np.ma (a ``_DomainedBinaryOperation``: ``true_divide``, ``mod``, ...):
    masked where either operand is, outside ``op``'s domain (a divisor tiny against the
    dividend) and where the result is not finite; there 0 plus ``a``'s data, as NumPy adds
    it."""
    def call(a, b):
        da, db = _data(a), _data(b)
        with np.errstate(divide="ignore", invalid="ignore"):
            result = op.f(da, db)
            m = np.logical_not(np.isfinite(result))
            m = m | _mask_array(a) if _mask(a) is not NOMASK else m
            m = m | _mask_array(b) if _mask(b) is not NOMASK else m
            m = m | _outside(op.domain, da, db)
        if not np.ndim(m):
            return np.ma.masked if bool(m) else result
        result = _where(m, 0.0, result)  # np.copyto(result, 0, where=m)
        result = result + np.multiply(_own(m), da)  # result += m * da, on every element
        return Masked(result, m, _fill_of(a, b), _hard_of(a, b))
    return call


_divide = _domained(np.ma.true_divide)


def _unary(op):
    """``op`` of np.ma (a ``_MaskedUnaryOperation``: ``np.ma.sqrt``, ``np.ma.log``, ...): the
    data's result, masked where the input is (and outside ``op``'s domain or not finite, for a
    function with a domain), holding the input's data there."""
    def call(a, *args, **kwargs):
        d = _data(a)
        with np.errstate(divide="ignore", invalid="ignore"):
            result = op.f(d, *args, **kwargs)
        m = _mask(a)
        if op.domain is not None:
            finite = np.isfinite(result)
            m = np.logical_not(finite) | _outside(op.domain, d)
            m = m | _mask(a) if _mask(a) is not NOMASK else m
        if not np.ndim(result):
            return np.ma.masked if m is not NOMASK and bool(m) else result
        if m is not NOMASK:
            result = _where(m, d, result)
        return Masked(result, m, _fill_of(a, None), _hard_of(a))
    return call


_sqrt = _unary(np.ma.sqrt)  # (np.ma.sqrt itself: the stand-in while a differentiation runs)


def _power(a, b):
    """``np.ma.power(a, b)``: ``a``'s data where masked, the fill value where the power is
    not finite (masked there too)."""
    m = _mask_or(_mask(a), _mask(b))
    fa, fb = _data(a), _data(b)
    with np.errstate(divide="ignore", invalid="ignore"):
        result = _where(m, fa, np.power(fa, fb)) if m is not NOMASK else np.power(fa, fb)
    fill = _fill_of(a, None)
    invalid = np.logical_not(np.isfinite(result))
    if m is not NOMASK:
        if not np.ndim(result):
            return np.ma.masked
        m = np.logical_or(m, invalid)
    if np.any(invalid):
        if not np.ndim(result):
            return np.ma.masked
        if m is NOMASK:
            m = invalid
        value = np.ma.default_fill_value(result) if fill is None else fill
        result = _where(invalid, np.asarray(value, result.dtype), result)
    return Masked(result, m, fill, _hard_of(a)) if np.ndim(result) else result


def _wrapped_ufunc(ufunc, inputs):
    """``ufunc(*inputs)`` of masked arrays (``MaskedArray.__array_wrap__``): the data's result,
    masked where any input is and outside the ufunc's domain, which hold its fill value."""
    with np.errstate(divide="ignore", invalid="ignore"):
        result = ufunc(*(_data(a) for a in inputs))
    m = functools.reduce(_mask_or, [_mask_array(a) for a in inputs])
    domain = _ma.ufunc_domain.get(ufunc)
    like = _first_masked(*inputs)  # (whose __array_wrap__ NumPy calls)
    if domain is not None:
        with np.errstate(divide="ignore", invalid="ignore"):
            d = _outside(domain, *(_data(a) for a in inputs)).astype(bool)
        # NumPy's domain of masked inputs is masked where they are, and filled with True
        d = d | m
        if np.any(d):
            # (like.fill_value only where the ufunc has none: reading it sets NumPy's array's)
            fills = _ma.ufunc_fills[ufunc] if ufunc in _ma.ufunc_fills else like.fill_value
            fill = fills[-1] if isinstance(fills, tuple) else fills
            result = _where(d, np.asarray(fill, result.dtype), result)
            m = m | d
    if np.ndim(result) == 0 and bool(m):
        return np.ma.masked
    return Masked(result, m, like._fill_value, _hard_of(*inputs)) if np.ndim(result) \
        else result


def _first_masked(*operands):
    """The operand a result takes its fill value from (``_update_from``): the first masked
    array, NumPy's or a :class:`Masked`, or None."""
    return next((x for x in operands if type(x) is Masked or isinstance(x, np.ma.MaskedArray)),
                None)


def _fill_of(a, b):
    """The fill value a result takes from its operands: the first masked one's."""
    x = _first_masked(a, b)
    return None if x is None else x._fill_value


# ----------------------------------------------------------------------------------------------
# Making masked arrays: MaskedArray.__new__ and np.ma's functions, routed while a
# differentiation runs.


def _new(cls, data=None, mask=NOMASK, dtype=None, copy=False, subok=True, ndmin=0,
         fill_value=None, keep_mask=True, hard_mask=None, shrink=True, order=None):
    """``MaskedArray.__new__`` of differentiated data."""
    if cls is not np.ma.MaskedArray:
        _refuse(f"A subclass of MaskedArray ({cls.__name__})")
    if type(data) is Masked:
        base, inherited = data.data, data._mask
        fill_value = data._fill_value if fill_value is None else fill_value
        hard_mask = data._hard if hard_mask is None else hard_mask
    elif wrapped(data):
        base, inherited = data, NOMASK
    else:
        _refuse("np.ma.masked_array of a list or another object holding them")
    if (dtype is not None and np.dtype(dtype) != base.dtype) \
            or order not in (None, "K", "A", "C", "F"):
        _refuse("np.ma.masked_array(..., dtype=, order=) with other settings than the data's "
                "own")
    if ndmin > np.ndim(base):  # (np.array's ones in front: a view; a masked array's mask
        # then copied, as NumPy's __new__ copies it where the shape changed)
        shape = (1,) * (ndmin - np.ndim(base)) + np.shape(base)
        base = np.reshape(base, shape)
        inherited = inherited if inherited is NOMASK else np.reshape(np.copy(inherited), shape)
    if copy:
        data = np.copy(base, order=order or "K")
    elif order in ("C", "F") and np.ndim(base):  # np.array(data, order=...): a copy if needed
        flags = memory(base).flags  # (np.ascontiguousarray converts: it dispatches on like=)
        data = base if (flags.c_contiguous if order == "C" else flags.f_contiguous) \
            else np.copy(base, order=order)
    else:
        data = base
    if mask is NOMASK:
        m = inherited if keep_mask else NOMASK
        if copy and m is not NOMASK:
            m = np.copy(m)
    else:
        if mask is None or mask is False:
            mask = np.zeros(np.shape(data), bool)
        elif mask is True:
            mask = np.ones(np.shape(data), bool)
        else:
            mask = mask if wrapped(mask) else np.array(mask, copy=copy or None, dtype=bool)
            mask = mask.astype(bool) if wrapped(mask) else mask
        if np.shape(mask) != np.shape(data):
            nd, nm = np.size(data), np.size(mask)
            if nm == 1:
                mask = np.broadcast_to(mask, np.shape(data)).copy()
            elif nm == nd:
                mask = np.reshape(mask, np.shape(data))
            else:
                raise np.ma.MaskError(f"Mask and data not compatible: data size is {nd}, "
                                      f"mask size is {nm}.")
        m = mask if inherited is NOMASK or not keep_mask else np.logical_or(mask, inherited)
    fill = None if fill_value is None else _ma._check_fill_value(fill_value, data.dtype)
    return Masked(data, m, fill, False if hard_mask is None else hard_mask)


def _masked_where(condition, a, copy=True):
    if type(condition) is Masked or isinstance(condition, np.ma.MaskedArray):
        condition = condition.filled(True)  # (np.ma.make_mask's)
    cond = condition if wrapped(condition) else np.array(condition, dtype=bool, copy=None)
    cond = cond.astype(bool) if wrapped(cond) else cond
    made = _new(np.ma.MaskedArray, a, copy=copy)
    if np.shape(cond) and np.shape(cond) != made.shape:
        raise IndexError("Inconsistent shape between the condition and the input"
                         f" (got {np.shape(cond)} and {made.shape})")
    if made._mask is NOMASK:
        made._mask = _shrunk(cond)
        if made._mask is not NOMASK and np.shape(made._mask) != made.shape:
            made._mask = np.broadcast_to(made._mask, made.shape).copy()
    else:  # (MaskedArray.__setmask__) into the mask, shared with a's where not copied
        made._mask[...] = _shrunk(np.logical_or(cond, made._mask))
    if not copy and type(a) is Masked and a._mask is NOMASK:
        a._mask = made._mask  # NumPy's masked_where gives a the new mask too
    return made


def _masked_invalid(a, copy=True):
    made = _masked_where(np.logical_not(np.isfinite(_data(a))), a, copy=copy)
    if made._mask is NOMASK:
        made._mask = np.zeros(made.shape, bool)
    return made


def _fix_invalid(a, mask=NOMASK, copy=True, fill_value=None):
    """np.ma.fix_invalid's code: the elements that are not finite masked, and their data
    replaced by the fill value."""
    made = _new(np.ma.MaskedArray, a, copy=copy, mask=mask)
    invalid = np.logical_not(np.isfinite(made.data))
    if not invalid.any():
        return made
    made.mask = np.logical_or(made.mask, invalid)
    made.data[invalid] = made.fill_value if fill_value is None else fill_value
    return made


def _dot(a, b, strict=False, out=None):
    """np.ma.dot's code without ``out``: the product of the data filled with zeros, masked
    where no product of unmasked elements enters (``strict``: where a masked element enters,
    its row of ``a`` or column of ``b`` masked first)."""
    if out is not None:
        _refuse("np.ma.dot with out=")
    if strict is True and np.ndim(a) and np.ndim(b):
        a = _mask_propagated(a, np.ndim(a) - 1)
        b = _mask_propagated(b, np.ndim(b) - (1 if np.ndim(b) == 1 else 2))
    d = np.dot(_filled(a, 0), _filled(b, 0))
    m = np.logical_not(np.dot(np.logical_not(_mask_array(a)), np.logical_not(_mask_array(b))))
    return Masked(d if np.ndim(d) else np.reshape(d, ()), m)


def _mask_propagated(a, axis):
    """``np.ma.core._mask_propagate``: ``a`` as a masked array, every element masked along
    ``axis`` where one is."""
    a = _as_masked(a)
    m = a._mask
    if m is NOMASK or not np.any(m):
        return a
    return Masked(a.data, m | np.any(m, axis=axis, keepdims=True), a._fill_value, a._hard)


def _inner(a, b):
    """``np.ma.inner``: NumPy's of the data, the masked elements 0 (a masked array without a
    mask, or a number)."""
    fa, fb = _filled(a, 0), _filled(b, 0)
    d = np.inner(np.reshape(fa, (1,)) if np.ndim(fa) == 0 else fa,
                 np.reshape(fb, (1,)) if np.ndim(fb) == 0 else fb)
    return Masked(d) if np.ndim(d) else d  # (NumPy's scalar's view: the scalar)


def _choose(indices, choices, out=None, mode="raise"):
    """``np.ma.choose``: NumPy's of the choices filled (with their fill values) and of their
    masks, masked where the chosen element or the index is."""
    if out is not None:
        _refuse("np.ma.choose with out=")
    c = np.ma.filled(indices, 0)
    masks = [True if x is np.ma.masked else _mask(x) for x in choices]
    data = [True if x is np.ma.masked else _filled(x) for x in choices]
    mask = _mask_or(np.choose(c, masks, mode=mode), _mask(indices))
    return Masked(np.choose(c, data, mode=mode), mask)


def _comparing(compare):
    """``masked_less`` and its kind: ``masked_where(compare(x, value), x)`` (np.ma's
    comparison of a masked ``x``: its data's, masked elements kept masked by masked_where)."""
    def masked(x, value, copy=True):
        return _masked_where(compare(_data(x), value), x, copy=copy)
    return masked


def _masked_outside(x, v1, v2, copy=True):
    v1, v2 = (v2, v1) if v2 < v1 else (v1, v2)
    xf = _filled(x)
    return _masked_where((xf < v1) | (xf > v2), x, copy=copy)


def _masked_inside(x, v1, v2, copy=True):
    v1, v2 = (v2, v1) if v2 < v1 else (v1, v2)
    xf = _filled(x)
    return _masked_where((xf >= v1) & (xf <= v2), x, copy=copy)


def _filled(a, fill_value=None):
    return a.filled(fill_value) if type(a) is Masked else _data(a)


def _as_masked(a):
    return a if type(a) is Masked else _new(np.ma.MaskedArray, a)


def _median(a, axis=None, out=None, overwrite_input=False, keepdims=False):
    """``np.ma.median``: over all of the elements (or a vector's), NumPy's median of the
    unmasked ones (``np.median(m.compressed())``, whose middle two it averages as np.ma's
    does); along an axis, np.ma's code (``_along``); of an array without a mask, np.median's.
    Into ``out=``, with ``keepdims`` or a tuple of axes, or of no unmasked element (np.ma's
    masked constant), refused. ``overwrite_input`` lets NumPy sort the input in place: an
    array without a mask is np.median's, which sorts it; a masked array's sort in place is
    refused."""
    if type(a) is not Masked and not isinstance(a, np.ma.MaskedArray):  # (np.median's)
        m = np.median(_data(a), axis=axis, out=out, overwrite_input=overwrite_input,
                      keepdims=keepdims)
        return Masked(m) if np.ndim(m) and type(m) is not np.ma.MaskedArray else m
    if out is not None or keepdims or not (axis is None or isinstance(axis, int)):
        _refuse("np.ma.median into out=, with keepdims or along several axes")
    if overwrite_input:
        _refuse("np.ma.median with overwrite_input=True (which sorts the masked array in place)")
    a = _as_masked(a)
    if axis is not None and a.ndim > 1:
        return _median_along(a, normalize_axis_index(axis, a.ndim))
    data = a.compressed()
    if data.size == 0:
        _refuse("np.ma.median with every element masked")
    return np.median(data)


def _median_along(a, axis):
    """``np.ma.extras._median`` along ``axis`` of an array of two or more dimensions: the
    elements sorted (the masked ones last), the middle two of the unmasked taken and
    averaged, a NaN among them the result."""
    if a.shape[axis] == 0:
        _refuse("np.ma.median along an empty axis")
    ordered = _sort(a, axis=axis, fill_value=np.inf)
    counts = ordered.count(axis=axis, keepdims=True)
    half = counts // 2
    middle = np.concatenate([np.where(counts % 2 == 1, half, half - 1), half], axis=axis)
    data = np.take_along_axis(ordered.data, middle, axis=axis)
    mask = ordered._mask
    if mask is not NOMASK:
        mask = np.take_along_axis(mask, middle, axis=axis)
        if np.any(mask):  # (replace_masked: where some element is unmasked, none are)
            kept = np.logical_and(np.logical_not(np.all(ordered._mask, axis=axis,
                                                        keepdims=True)), mask)
            data = _where(kept, np.asarray(np.inf, data.dtype), data)
            mask = np.logical_and(mask, np.logical_not(kept))
    total = Masked(data, mask).sum(axis=axis)
    result = np.true_divide(total.data, 2.0)
    last = ordered.take(-1, axis=axis)  # (np.lib's _median_nancheck)
    nans = _filled(np.isnan(last), False)
    if np.any(nans):
        result = _where(nans, last.data, result)
    return Masked(result, total._mask)


def _sort(a, axis=-1, kind=None, order=None, endwith=True, fill_value=None, *, stable=None):
    """``np.ma.sort``: a sorted copy (of the elements flattened where ``axis`` is None)."""
    a = _as_masked(a).copy()
    if axis is None:
        a, axis = a.flatten(), 0
    a.sort(axis=axis, kind=kind, order=order, endwith=endwith, fill_value=fill_value,
           stable=stable)
    return a


def _concatenate(arrays, axis=0):
    """``np.ma.concatenate``: the data's, and where some array has a mask, the masks'
    (shrunk: ``nomask`` where nothing is masked)."""
    data = np.concatenate([_data(a) for a in arrays], axis)
    if all(_mask(a) is NOMASK for a in arrays):
        return Masked(data)
    mask = np.reshape(np.concatenate([_mask_array(a) for a in arrays], axis), np.shape(data))
    return Masked(data, _shrunk(mask))


def _of_data_and_mask(npfunc, a, *args, **kwargs):
    """np.ma.extras' ``_fromnxfunction_single`` (``np.ma.diagflat``): ``npfunc`` of the data
    and of the mask, a masked array of the two."""
    return _new(np.ma.MaskedArray, npfunc(_data(a), *args, **kwargs),
                mask=npfunc(_mask_array(a), *args, **kwargs))


def _of_data_and_masks(npfunc, arrays, *args, **kwargs):
    """np.ma.extras' ``_fromnxfunction_seq`` (``np.ma.stack``, ``vstack``, ...): ``npfunc`` of
    the arrays' data and of their masks."""
    return _new(np.ma.MaskedArray, npfunc(tuple(_data(a) for a in arrays), *args, **kwargs),
                mask=npfunc(tuple(_mask_array(a) for a in arrays), *args, **kwargs))


def _each_of_data_and_mask(npfunc, *arrays, **kwargs):
    """np.ma.extras' ``_fromnxfunction_allargs`` (``np.ma.atleast_2d``, ...): ``npfunc`` of
    each array's data and mask; the one masked array where one is given."""
    out = tuple(_of_data_and_mask(npfunc, a, **kwargs) for a in arrays)
    return out[0] if len(out) == 1 else out


def _diff(a, n=1, axis=-1, prepend=np._NoValue, append=np._NoValue):
    """``np.diff`` of a masked array, as NumPy's code runs it: ``n`` times the difference of
    the array's slices along ``axis`` (``np.subtract`` of two masked arrays, ``np.not_equal``
    of booleans); ``np.ma.diff`` joins ``prepend`` and ``append`` first (np.ma.concatenate)."""
    if prepend is not np._NoValue or append is not np._NoValue:
        _refuse("np.diff(..., prepend=, append=) (np.ma.diff's are followed)")
    if n == 0:
        return a
    if n < 0:
        raise ValueError("order must be non-negative but got " + repr(n))
    if a.ndim == 0:
        raise ValueError("diff requires input that is at least one dimensional")
    axis = normalize_axis_index(axis, a.ndim)
    later = tuple(slice(1, None) if i == axis else slice(None) for i in range(a.ndim))
    earlier = tuple(slice(None, -1) if i == axis else slice(None) for i in range(a.ndim))
    op = np.not_equal if a.dtype == np.bool_ else np.subtract
    for _ in range(n):
        a = op(a[later], a[earlier])
    return a


def _apply_along_axis(func1d, axis, arr, *args, **kwargs):
    """``np.ma.apply_along_axis``: np.ma's loop, ``func1d`` of each masked line along
    ``axis`` (in C order of the other axes), its results put where np.ma puts them in its
    object array (a number's in place of the line, an array's along ``axis``), of the
    largest of their dtypes: their data (zero where a result is ``np.ma.masked``, which
    np.ma leaves unwritten) and masks (none while no result has one)."""
    arr = _as_masked(arr)
    axis = normalize_axis_index(axis, arr.ndim)
    others = arr.shape[:axis] + arr.shape[axis + 1:]
    results = [func1d(arr[index[:axis] + (slice(None),) + index[axis:]], *args, **kwargs)
               for index in np.ndindex(*others)]
    first = results[0]
    numbers = np.isscalar(first) or not hasattr(first, "__len__") or np.ndim(first) == 0
    shape = () if numbers else np.shape(first)
    dtype = np.dtype(np.asarray([np.asarray(np.ma.masked if r is np.ma.masked else 0,
                                            _data(r).dtype).dtype for r in results]).max())
    data = np.stack([np.zeros(shape, dtype) if r is np.ma.masked else _data(r).astype(dtype)
                     for r in results]).reshape(others + shape)
    if any(r is np.ma.masked or _mask(r) is not NOMASK for r in results):
        mask = np.stack([np.ones(shape, bool) if r is np.ma.masked else _mask_array(r)
                         for r in results]).reshape(others + shape)
    else:
        mask = NOMASK
    if not numbers:  # (the results' axes in place of the line's)
        ends = range(len(others), len(others) + len(shape))
        places = range(axis, axis + len(shape))
        data = np.moveaxis(data, ends, places)
        mask = mask if mask is NOMASK else np.moveaxis(mask, ends, places)
    return Masked(data, mask)


def _method_of(name):
    """``np.ma.<name>(a, ...)``: the method of ``a`` as a masked array."""
    def function(a, *args, **kwargs):
        return getattr(_as_masked(a), name)(*args, **kwargs)
    return function


class _StandIn:
    """np.ma's ``original`` while a differentiation runs (``registry.defroute``; np.ma's own
    code reaches it too): ``composite`` where a value carrying a derivative, a Masked or a float
    array the function follows as a constant (``_followed_floats``: its masked array is then a
    Masked, which traced values may be written into) is among the arguments, NumPy's function
    otherwise; its attributes are NumPy's
    (``np.ma.multiply.outer``)."""

    def __init__(self, original, composite):
        self.original, self.composite = original, composite
        self.__name__ = self.__qualname__ = getattr(original, "__name__", "masked")
        self.__doc__ = original.__doc__
        defroute(original, self)

    def __call__(self, *args, **kwargs):
        values = [*args, *kwargs.values()]
        if holds_derivative(values) or any(type(v) is Masked for v in values) or any(
                _followed_floats(v) for v in values) and from_user(sys._getframe(1)):
            return self.composite(*args, **kwargs)
        return self.given(self.original(*args, **kwargs), args, kwargs, values)

    def given(self, y, args, kwargs, values):
        """What the user's code receives of NumPy's result ``y`` of plain ``values``."""
        return y

    def __getattr__(self, name):
        return getattr(self.original, name)


class _Reader(_StandIn):
    """np.ma's functions that give the data of a masked array (``np.ma.filled``,
    ``np.ma.getdata``) as code calls them while a differentiation runs: of plain values, their
    new float array (the data filled) as the mode gives the user's code a routed function's
    (``by_user_code``): a constant the function may write traced values into, as np.zeros'
    is. The masked array's own data stays NumPy's (a traced write into it is refused: the
    plain masked array would read it without its derivative)."""

    def given(self, y, args, kwargs, values):
        if type(y) is not np.ndarray or y.dtype.kind not in "fc" or any(
                isinstance(v, np.ndarray) and owner(v) is owner(y) for v in values):
            return y
        return by_user_code(y, self.original, args, kwargs, sys._getframe(2))


class _Factory(_StandIn):
    """np.ma's factories (``np.ma.zeros``, ``masked_all``, ``empty_like``, ...) as code calls
    them while a differentiation runs: NumPy's masked array, whose float data the user's code
    receives as the mode gives it np.zeros' (``by_user_code``): a constant the function may
    write traced values into, so the masked array is a :class:`Masked` over it. A masked array
    or traced value given (``np.ma.zeros_like(m)``) is read for its shape, dtype and mask, as
    NumPy reads it."""

    def __call__(self, *args, **kwargs):
        args = tuple(_as_numpy(a) for a in args)
        kwargs = {k: _as_numpy(v) for k, v in kwargs.items()}
        y = self.original(*args, **kwargs)
        if type(y) is not np.ma.MaskedArray or y.dtype.kind != "f":
            return y
        data = by_user_code(y.data, self.data_of, args, kwargs, sys._getframe(1), True)
        if not wrapped(data):
            return y
        return Masked(data, y._mask, y._fill_value, y._hardmask)

    def data_of(self, *args, **kwargs):
        """The data of the masked array NumPy's factory makes (the call a replay redoes)."""
        return self.original(*args, **kwargs).data


class _Binary(_StandIn):
    """np.ma's ``_MaskedBinaryOperation`` (``np.ma.multiply``, ...) while a differentiation
    runs: its call ``_binary``, its ``outer`` NumPy's code on the data and the masks."""

    def __init__(self, original):
        super().__init__(original, functools.partial(_binary, original.f))

    def outer(self, a, b):
        """``_MaskedBinaryOperation.outer``: the ufunc's outer of the data, masked where
        either element is, there ``a``'s data (broadcast, as np.copyto broadcasts it)."""
        if not (holds_derivative([a, b]) or type(a) is Masked or type(b) is Masked):
            return self.original.outer(a, b)
        da, db = _data(a), _data(b)
        d = self.original.f.outer(da, db)
        m = NOMASK if _mask(a) is NOMASK and _mask(b) is NOMASK else np.logical_or.outer(
            _mask_array(a), _mask_array(b))
        if m is not NOMASK and not np.ndim(m) and bool(m):
            return np.ma.masked
        if m is not NOMASK:
            d = _where(m, da if da.dtype == d.dtype else da.astype(d.dtype), d)
        return Masked(d, m) if np.shape(d) else d


class _Extremum(_StandIn):
    """``np.ma.maximum`` or ``np.ma.minimum`` (an ``_extrema_operation``) as code calls it while
    a differentiation runs: of two arrays, np.ma's ``where`` of its comparison (``greater``,
    ``less``, which it holds itself: not the module's, routed); its ``reduce`` NumPy's code."""

    def __init__(self, original):
        super().__init__(original, lambda a, b: _ma.where(_binary(original.compare.f, a, b), a, b))

    def reduce(self, target, axis=np._NoValue):
        """``_extrema_operation.reduce``: the ufunc's reduction of the data, the masked elements
        filled with the value that never wins, masked where every element reduced is."""
        if not (holds_derivative([target]) or type(target) is Masked):
            return self.original.reduce(target, axis)
        target = _as_masked(target)
        if axis is np._NoValue and target.ndim > 1:
            warnings.warn(f"In the future the default for ma.{self.__name__}.reduce will be "
                          "axis=0, not the current None, to match np."
                          f"{self.__name__}.reduce. Explicitly pass 0 or None to silence this "
                          "warning.", _ma.MaskedArrayFutureWarning, stacklevel=2)
            axis = None
        kwargs = {} if axis is np._NoValue else {"axis": axis}
        m = target._mask
        if m is not NOMASK:
            target = target.filled(self.original.fill_value_func(target.data))
            m = np.logical_and.reduce(m, **kwargs)
        t = self.original.f.reduce(_data(target), **kwargs)
        if np.ndim(t):
            return Masked(t, m, _fill_of(target, None))
        return np.ma.masked if m is not NOMASK and bool(m) else t


def _as_numpy(a):
    """NumPy's value of ``a`` (its masked array of a :class:`Masked`) for a factory to read."""
    if type(a) is Masked:
        mask = memory(a._mask) if wrapped(a._mask) else a._mask  # (a comparison's: traced)
        return np.ma.MaskedArray(memory(a.data), mask=mask, fill_value=a._fill_value,
                                 hard_mask=a._hard)
    return memory(a) if wrapped(a) else a


def _followed_floats(x):
    """Whether ``x`` is a float array the function follows, a constant among them
    (``np.zeros(n)`` of its own): a masked array of it is a :class:`Masked` over it, so that
    the traced values written into either are followed, as ``np.ma.zeros``' are."""
    return wrapped(x) and x.dtype.kind == "f"


def _over_followed_floats(cls, data=None, *args, **kwargs):
    """Whether ``MaskedArray.__new__`` is given ``_followed_floats``
    (``np.ma.masked_array(np.zeros(n), mask=...)``) by the user's code, the frame above the
    routed method's that asks this (SciPy's ``csgraph`` masks a constant it was handed as
    NumPy's masked array, as its code expects)."""
    return _followed_floats(data) and from_user(sys._getframe(3))


_new.on_constants = _over_followed_floats  # type: ignore[attr-defined]
CARRIERS.add(Masked)  # a method given one (np.ma.asarray's MaskedArray.__new__) takes its rule
defmethod(np.ma.MaskedArray, "__new__", _new)
for _original, _composite in [
        (np.ma.masked_where, _masked_where), (np.ma.masked_invalid, _masked_invalid),
        (np.ma.fix_invalid, _fix_invalid), (np.ma.dot, _dot), (np.ma.inner, _inner),
        (np.ma.choose, _choose),
        (np.ma.masked_less, _comparing(np.less)),
        (np.ma.masked_less_equal, _comparing(np.less_equal)),
        (np.ma.masked_greater, _comparing(np.greater)),
        (np.ma.masked_greater_equal, _comparing(np.greater_equal)),
        (np.ma.masked_equal, _comparing(np.equal)),
        (np.ma.masked_not_equal, _comparing(np.not_equal)),
        (np.ma.masked_outside, _masked_outside), (np.ma.masked_inside, _masked_inside),
        (np.ma.getmask, _mask), (np.ma.getmaskarray, _mask_array),
        (np.ma.compressed, lambda x: _as_masked(x).compressed()),
        (np.ma.count, _method_of("count")), (np.ma.sum, _method_of("sum")),
        (np.ma.mean, _method_of("mean")), (np.ma.var, _method_of("var")),
        (np.ma.std, _method_of("std")), (np.ma.max, _method_of("max")),
        (np.ma.min, _method_of("min")), (np.ma.power, _power), (np.ma.median, _median),
        (np.ma.prod, _method_of("prod")), (np.ma.product, _method_of("prod")),
        (np.ma.ptp, _method_of("ptp")), (np.ma.clip, _method_of("clip")),
        (np.ma.diagonal, _method_of("diagonal")), (np.ma.trace, _method_of("trace")),
        (np.ma.take, _method_of("take")), (np.ma.sort, _sort),
        (np.ma.argsort, _method_of("argsort")), (np.ma.argmin, _method_of("argmin")),
        (np.ma.argmax, _method_of("argmax")),
        (np.ma.concatenate, _concatenate), (np.ma.apply_along_axis, _apply_along_axis)]:
    _StandIn(_original, _composite)
_Extremum(np.ma.maximum)
_Extremum(np.ma.minimum)
_Reader(np.ma.filled, _filled)
_Reader(np.ma.getdata, lambda a, subok=True: _data(a))
for _original in vars(np.ma).values():  # np.ma's functions of floats that give floats
    if type(_original) is _ma._MaskedUnaryOperation and isinstance(_original.f, np.ufunc) \
            and "d->d" in _original.f.types:
        _StandIn(_original, _unary(_original))
    elif type(_original) is _ma._DomainedBinaryOperation:
        _StandIn(_original, _domained(_original))
    elif type(_original) is _ma._MaskedBinaryOperation and (
            _original.f in FLOAT_BINARY or "dd->?" in _original.f.types):  # (comparisons)
        _Binary(_original)
_NX: list[tuple] = [  # (np.ma.extras' functions of the data and the mask apart)
    (_of_data_and_mask, [np.ma.diagflat]),
    (_of_data_and_masks, [np.ma.stack, np.ma.vstack, np.ma.hstack, np.ma.column_stack,
                          np.ma.dstack]),
    (_each_of_data_and_mask, [np.ma.atleast_1d, np.ma.atleast_2d, np.ma.atleast_3d])]
for _nx, _originals in _NX:
    for _original in _originals:
        _StandIn(_original, functools.partial(_nx, _original.__wrapped__))
for _original in (np.ma.zeros, np.ma.ones, np.ma.empty, np.ma.zeros_like, np.ma.ones_like,
                  np.ma.empty_like, np.ma.masked_all, np.ma.masked_all_like, np.ma.identity):
    _Factory(_original, None)
del _original, _composite, _nx, _originals
