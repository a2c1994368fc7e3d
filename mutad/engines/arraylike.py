"""The array layer: what traced arrays (reverse mode) and duals (forward mode) share as objects
that behave like ndarrays, as autograd's ``numpy_boxes`` does for its boxes.

* :class:`ArrayMethods`: attributes of the wrapped ``value``, and methods written as the NumPy
  functions that dispatch back to the engine (``x.sum()`` is ``np.sum(x)``);
* Python's operators as ufunc calls, from one table (``OPERATORS``, ``COMPARISONS``) that each
  engine installs with its own dispatch (``install_operators``);
* ``x.flags`` and ``x.flat``; the ``out=`` conventions of NumPy calls (``single_out``,
  ``out_position``); ``stands_for_scalar``;
* the errors for a conversion or a write that would lose a derivative, worded from the user's
  own line of code (``conversion_error``, ``untraced_write``, ``lost_tangent``).
"""

import builtins
import collections
import dis
import functools
import inspect
import linecache
import math
import operator
import re
import sys
import types
import warnings
import weakref
from array import array as python_array

import numpy as np
from numpy.lib import recfunctions
from numpy.lib.array_utils import normalize_axis_index

from ..core.allocation import (HANDED_SUBCLASSES, SUBCLASS_CALLS, SUBCLASS_LIBRARIES,
                               Preexisting, allocate, holds_wrapped, lists_as_arrays, plain_memory,
                               remember_text, shown_class, subclass_rules, writes_in_full)
from ..core.debug import (SCALAR_NAMES, SCALAR_OPERATORS, SCALAR_PASSING, Handling,
                          remember_refusal, scalar_math_error, without_events)
from ..core.errors import (ConstantModifiedError, ConversionError, UnsupportedAttributeError,
                           UnsupportedOperationError, UntracedWriteError, function_name)
from ..core.levels import (WRAPPERS, Tracer, carries_derivative, escaped, handled, innermost,
                           running)
from ..core.registry import SUBCLASS_VIEWS
from .writes import (raised_after_writing, raising_ignored, unknown_write_refused,
                     written_in_place_before_raising)
from ..core.views import (may_overlap, memory, owner, stands_for_scalar, view_as, views, weaken,
                          wrapped, writeable)

OPERATORS = {"add": np.add, "sub": np.subtract, "mul": np.multiply, "truediv": np.true_divide,
             "floordiv": np.floor_divide, "mod": np.remainder, "pow": np.power,
             "matmul": np.matmul, "and": np.bitwise_and, "or": np.bitwise_or,
             "xor": np.bitwise_xor, "lshift": np.left_shift, "rshift": np.right_shift}
COMPARISONS = {"lt": np.less, "le": np.less_equal, "gt": np.greater, "ge": np.greater_equal,
               "eq": np.equal, "ne": np.not_equal}


def install_operators(cls, binary):
    """Give ``cls`` Python's operators: for each ufunc of ``OPERATORS``, ``binary(ufunc)``
    returns the methods for ``a + b``, ``b + a`` and ``a += b``; comparisons take the first.
    Each engine's operators give a weak result where both operands are weak
    (``weak_arithmetic``)."""
    for name, ufunc in OPERATORS.items():
        forward, reflected, inplace = binary(ufunc)
        if name == "pow":
            forward, inplace = _fast_powers(forward, inplace)
        for prefix, method in (("", forward), ("r", reflected), ("i", inplace)):
            method = _operator(method, name, prefix)
            SCALAR_OPERATORS.add(method.__code__)
            setattr(cls, f"__{prefix}{name}__", method)
    for name, ufunc in COMPARISONS.items():
        compare = binary(ufunc)[0]
        setattr(cls, f"__{name}__", _records_compared(compare, name) if name in ("eq", "ne")
                else _ordered(compare, name))


def _records_compared(compare, name):
    """``compare`` (``==`` or ``!=``), which of arrays of records (a structured dtype) is
    NumPy's comparison of whole records (``ndarray.__eq__``: the ufunc has no loop for them):
    booleans, which carry no derivative."""

    def method(self, other):
        value = memory(self)
        if value.dtype.names is not None:
            return getattr(value, f"__{name}__")(memory(other) if wrapped(other) else other)
        if type(other) is int and _weak_number(self):
            other = _exact_against_int(name, other)[1]
            if type(other) is bool:  # (the int is no float: never equal to one)
                return other
        elif type(other) in _NO_NUMBERS and _weak_number(self):
            return NotImplemented  # (Python's: not equal, as a float is to a list)
        return compare(self, other)

    method.__name__ = method.__qualname__ = f"__{name}__"
    return method


_ORDERINGS = {"lt": "<", "le": "<=", "gt": ">", "ge": ">="}


def _ordered(compare, name):
    """The ordering ``compare`` (``<``, ...), which on Python numbers of which one is complex
    (``v ** 0.5 > 1.0`` of a negative ``v``) raises Python's TypeError, where NumPy orders
    complex numbers."""
    symbol = _ORDERINGS[name]

    def method(self, other):
        if getattr(self, "weak", False) is True and weak(other) \
                and (_complex(self) or _complex(other)):
            kinds = (type(_python_number(x)).__name__ for x in (self, other))
            raise TypeError("'{}' not supported between instances of '{}' and '{}'".format(
                symbol, *kinds))
        if type(other) is int and _weak_number(self):
            turned, other = _exact_against_int(name, other)
            if turned != name:
                return getattr(self, f"__{turned}__")(other)
        elif type(other) in _NO_NUMBERS and _weak_number(self):
            return NotImplemented  # (Python's TypeError)
        return compare(self, other)

    method.__name__ = method.__qualname__ = f"__{name}__"
    return method


_NO_NUMBERS = frozenset((list, tuple, range, str, bytes, bytearray, dict, set, frozenset,
                         type(None)))
"""Types of Python's that its float neither computes nor compares with (``1.5 + [1.0]`` is
Python's TypeError, ``1.5 == (1.5,)`` False), where NumPy makes them arrays: a value that
stands for a Python float (``_weak_number``) leaves them to Python, as its float does."""


def _weak_number(x):
    """Whether ``x``, a traced or dual value, stands for a Python number (``x[0].item()``)."""
    return getattr(x, "weak", False) is True and memory(x).ndim == 0


def _exact_against_int(name, n):
    """``(name', other)``: a comparison ``v name' other`` of a Python float ``v`` with a float
    ``other`` that answers as Python's ``v name n`` of the Python int ``n``, which Python
    compares exactly, where NumPy rounds ``n`` to a float first (``2.0**53 < 2**53 + 1`` is
    True in Python, False in NumPy) or raises OverflowError beyond the floats. ``other`` is a
    bool where ``name`` is ``eq`` or ``ne`` and ``n`` is no float: the answer, whatever ``v``.
    An ``n`` a float holds exactly is NumPy's comparison as it is."""
    try:
        near = float(n)
    except OverflowError:
        near = math.inf if n > 0 else -math.inf
    if near == n:  # (Python's exact comparison)
        return name, n
    if name in ("eq", "ne"):
        return name, name == "ne"
    below = near if near < n else math.nextafter(near, -math.inf)
    above = near if near > n else math.nextafter(near, math.inf)
    # v < n is v <= below, v > n is v >= above: no float lies strictly between them and n
    return {"lt": ("le", below), "le": ("le", below), "gt": ("ge", above),
            "ge": ("ge", above)}[name]


_SCALAR_MATH = {"add": "fc", "mul": "fc", "pow": "fc"}
"""The operators for which NumPy's scalar math, on operands that stand for scalars of these
kinds, gives other bits than its loops (``_scalar_math``): complex products and powers round
otherwise; real sums and products (and complex sums, part by part) round alike but may take
the other operand's NaN, as the compiler orders a commutative operation's operands
(``np.float64(nan) + -nan`` is -nan, ``np.add`` of them nan)."""

_PYTHONS = {"add": operator.add, "sub": operator.sub, "mul": operator.mul,
            "truediv": operator.truediv, "pow": operator.pow}
"""The operators that Python computes with its own arithmetic where a Python complex takes
part (``_python_complex``)."""


_OVERFLOWING = {"add": operator.add, "sub": operator.sub, "mul": operator.mul}
"""The operators whose NumPy scalar math warns where integers overflow, and its loops do not
(``integer_events``)."""


def integer_events(result, operation, *operands):
    """Where ``operands`` stand for NumPy's integer scalars (a recording's stand-ins for
    ``np.argmax(x)``, ``(x > 0).sum()``), NumPy's scalar math warns of an overflow of their sum,
    difference, product, negation or absolute value (``np.int8(100) + np.int8(100)``), which
    f may hear, and the ufunc loop that computed ``result`` does not: ``operation`` of the
    scalars raises the events, in the operation that made ``result``, and a replay computes it
    so too (``scalar_math``)."""
    if getattr(result, "ndim", None) != 0 or not all(map(_stands_for_scalar_operand, operands)):
        return
    scalar_math(result, operation)
    scalars = [memory(x)[()] if wrapped(x) else x for x in operands]
    recorder = getattr(getattr(result, "tape", None), "recorder", None)
    if recorder is not None:
        recorder.events_of(operation, scalars)
    else:
        operation(*scalars)


def _operator(method, name, prefix):
    """The method ``__{prefix}{name}__`` from the engine's ``method``: giving way to an operand
    that takes the operation over (``a + b``, and ``a += b`` where NumPy's in-place operator
    gives way too: ``_gives_way``), then the value put right
    where NumPy's scalar math or Python's complex arithmetic computes it (``_scalar_math``,
    ``_python_complex``), or Python's own outcome on Python numbers (``_pythons_own``). One
    function, so that an operation on arrays, nearly every one, costs one call and one
    question more than the engine's own."""
    kinds, pythons = _SCALAR_MATH.get(name), _PYTHONS.get(name)
    overflowing = _OVERFLOWING.get(name)
    giving_way, reflected, repeats = prefix in ("", "i"), prefix == "r", name == "mul"
    in_place = prefix == "i"
    # Python's operator on the plain numbers (its augmented one for ``a op= b``, whose errors
    # say "//=")
    plain = getattr(operator, f"__{'i' if in_place else ''}{name}__")
    pythons_own = plain if name in _PYTHONS_OWN else None
    power = name == "pow"

    def operate(self, other):
        if reflected and (type(other) in HANDED_SUBCLASSES or type(other) in SUBCLASS_LIBRARIES):
            handed = _handed_operator(other, name)
            if handed is not None:  # np.matrix(A) * x: np.matrix's product
                return handed(self)
        if repeats and type(other) in _SEQUENCES and stands_for_scalar(self):
            return _times_sequence(self, other)
        if type(other) in _NO_NUMBERS and _weak_number(self):
            return NotImplemented  # (Python's TypeError, as its float's)
        if giving_way and type(other) not in _NUMBERS and type(other) is not type(self) \
                and _gives_way(type(other), in_place):  # (its class defines __array_ufunc__)
            return NotImplemented
        if pythons_own is not None and weak(other) and weak(self):
            turned = _pythons_own(self, other, _augmented(pythons_own, reflected), reflected)
            if turned is not None:
                return turned
        left, right = (other, self) if reflected else (self, other)
        python = pythons is not None and _pythons_arithmetic(left, right)
        if python:  # (Python raises before the engine computes: 1j / x[0] at 0.0)
            _pythons_value(pythons, self, left, right)
        try:
            if python or weak(self) and weak(other):
                # Python's arithmetic on its numbers, and its complex arithmetic beside
                # NumPy's float64 (a Python float), raises no floating-point event (inf - inf
                # is nan, 1j * inf nan+infj, silently, under any np.errstate), where NumPy's
                # loop computing it warns or raises
                result = without_events(method, self, other)
                events = False
            elif power and _powers_events_differ(self, other, reflected) \
                    or repeats and _complex_scalars(self, other):
                # NumPy's scalar power and complex product raise their own events, not the
                # loop's (-inf ** 0.5 is inf, silently, where np.power warns of nan; (inf+0j)
                # * nan warns where np.multiply is silent): _scalar_math raises them
                result = without_events(method, self, other)
                events = True
            else:
                events = False
                result = method(self, other)
        except FloatingPointError as error:  # (np.errstate's "raise": worded as NumPy's)
            raise scalar_math_error(error, self, other) from None
        except TypeError:  # (no loop for the operands' types: 1j // x[0])
            _raise_plain_error(_augmented(plain, reflected), left, right)
            raise
        value = getattr(result, "value", None)
        if type(value) is np.ndarray and value.ndim:
            return result  # elements of an array: NumPy's loops compute them, as here
        if overflowing is not None and type(value) is np.ndarray and value.dtype.kind in "iu":
            integer_events(result, overflowing, *((other, self) if reflected else (self, other)))
        if python:  # (Python's value, not NumPy's scalar math's)
            _python_complex(result, left, right, pythons)
        elif kinds is not None:
            _scalar_math(result, value, self, other, pythons, kinds, reflected, events)
        return result

    operate.__name__ = method.__name__
    operate.__qualname__ = method.__qualname__
    return operate


_SEQUENCES = frozenset((list, tuple, str, bytes))


def _augmented(operation, reflected):
    """Python's operator to ask the error of, ``operation`` or, where a reflected operator runs
    for the program's augmented assignment, its augmented one: ``n //= x[0]`` of a Python or
    NumPy number ``n``, which has no ``__ifloordiv__``, calls ``x[0].__rfloordiv__``, and
    Python's and NumPy's error says "//=" (the program's instruction tells, or the function it
    calls: ``operator.ifloordiv(n, x[0])``). Asked only where an error is raised."""
    if not reflected:
        return operation
    augmented = getattr(operator, f"i{operation.__name__}")
    frame = _outside(sys._getframe(2), ("mutad",))
    if frame is None or not (_instructions(frame.f_code).get(frame.f_lasti, "").endswith("=")
                             or _calls_any(frame, (augmented,))):  # (operator.ifloordiv)
        return operation
    return augmented


def _not_replayed(x, reason):
    """A decision on the value of ``x`` that a replay would not take again: a recording of the
    call stops, and the call's signature is traced."""
    recorder = getattr(getattr(x, "tape", None), "recorder", None)
    if recorder is not None:
        recorder.refuse(reason)


_PYTHONS_OWN = {"truediv": operator.truediv, "floordiv": operator.floordiv,
                "mod": operator.mod, "pow": operator.pow}
"""The operators on Python numbers (values standing for them, ``x[0].item()``) whose outcome
is Python's own, not NumPy's (``_pythons_own``)."""


def _pythons_own(self, other, operation, reflected):
    """Python's outcome of ``self OP other`` (``other OP self`` where ``reflected``), both
    standing for Python numbers, where it is not NumPy's: Python raises (ZeroDivisionError of
    ``v / 0.0``, ``v // 0.0``, ``v % 0.0``, ``0.0 ** -1.0``; OverflowError of ``10.0 ** v``
    beyond the floats) where NumPy gives inf or nan, and a negative number to a fractional
    power is Python's complex number, where NumPy's is nan: that power is then computed in
    complex numbers (``_python_complex`` puts Python's value). None where the operation is
    NumPy's as well."""
    exact = _pythons_value(operation, self, *((other, self) if reflected else (self, other)))
    if type(exact) is not complex or _complex(self) or _complex(other):
        recorder = getattr(getattr(self, "tape", None), "recorder", None)
        if recorder is not None and recorder.ready:  # a replay asks Python again, first
            recorder.pythons_own(operation, (other, self) if reflected else (self, other),
                                 type(exact))
        return None
    _not_replayed(self, "a negative Python number to a fractional power, Python's complex")
    if reflected:  # other is a Python number
        return complex(_python_number(other)) ** self
    z = self.astype(np.complex128)
    weaken(z)
    return z ** other


def _pythons_divmod(x, other, left, right):
    """Python's error of ``divmod(left, right)`` where both stand for Python numbers (``x`` the
    traced or dual one of them, ``other`` the other), its own (``float divmod()``), not its
    ``//``'s."""
    if weak(other) and weak(x):
        _pythons_value(divmod, x, left, right)


def _pythons_value(operation, x, left, right):
    """``operation`` of the Python numbers ``left`` and ``right`` stand for (``x`` the traced
    or dual one of them), or its error (``1j / 0.0``: ZeroDivisionError), raised before the
    engine computes anything: a dual's tangent, whose events would be issued once f returns,
    is not computed for a value that was not. A call that raised is not replayed (a program
    may catch the error)."""
    try:
        return operation(_python_number(left), _python_number(right))
    except (ZeroDivisionError, OverflowError, TypeError):
        _not_replayed(x, "Python's arithmetic raised")
        raise


def _raise_plain_error(operation, left, right):
    """Where ``left`` and ``right`` stand for numbers (NumPy's scalars or Python's) and
    ``operation`` of those numbers raises TypeError, raises it: the operation the engine
    refused with the ufunc's TypeError is refused by NumPy's scalar or Python's number in its
    own words (``np.complex128(1) // 2``: "unsupported operand type(s) for //"). Returns where
    the numbers compute it (the engine's error stands)."""
    if not (_stands_for_scalar_operand(left) and _stands_for_scalar_operand(right)):
        return
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        try:
            operation(_plain_number(left), _plain_number(right))
        except TypeError as error:
            raise error from None


def _plain_number(x):
    """The number ``x`` stands for: Python's (``_python_number``) where it is weak, else NumPy's
    scalar."""
    if not wrapped(x):
        return x
    return _python_number(x) if weak(x) else memory(x)[()]


def _times_sequence(scalar, sequence):
    """A value standing for NumPy's scalar times a Python sequence, as NumPy's scalar does it
    (``np.count_nonzero(m) * [0.0]``): an integer's repeats the sequence, its value read by
    ``__index__`` (a decision); another kind's is Python's TypeError. (An array's broadcasts
    over the sequence's items.)"""
    dtype = memory(scalar).dtype
    if dtype.kind in "iu":
        return operator.index(scalar) * sequence
    raise TypeError(f"can't multiply sequence by non-int of type '{dtype.type.__name__}'")


def _python_complex(result, left, right, operation):
    """Puts right ``result`` of ``left OP right`` where Python's arithmetic, not NumPy's,
    computes it (``_pythons_arithmetic``): a Python complex (or a value standing for
    one) on the left of a Python number or NumPy's float64 scalar (which is a Python float:
    ``1j * np.sin(d)`` is Python's complex), and a Python float on the left of a Python
    complex. Python's complex division and power round otherwise than NumPy's loops; the
    result stands for Python's complex (weak), its value Python's (``put_right``, which a
    replay does too)."""
    if not wrapped(result):
        return
    weaken(result)
    put_right(result, functools.partial(_on_pythons_numbers, operation), _python_number(left),
              _python_number(right))


def _on_pythons_numbers(operation, *scalars):
    """``operation`` of the Python numbers ``scalars`` stand for, Python's own arithmetic, as
    NumPy's scalar (the value a traced one holds). ``put_right`` hands it Python's numbers; a
    replay, which computes the operation again, NumPy's scalars (``replay._on_scalars``, which
    the value's partials compute on), whose own arithmetic rounds otherwise
    (``(-2j) ** 1.5``)."""
    return np.asarray(operation(*(_python_scalar(x) for x in scalars)))[()]


_PYTHONS_ABS = functools.partial(_on_pythons_numbers, abs)


def _python_scalar(x):
    """The Python number NumPy's scalar ``x`` stands for (``_python_number``), else ``x``."""
    if not isinstance(x, np.generic):
        return x
    value = x.item()
    return float(value) if type(value) is int else value


def _pythons_arithmetic(left, right):
    """Whether Python computes ``left OP right`` with its complex arithmetic (see
    ``_python_complex``)."""
    if not (weak(left) and (weak(right) or _float64_scalar(right))):
        return False
    return _complex(left) or (_complex(right) and weak(right))


def _complex(x):
    return type(x) is complex or (wrapped(x) and memory(x).dtype.kind == "c")


def _python_number(x):
    if not wrapped(x):
        return x
    value = memory(x)[()].item()
    return float(value) if type(value) is int else value


def _float64_scalar(x):
    """Whether ``x`` is NumPy's float64 scalar, or a traced or dual value standing for one
    (not a Python float, which a weak value stands for)."""
    if type(x) is np.float64:
        return True
    return wrapped(x) and not getattr(x, "weak", False) \
        and memory(x).dtype == np.float64 and stands_for_scalar(x)


_NUMBERS = frozenset((float, int, complex, bool, np.ndarray))
_ABSENT = object()


def takes_over(operands):
    """Whether an operand among ``operands`` is of a type that takes over NumPy's operations
    on traced or dual values (its class sets ``takes_over_operations``: a masked array of
    traced data, ``rules.masked``): the engines' ``__array_ufunc__`` returns NotImplemented,
    so that NumPy calls that operand's."""
    return takes_over_kinds(map(type, operands))


def takes_over_kinds(kinds):
    """Whether a type among ``kinds`` takes over NumPy's operations (``takes_over``): of a
    NumPy function's arguments (its ``types``), the engines' ``__array_function__`` returns
    NotImplemented, so that NumPy calls that type's (``np.interp(xp, fp=m)`` of a masked
    ``m``)."""
    for kind in kinds:  # (a loop: this runs for calls off the engines' fast path)
        if getattr(kind, "takes_over_operations", False) is True:
            return True
    return False


def subclass_call(call, kinds, args, kwargs):
    """``call(*args, **kwargs)`` (a ufunc's method or a NumPy function of traced or dual
    values) as ``SUBCLASS_CALLS`` computes it where a plain array of such a subclass is among
    the operands, of ``kinds`` (``np.matrix(A) + np.diag(x)``, ``np.linalg.solve(np.matrix(A),
    x)``), which NumPy's call would give as that subclass; None where none is (or where an
    ``out=`` is given)."""
    for kind in kinds:  # (a loop: this runs for calls off the engines' fast paths)
        subclass_rules(kind)
        computes = SUBCLASS_CALLS.get(kind)
        if computes is not None and "out" not in kwargs:
            return computes(call, args, kwargs)
    return None


def _handed_operator(other, name):
    """The operator ``other.__{name}__`` of a plain array ``other`` of a subclass of ndarray
    that a library stands in for (``HANDED_SUBCLASSES``: np.matrix), as its stand-in computes
    it of a traced or dual operand (``np.matrix(A) * x``: np.matrix's product, whose own
    operator took the operand for no array and gave way); None where the stand-in has none."""
    subclass_rules(type(other))
    stand_in = HANDED_SUBCLASSES.get(type(other))
    if stand_in is None:
        return None
    return getattr(stand_in(other.view(np.ndarray)), f"__{name}__", None)


def _gives_way(kind, in_place=False):
    """Whether ``a + b`` with ``b`` of type ``kind`` returns NotImplemented, as NumPy's ndarray
    does, so that Python calls ``b.__radd__(a)``: ``b`` takes over operations on traced values
    (``takes_over``), opts out of ufuncs (``__array_ufunc__ = None``, NEP 13) or, defining no
    ``__array_ufunc__``, has a higher ``__array_priority__`` than an ndarray's 0 and is no
    ndarray (a ``scipy.sparse`` matrix: ``x @ A`` is ``A.__rmatmul__(x)``). ``in_place``: for
    ``a += b``, which gives way (Python then tries ``a + b``, then ``b.__radd__(a)``, and
    rebinds ``a``) only by the priority, or to an operand that takes over in-place operations
    too (``takes_over_in_place_operations``: a stand-in of such a class)."""
    if getattr(kind, "takes_over_operations", False) is True:
        return not in_place or getattr(kind, "takes_over_in_place_operations", False) is True
    if kind in SUBCLASS_LIBRARIES:  # (np.matrix in a program that imports no scipy.sparse)
        subclass_rules(kind)
    if kind in HANDED_SUBCLASSES:  # (np.matrix: its reflected operator, as NumPy's subclass's
        return not in_place       # comes first, x * m its product)
    protocol = getattr(kind, "__array_ufunc__", _ABSENT)
    if protocol is not _ABSENT:
        return protocol is None and not in_place
    if issubclass(kind, (np.ndarray, np.generic)):
        return False
    priority = getattr(kind, "__array_priority__", 0.0)
    return isinstance(priority, (int, float)) and priority > 0.0


# Python's numbers in NumPy's promotion (NEP 50). A Python int, float or complex is *weak*: it
# takes the type of the array or NumPy scalar it meets (float32 * 0.3 is float32), where a
# NumPy scalar or a 0-d array is not (float32 * np.float64(0.3) is float64). A float argument
# is traced as a read-only 0-d float64 array, so it is marked weak (``Buffer.weak``, a dual's
# ``weak``), and the engines hand its number itself to NumPy's calls (``weak_value``); Python's
# arithmetic on weak values (``k * k``, ``-k``, ``k ** 2``, ``0.5 * k``) gives Python numbers,
# so its results are weak too, where a NumPy function of one (``np.sin(k)``) is NumPy's scalar.


def weak(x):
    """Whether ``x`` is a Python number or a traced or dual value that stands for one."""
    kind = type(x)
    if kind is float or kind is int or kind is complex or kind is bool:
        return True
    return getattr(x, "weak", False) is True


def weak_value(value):
    """What a NumPy call takes for the ``value`` of a weak traced or dual value: its Python
    number, or an enclosing level's value (itself weak, which that level hands over so). A
    view of it with elements (``np.broadcast_to(k, shape)``) shares its buffer but is an array,
    as NumPy's broadcast of a Python number is: it is handed over as the array it is."""
    return value.item() if type(value) is np.ndarray and value.ndim == 0 else value


def weak_beside_arrays(args):
    """Whether a function's arguments ``args`` hold a weak value beside an array or NumPy
    scalar, against which NumPy promotes it weakly (``np.where(c, k, u32)`` is float32): its
    rule then takes the Python number, as NumPy's function would. A weak value alone, or in a
    list (``np.array([k, x])``, whose items NumPy makes arrays), is a float64 (or complex128)
    0-d array in NumPy anyway, which a rule takes as the array."""
    found = other = False
    for x in args:
        if getattr(x, "weak", False) is True:
            found = True
        elif isinstance(x, (np.ndarray, np.generic)) or wrapped(x):
            other = True
    return found and other


def _pythons_round(number, ndigits):
    """Python's ``round()`` of the Python float ``number``, as NumPy's float64 scalar (the
    result of a function without a derivative, which a recording holds as a constant)."""
    return np.float64(round(float(number), ndigits))


def weak_arithmetic(result, other=None):
    """``result`` of Python's arithmetic on a weak value (an operator of an engine, once it
    checked its own operand is weak) and ``other`` (None for ``-a``, ``+a``, ``abs(a)``):
    weak where ``other`` is too, as Python's numbers make Python's numbers (a result without
    a derivative, ``k // 0.1``, ``k > 0``, is NumPy's scalar: then the Python number or bool
    itself)."""
    if result is not NotImplemented and (other is None or weak(other)):
        if isinstance(result, (np.inexact, np.bool_)):
            return result.item()
        if wrapped(result) and memory(result).dtype == bool and memory(result).ndim == 0:
            # a comparison's result a recording replay holds as a boolean of the tape (to see
            # decisions on it): Python's bool all the same, which adds as an integer and is
            # True, a decision the replay guards (``Traced._decided``)
            return bool(result)
        weaken(result)
    return result


FAST_POWERS = {2: np.square, 0.5: np.sqrt, -1: np.reciprocal}
"""The Python-number exponents for which NumPy's ``a ** e`` and ``a **= e`` call another
ufunc (its fast path): the same bits as ``np.power`` for real arrays, not for complex ones."""
SCALAR_NAMES.update((ufunc.__name__, "power") for ufunc in FAST_POWERS.values())


def _powers_events_differ(x, other, reflected):
    """Whether ``x ** other`` (``other ** x`` where ``reflected``) of values standing for
    scalars raises other floating-point events by NumPy's scalar math than by the ufunc loop
    the engine computes it with (``-inf ** 0.5``: inf, silently, where ``np.power`` and
    ``np.sqrt`` warn of an invalid value)."""
    if not stands_for_scalar(x) or not _stands_for_scalar_operand(other) \
            or memory(x).dtype.kind not in "fc":
        return False
    a, b = memory(x)[()], memory(other)[()] if wrapped(other) else other
    fast = None if reflected else _fast_power(x, other)
    loop = (lambda: fast(memory(x))) if fast is not None else (
        lambda: np.power(*((np.asarray(b), a) if reflected else (np.asarray(a), b))))
    return _events(loop) != _events(lambda: (b ** a) if reflected else (a ** b))


def _complex_scalars(x, other):
    """Whether ``x`` and ``other`` stand for scalars, one of them complex: NumPy's scalar
    product of them raises other events than ``np.multiply`` (``(inf+0j) * nan`` warns of an
    invalid value, ``(-1e308+1e308j) * 0j`` of none, where the loop is silent, or warns of an
    overflow), and ``_scalar_math`` computes it again."""
    if not stands_for_scalar(x) or not _stands_for_scalar_operand(other):
        return False
    return memory(x).dtype.kind == "c" or _complex(other) or isinstance(other, np.complexfloating)


def _events(compute):
    """The floating-point events ``compute()`` raises, in NumPy's words."""
    heard = []
    with Handling(all="call", call=lambda event, flag: heard.append(event)):
        compute()
    return heard


def _scalar_math(result, value, self, other, operation, kinds, reflected, events=False):
    """Puts right ``result`` (its ``value``) of ``self OP other`` (``a * b``, ``b * a``,
    ``a *= b``, ``a ** b``, ...) to the value NumPy's scalar math gives where both operands
    stand for scalars of a kind in ``kinds`` (``z[0] * z[1]`` of complex ones, ``x[0] **
    x[1]``): it rounds them otherwise than the ufunc loops, which compute the rest (the
    record, the partials), so the result's value is put right afterwards, ``operation(a, b)``
    of NumPy's scalars."""
    if type(value) is not np.ndarray or value.dtype.kind not in kinds or value.ndim \
            or not stands_for_scalar(self) or not _stands_for_scalar_operand(other):
        return
    power = operation is operator.pow
    if power and not reflected and _fast_power(self, other) is not None:
        # computed by a ufunc of one operand (fast_power)
        put_right(result, _SCALAR_POWERS[type(other), other], memory(self)[()], events=events)
        return
    numbers = (weak(other), weak(self)) if reflected else (weak(self), weak(other))
    if numbers[0] != numbers[1]:  # a Python number beside NumPy's scalar takes its type
        operation = functools.partial(_on_numbers, operation, numbers)
    nan_only = not power and value.dtype.kind == "f"  # (a real sum or product)
    if nan_only and not math.isnan(value):  # the loops' bits: a replay asks after a NaN
        scalar_math(result, operation, nan_only)
        return
    a, b = memory(self)[()], memory(other)[()] if wrapped(other) else other
    put_right(result, operation, *((b, a) if reflected else (a, b)), nan_only=nan_only,
              events=events)


def put_nan_right(result, self, other, ufunc, reflected):
    """``_scalar_math`` of the fast operators' ``result`` (``tracing._fast_operator``), on real
    values, where the loop's NaN may not be NumPy's scalar math's."""
    name = _SCALAR_UFUNCS.get(ufunc)
    if name is not None:
        _scalar_math(result, result.value, self, other, _PYTHONS[name], _SCALAR_MATH[name],
                     reflected)


def _on_numbers(operation, numbers, *scalars):
    """``operation`` of NumPy's scalars ``scalars``, those that ``numbers`` marks as the Python
    numbers they stand for (``_python_scalar``): beside NumPy's float32 scalar, a Python float
    takes float32's math (``np.float32(1.3) ** x[0].item()``), where the float64 scalar the
    engine and a replay hold for it would widen the operation."""
    return operation(*(_python_scalar(x) if number else x
                       for x, number in zip(scalars, numbers, strict=True)))


def numpys_scalar_operator(ufunc, inputs):
    """The reflected operator of NumPy's scalar ``a`` on the left of a traced or dual value
    standing for a scalar (``np.float32(1.3) ** x[0].item()``), or None. NumPy's scalar does
    not hand such an operator to the right operand's ``__rpow__``: it calls the ufunc, which
    reaches ``__array_ufunc__`` as ``np.power(a, v)`` would, though NumPy computes the
    operator with its scalar math, which rounds otherwise than the loops (``_SCALAR_MATH``)
    and words its events so (``np.float64(1.0) / (x[1] - x[1])``: "divide by zero encountered
    in scalar divide"). The calling frame's instruction tells the two apart: an operator goes
    to the value's reflected method, which puts its value right (``_scalar_math``) and its
    events' words (``debug.SCALAR_OPERATORS``)."""
    name = _REFLECTED.get(ufunc)
    if name is None or len(inputs) != 2 or not issubclass(type(inputs[0]), np.generic) \
            or not wrapped(inputs[1]) or not stands_for_scalar(inputs[1]):
        return None
    frame = sys._getframe(2)  # (the program's: NumPy's scalar calls the ufunc from C)
    if _instructions(frame.f_code).get(frame.f_lasti) not in _SCALAR_OPERATORS[name] \
            and not _calls_any(frame, _OPERATOR_FUNCTIONS[name]):
        return None
    return getattr(type(inputs[1]), f"__r{name}__")(inputs[1], inputs[0])


SCALAR_PASSING.add(numpys_scalar_operator.__code__)
_SCALAR_UFUNCS = {OPERATORS[name]: name for name in _SCALAR_MATH}
_SCALAR_OPERATORS = {"add": ("+", "+="), "sub": ("-", "-="), "mul": ("*", "*="),
                     "truediv": ("/", "/="), "floordiv": ("//", "//="), "mod": ("%", "%="),
                     "pow": ("**", "**=")}
_REFLECTED = {OPERATORS[name]: name for name in _SCALAR_OPERATORS}
_OPERATOR_FUNCTIONS = {"add": (operator.add, operator.iadd),
                       "sub": (operator.sub, operator.isub),
                       "mul": (operator.mul, operator.imul),
                       "truediv": (operator.truediv, operator.itruediv),
                       "floordiv": (operator.floordiv, operator.ifloordiv),
                       "mod": (operator.mod, operator.imod),
                       "pow": (operator.pow, operator.ipow, builtins.pow)}
"""The functions that apply an operator of ``_SCALAR_OPERATORS`` (``operator.pow(a, v)``,
``pow(a, v)``), through NumPy's scalar's own method as the operator does."""


def _calls_any(frame, functions):
    """Whether the call ``frame`` runs calls one of ``functions``, named so in its source
    (``pow``, ``op.pow``: attributes of modules alone are looked up again)."""
    called = _called(frame)
    if called is None:
        return False
    head, *rest = called.split(".")
    found = frame.f_locals.get(head, frame.f_globals.get(head, getattr(builtins, head, None)))
    for name in rest:
        if type(found) is not types.ModuleType:
            return False
        found = getattr(found, name, None)
    return any(found is function for function in functions)


@functools.lru_cache(maxsize=256)
def _instructions(code):
    """The binary operators ``code`` runs, by the offset of their instruction."""
    return {i.offset: i.argrepr for i in dis.get_instructions(code) if i.opname == "BINARY_OP"}


_SCALAR_POWERS = {(type(e), e): functools.partial(lambda a, e: a ** e, e=e) for e in (2, 0.5, -1)}
"""``a ** e`` of one NumPy scalar ``a`` for the exponents of ``FAST_POWERS``: what NumPy's
scalar math gives where the engine's value came from a ufunc of one operand."""


def put_right(result, operation, *scalars, nan_only=False, events=False):
    """The traced or dual ``result`` of NumPy's scalars ``scalars`` with the value NumPy's
    scalar math gives, ``operation(*scalars)``, where the ufunc loop that computed it (and
    the record, the partials) rounded otherwise, or (``nan_only``) took the other NaN; a
    replay computes it so too. With ``events``, the loop ran without raising its events, and
    ``operation`` raises NumPy's scalar math's."""
    value = getattr(result, "value", None)
    if type(value) is not np.ndarray or value.dtype.kind not in "fc" or value.ndim:
        return
    scalar_math(result, operation, nan_only)
    if events or np.isfinite(value):
        exact = np.asarray(operation(*scalars), value.dtype)
    else:  # the loop warned of the events NumPy's scalar math warns of, once (x[0] * inf)
        with Handling(all="ignore"):
            exact = np.asarray(operation(*scalars), value.dtype)
    if exact.tobytes() != value.tobytes():  # the last bit, or the sign of a zero
        value.flags.writeable = True
        value[()] = exact
        value.flags.writeable = False


def scalar_math(result, operation, nan_only=False):
    """Tells a recording that NumPy's scalar math, ``operation``, made ``result`` (where
    ``nan_only``, bits other than the loop's only where it is NaN)."""
    recorder = getattr(getattr(result, "tape", None), "recorder", None)
    if recorder is not None:
        recorder.scalar_math(result, operation, nan_only)


def put_abs_right(result, x):
    """Puts right ``result`` of ``abs(x)`` where ``x`` stands for a complex scalar: NumPy's
    scalar math rounds otherwise than the loop; and of a Python complex number, Python's own
    abs, whose NaN is its own (hypot keeps a NaN part's sign) and which raises OverflowError
    beyond the floats, where NumPy's is inf."""
    if not stands_for_scalar(x):
        return
    if not (weak(x) and _complex(x)):
        put_right(result, abs, memory(x)[()])
        return
    try:
        abs(_python_number(x))
    except OverflowError:
        _not_replayed(x, "Python's arithmetic raised")  # (a program may catch it)
        raise
    put_right(result, _PYTHONS_ABS, memory(x)[()])  # (a replay's raises: it traces the call)


def put_square_right(result, x):
    """Puts right ``result`` of ``np.square(x)`` where ``x`` stands for a complex scalar:
    NumPy squares a complex scalar by a loop of its own, which rounds otherwise than the loop
    of arrays (and 0-d arrays): ``np.square(np.complex128(2.09868411346781 +
    0.5449101394377727j)).real`` is 4.107547948060073, of the 0-d array 4.107547948060074.
    Returns ``result``."""
    if stands_for_scalar(x) and memory(x).dtype.kind == "c":
        put_right(result, np.square, memory(x)[()])
    return result


def _stands_for_scalar_operand(x):
    """Whether ``x`` is a Python or NumPy number, or a traced or dual value standing for one."""
    if isinstance(x, (int, float, complex, np.generic)):
        return not isinstance(x, bool)
    return wrapped(x) and stands_for_scalar(x)


def _fast_power(x, exponent):
    """The ufunc of ``FAST_POWERS`` NumPy's ``x ** exponent`` calls (its ``fast_scalar_power``),
    or None for ``np.power``: for Python's int 2 (np.square, of a boolean array an int8), and
    of a float or complex array for Python's int -1 and float 0.5. (``k ** -1`` of an integer
    is NumPy's ValueError, not a reciprocal; ``z ** 2.0`` of a complex array rounds otherwise
    than ``np.square``; ``b ** 2`` of NumPy's boolean scalar, ``(x[0] > 0) ** 2``, is its
    scalar math's int64, np.power's, not an int8.)"""
    kind = type(exponent)
    if kind is int and exponent == 2:
        return np.square if memory(x).dtype.kind in "iufc" or memory(x).dtype.kind == "b" \
            and not stands_for_scalar(x) else None
    if (kind is int and exponent == -1 or kind is float and exponent == 0.5) \
            and memory(x).dtype.kind in "fc":
        return FAST_POWERS[exponent]
    return None


def _fast_powers(power, power_in_place):
    """``__pow__`` and ``__ipow__`` taking NumPy's fast path, ``power`` and ``power_in_place``
    for other exponents."""

    def fast_power(self, other):
        ufunc = _fast_power(self, other)
        if ufunc is not None:
            result = ufunc(self)
            return weak_arithmetic(result) if self.weak else result
        return power(self, other)

    def fast_power_in_place(self, other):
        ufunc = _fast_power(self, other)
        if ufunc is not None:
            if stands_for_scalar(self):
                result = ufunc(self)
                return weak_arithmetic(result) if self.weak else result
            return ufunc(self, out=self)
        return power_in_place(self, other)

    return fast_power, fast_power_in_place


FORWARDED = ("sum", "mean", "prod", "max", "min", "var", "std", "cumsum", "cumprod", "ravel",
             "swapaxes", "squeeze", "dot", "clip", "diagonal", "trace", "take", "repeat",
             "argmax", "argmin", "argsort", "nonzero", "any", "all", "round",
             "searchsorted", "argpartition", "choose")
"""ndarray methods that are the NumPy function of the same name, called on the array (not
``ptp``, which NumPy 2 removed from its arrays)."""

SCALAR_METHOD_FUNCTIONS = frozenset({
    np.transpose, np.permute_dims, np.matrix_transpose, np.moveaxis, np.swapaxes, np.reshape,
    np.squeeze, np.take, np.clip, np.round, np.around, np.real, np.imag})
"""NumPy functions that call the method of their argument's name on what is not an ndarray
(``_wrapfunc``, or the ``.real`` attribute): of a NumPy scalar they return what the scalar's
method does, a scalar where an array's would return a 0-d array (``numpy_scalar``)."""


def by_mutad(frame):
    """Whether mutad's own code made the call ``frame`` runs, past the allocation mode's
    wrappers of NumPy's functions, which pass the program's calls on."""
    while frame.f_globals.get("__name__") == _MODE and frame.f_back is not None:
        frame = frame.f_back
    return str(frame.f_globals.get("__name__")).partition(".")[0] == "mutad"


_MODE = Preexisting.__module__  # (the allocation mode's module)


def numpy_scalar(x, y, converts=False):
    """``y``, a method's result (or a ``SCALAR_METHOD_FUNCTIONS``' one) for ``x``, as NumPy
    gives it: where ``x`` stands for a NumPy scalar, a 0-d ``y`` is a scalar too (its methods
    return ``PyArray_Return`` of the array method's result), a value of its own and immutable
    (``stands_for_scalar``), not a writeable array or a view of ``x``: writing into it would
    otherwise write through every other name of it (``v = x[0].copy(); w = v; v += 1``).
    A view of one element of ``x`` (``s.reshape(1, 1)``, ``s.ravel()``; of a function that
    ``converts`` its argument with ``np.asanyarray``, ``np.atleast_2d(s)``, a 0-d view too) is
    a view of the new, writeable array NumPy makes of the scalar: a writeable copy. (A
    broadcast, ``np.broadcast_to``, is read-only in NumPy too.) A plain 0-d ``y`` (of no
    derivative: ``s.astype(int)``) is NumPy's scalar, which indexes as one (``M[i]`` a view).
    For the program's calls (and NumPy's and SciPy's code), not mutad's rules: they compute
    with an enclosing differentiation's values as with plain 0-d arrays, whose methods return
    arrays (a view there is the view the rule's result is)."""
    if wrapped(y) and wrapped(x) and stands_for_scalar(x) and not stands_for_scalar(y) \
            and memory(y).size == 1 and not by_mutad(sys._getframe(2)):
        # (the caller of the method calling this)
        if memory(y).ndim == 0 and not converts:
            y = scalar_copy(y)
            if x.weak:  # a Python number's part (z.imag): a Python float
                weaken(y)
        elif not writeable(memory(y)) and views(memory(y), memory(x)):
            y = np.copy(y)
    elif type(y) is np.ndarray and not y.ndim and not converts and wrapped(x) \
            and stands_for_scalar(x) and not by_mutad(sys._getframe(2)):
        y = y[()]  # a plain result (no derivative: s.astype(int)) is NumPy's scalar itself
    return y


def scalar_copy(y):
    """A copy of traced or dual 0-d ``y`` standing for NumPy's scalar (``stands_for_scalar``):
    a value of its own, read-only, as NumPy's scalars are immutable."""
    y = np.copy(y)
    memory(y).flags.writeable = False
    recorder = getattr(getattr(y, "tape", None), "recorder", None)
    if recorder is not None:  # (the step that made the copy has stored it: a
        recorder.made_scalar(y)  # replay's is a 0-d array, where it is an index)
    return y


def record_field(x, y):
    """``y``, ``x[key]``, as NumPy gives it where ``x`` is one record (``one_record``:
    NumPy's ``np.void``) and the program reads its field: of numbers, their scalar (a copy,
    ``rec[1]['m']``, ``rec[1].m``, ``rec[1][0]``, its iteration); of a subarray or of records,
    a view (``y`` itself)."""
    if one_record(memory(x)) and wrapped(y) and memory(y).ndim == 0 \
            and memory(y).dtype.names is None:
        return scalar_copy(y)
    return y


def _call(name):
    func = getattr(np, name)

    def method(self, *args, **kwargs):
        return numpy_scalar(self, func(self, *args, **kwargs))

    method.__name__ = name
    method.__doc__ = f"As ``ndarray.{name}``; differentiated through ``np.{name}``."
    return method


_SPECS_IN_FULL = {}
"""Whether a format specification may write a float in full (``writes_in_full`` of float16's)."""


class ArrayMethods(Tracer):
    """What traced and dual arrays share: attributes of ``value``, and methods written as the
    NumPy functions that dispatch back to them."""

    __slots__ = ()

    # isinstance(x, np.ndarray), isinstance(x[0], float) answer as of NumPy's values
    __class__ = property(lambda self: shown_class(self, numpy_class))

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        array_methods_only(cls)  # (the engines' own: Traced.astype)

    shape = property(lambda self: self.value.shape, lambda self, shape: self._refuse(
        "x.shape = ...", "it stands for the caller's array (an argument, or an array made "
        "before the call that the function wrote into), whose shape stays. Use "
        "x = x.reshape(...), or set the shape of such an array before the function's first "
        "write into it."))
    dtype = property(lambda self: self.value.dtype, lambda self, dtype: self._refuse(
        "x.dtype = ...", "reinterpreting its bytes has no derivative. Use x = x.astype(...)."))
    ndim = property(lambda self: self.value.ndim)
    size = property(lambda self: self.value.size)
    itemsize = property(lambda self: self.value.itemsize)
    nbytes = property(lambda self: self.value.nbytes)
    strides = property(lambda self: self.value.strides, lambda self, strides: self._refuse(
        "x.strides = ...", "use indexing or reshape for views."))
    flags = property(lambda self: Flags(self))
    T = property(lambda self: self if stands_for_scalar(self) else np.transpose(self))
    mT = property(lambda self: np.swapaxes(self, -1, -2))
    # Of a complex array, views of its memory (writing them writes the array); of a real one,
    # the array itself, and read-only zeros, as NumPy gives.
    real = property(lambda self: numpy_scalar(self, np.real(self)) if self.dtype.kind == "c"
                    else self,
                    lambda self, value: np.real(self).__setitem__(Ellipsis, value))

    def _set_imaginary_part(self, value):
        if self.dtype.kind != "c":
            raise TypeError("array does not have imaginary part to set")  # NumPy's error
        np.imag(self)[...] = value

    def _imaginary_part(self):
        part = numpy_scalar(self, np.imag(self))
        # of a Python number, a Python float (a real one's 0.0 is NumPy's zeros otherwise)
        return weak_arithmetic(part) if self.weak else part

    imag = property(_imaginary_part, _set_imaginary_part)
    device = property(lambda self: self.value.device)

    @property
    def flat(self):
        """As ``ndarray.flat``: elements in C order, read and written by flat position."""
        return FlatIterator(self)

    @flat.setter
    def flat(self, value):
        FlatIterator(self)[...] = value

    @property
    def base(self):
        """None for an array that owns its memory, else the array that owns it, as NumPy's
        (``view.base is x``) where the program made it and still holds it, or a new array
        over all of that memory."""
        if memory(self).base is None:
            return None
        owning = self.owning()
        if owning is not None and memory(self).base is memory(owning):  # as NumPy's chain
            return owning
        return self.owner_view()

    def owning(self):
        """The array of this kind that owns this one's memory, if the program made it so and
        it is known (``base``), else None."""
        return None

    def __getattr__(self, name):
        # (reached where Python's lookup failed: NumPy's error, of the class of what NumPy
        # would hand the program, 'numpy.ndarray' where code asks x.mask, an ArrayMethod's of a
        # value standing for a Python float 'float'; an attribute of the class raises its own
        # error again, x.__array_interface__'s refusal)
        for kind in type(self).__mro__:
            found = kind.__dict__.get(name)
            if found is not None:
                if not isinstance(found, ArrayMethod):  # (ArrayProperty's too)
                    return object.__getattribute__(self, name)
                break
        raise AttributeError(f"'{_type_name(self)}' object has no attribute '{name}'",
                             name=name, obj=self)

    def __len__(self):
        if stands_for_scalar(self):  # (Python's error of NumPy's scalar, or of its float)
            raise TypeError(f"object of type '{_type_name(self)}' has no len()")
        if self.ndim == 0 and one_record(memory(self)):  # (NumPy's np.void: its fields)
            return len(self.dtype.names)
        return len(self.value)

    def __iter__(self):
        refused = bytearray_refused(self, sys._getframe(1))  # (bytearray(x) iterates it)
        if refused is not None:
            raise refused
        if stands_for_scalar(self):
            raise TypeError(f"'{_type_name(self)}' object is not iterable")
        if self.ndim == 0 and one_record(memory(self)):  # (NumPy's np.void: its fields)
            return (record_field(self, self[i]) for i in range(len(self)))
        return (self[i] for i in range(len(self)))

    # What Python reads of the value without converting it (a string, a hash, a truth): as
    # NumPy's array or scalar gives it, through ``_decided`` (which a replay guards).

    def _decided(self, decide):
        """``decide(v)`` of the value ``v`` NumPy would hand Python: its scalar where this
        stands for one (``x[0]``), else the array."""
        return decide(numpy_value(self.value))

    # (the text of a 0-d value is remembered: the mode's ``float()`` of it gives the value back,
    # where the text may write it in full: ``f"{loss:.3f}"`` is not remembered)

    def __format__(self, spec):
        text = self._decided(lambda v: format(v, spec))
        full = _SPECS_IN_FULL.get(spec)
        if full is None:  # (the shortest floats' digits: no other type's are written in full)
            full = _SPECS_IN_FULL[spec] = writes_in_full(spec, 2)
        return remember_text(self, text, spec) if full else text

    def __str__(self):
        return remember_text(self, self._decided(str))

    def __repr__(self):
        """NumPy's: ``np.float64(1.5)`` of an element, ``array(1.5)`` of a 0-d array, and the
        Python number's of one standing for it (``x[0].item()``, ``repr(x.tolist())``)."""
        if getattr(self, "weak", False) is True:
            return remember_text(self, self._decided(lambda v: repr(v.item())))
        if stands_for_scalar(self):
            return self._decided(repr)
        # (an enclosing differentiation's value, under nested ones: its own repr, NumPy's)
        return self._decided(lambda v: repr(v if isinstance(v, Tracer) else np.asarray(v)))

    def __bool__(self):
        return self._decided(bool)

    def __hash__(self):
        """As NumPy's: a scalar's hash is its number's (``{1.0: w}[x[0]]``); an array has none."""
        if not stands_for_scalar(self):
            raise TypeError("unhashable type: 'numpy.ndarray'")  # NumPy's error
        return self._decided(hash)

    def is_integer(self):
        return self._decided(lambda v: _scalar_method(v, "is_integer")())

    def hex(self):
        return self._decided(lambda v: _scalar_method(v, "hex")())

    def plain_value(self):
        """The plain array this one stands for when converting it loses no derivative (an
        array with no dependence on the arguments), else None."""
        return None

    def _converted(self, what, attempt=None):
        """The plain value, where converting loses no derivative; else the conversion
        ``what`` is refused. Where NumPy refuses it too (``attempt`` of the value raises:
        ``float()`` of an array of several elements), NumPy's error is raised: a program that
        catches it goes on as on NumPy's arrays."""
        value = self.plain_value()
        if value is None:
            if attempt is not None:  # on what NumPy would hand it: a scalar where this stands
                with warnings.catch_warnings():  # for one (float() of a complex scalar is
                    warnings.simplefilter("ignore")  # its real part, of a 0-d array an error)
                    attempt(memory(self)[()] if stands_for_scalar(self) else memory(self))
            if not running(self.level):  # stored during a differentiation, used after it
                raise escaped("a traced array")
            raise remember_refusal(conversion_error(what),
                                   _outside(sys._getframe(1), ("mutad",)))
        return value

    def __float__(self):
        if _formatting(sys._getframe(1)):  # "%.3f" % x: a string of its value, as format()
            return self._decided(float)
        return float(self._converted("float()", float))

    # Integers of a value (a count, an index: ``int(T / dt) + 1``) have derivative zero
    # wherever they have one: NumPy's integer, a decision a replay guards.

    def __int__(self):
        return self._decided(int)

    def __trunc__(self):
        return self._decided(math.trunc)

    def __floor__(self):
        return self._decided(math.floor)

    def __ceil__(self):
        return self._decided(math.ceil)

    def as_integer_ratio(self):
        value = self._converted(".as_integer_ratio()",
                                lambda v: _scalar_method(v[()], "as_integer_ratio")())
        return _scalar_method(value[()], "as_integer_ratio")()

    def __complex__(self):
        return complex(self._converted("complex()", complex))

    def __round__(self, ndigits=None):
        """As NumPy's scalars': ``round()`` of a 0-d value (``x[0]``) is a Python int, as
        ``int()`` is; with ``ndigits`` it is ``np.round(x, ndigits)``, which mutad
        differentiates. Of a Python float (``x[0].item()``) it is a Python float too, of
        Python's value: Python rounds the decimal the float is exactly (``round(2.675, 2)`` is
        2.67, as 2.675 is 2.67499...), NumPy scales, rounds and scales back (2.68), and
        overflows past 1e306 where Python's is the number. An array has no ``round()``."""
        if self.ndim:
            raise TypeError("type numpy.ndarray doesn't define __round__ method")  # NumPy's
        if self.dtype.kind == "c":  # NumPy's complex scalars have no round() either
            raise TypeError(f"type numpy.{self.dtype.name} doesn't define __round__ method")
        if ndigits is None:
            return self._decided(round)
        if not self.weak:
            return np.round(self, ndigits)
        ndigits = operator.index(ndigits)  # (Python's: an integer, a decision if computed)
        tape = getattr(self, "tape", None)
        if tape is None or tape.recorder is None or not tape.recorder.ready:
            return round(float(memory(self)), ndigits)  # (no derivative)
        # a recording holds it as a constant computed from traced values, a step it redoes
        return weak_arithmetic(tape.recorder.nondiff(_pythons_round, (self, ndigits), {}))

    # ``.item()`` and ``.tolist()`` give Python numbers: of a value that depends on the
    # arguments, traced values standing for them (``weaken``), as ``math``'s functions give, so
    # that ``loss += (r @ r).item()`` is followed. NumPy's own errors (``.item()`` of several
    # elements) are NumPy's; integers and booleans have no derivative and are NumPy's.

    def item(self, *args):
        value = memory(self)
        number = value.item(*args)  # NumPy's errors, and what NumPy gives
        if type(number) is tuple and self.dtype.names is not None \
                and self.plain_value() is None:
            return self._record_item(args)
        if self.plain_value() is not None or not isinstance(number, (float, complex, np.inexact)):
            return number
        if not args:  # (NumPy's scalar where .item() gives one, below)
            element = self.reshape(-1)[0] if isinstance(number, np.inexact) else self.reshape(())
        elif len(args) == 1 and not isinstance(args[0], tuple):
            element = self.reshape(-1)[operator.index(args[0])]
        else:
            element = self[args[0] if len(args) == 1 else args]
        if isinstance(number, np.inexact):  # no Python number holds it (np.longdouble's
            return element  # .item() is NumPy's scalar): that scalar, the element itself
        return _as_python_number(element, type(number))

    def _record_item(self, args):
        """``item(*args)`` of an array of records: NumPy's tuple of one record's fields, each
        as ``item`` gives it (a number with its derivative; a field of records a tuple, text
        NumPy's str), a subarray field a copy of it."""
        if not args:
            index = (0,) * self.ndim
        elif len(args) == 1 and not isinstance(args[0], tuple):
            index = np.unravel_index(operator.index(args[0]), self.shape)
        else:
            index = args[0] if len(args) == 1 else args
        record = self[tuple(index) + (Ellipsis,)]  # (the record as a 0-d view, as np.void's)
        fields = (record[name] for name in self.dtype.names)
        return tuple((field.item() if isinstance(field, np.generic) else field)
                     if isinstance(field, (str, bytes))
                     else field.item() if np.ndim(field) == 0 else field.copy()
                     for field in fields)

    def tolist(self):
        if self.plain_value() is not None or self.dtype.kind not in "fcV" or (
                self.dtype.kind == "V" and self.dtype.names is None):
            return self._converted(".tolist()").tolist()
        if self.ndim == 0:
            return self.item()
        return [row.tolist() for row in self]

    # Conversions of the bytes: those of a value that does not depend on the arguments (a
    # constant, ``np.ones(3).tobytes()``) are NumPy's; of a traced value, refused.

    def tobytes(self, order="C"):
        return self._converted(".tobytes()").tobytes(order)

    def __bytes__(self):  # bytes(x): NumPy's array gives its buffer's, in C order
        return self._converted("bytes()").tobytes()

    def tofile(self, *args, **kwargs):
        return self._converted(".tofile()").tofile(*args, **kwargs)

    def dump(self, file):
        return self._converted(".dump()").dump(file)

    def dumps(self):
        return self._converted(".dumps()").dumps()

    def __reduce__(self):
        return self._converted("pickling").__reduce__()

    def __copy__(self):
        # of NumPy's scalar, a value as immutable as it (a copy would be a writeable array); of
        # an array, laid out as it is, as NumPy's copy.copy and copy.deepcopy keep its order
        return self if stands_for_scalar(self) else self.copy(order="K")

    def __deepcopy__(self, memo):
        return self.__copy__()

    def __delitem__(self, key):
        raise ValueError("cannot delete array elements")  # NumPy's error

    def __divmod__(self, other):
        _pythons_divmod(self, other, self, other)
        try:
            return self // other, self % other
        except TypeError:
            _raise_plain_error(divmod, self, other)  # (its own words: "divmod()", not "//")
            numpys_loop_error(np.divmod, (self, other))  # (an array's: "ufunc 'divmod'")
            raise

    def __rdivmod__(self, other):
        _pythons_divmod(self, other, other, self)
        try:
            return other // self, other % self
        except TypeError:
            _raise_plain_error(divmod, other, self)
            numpys_loop_error(np.divmod, (other, self))
            raise

    def to_device(self, device, /, *, stream=None):
        if device != "cpu" or stream is not None:
            return self.value.to_device(device, stream=stream)  # NumPy's error
        return self

    def _refuse(self, what, instead):
        raise UnsupportedOperationError(f"{what} on a differentiated array: {instead}")

    data = property(lambda self: self._refuse(
        "x.data", "its raw memory cannot be followed. Use indexing to read or write elements."))
    ctypes = property(lambda self: self._refuse(
        "x.ctypes", "compiled code reading its memory has no derivative. Give the routine a "
        "rule with mutad.adjoint (docs/guide.md, 'Custom rules'); an array made in the "
        "function for such code is NumPy's own where it is made inside a `with "
        "mutad.plain_allocation():` block."))

    def _interface(self):
        # an AttributeError too: NumPy, converting the array, asks for these first and goes
        # on to __array__ (which says what the conversion would cut) where they are missing
        raise UnsupportedAttributeError(
            "x.__array_interface__ (or __array_struct__) of a differentiated array: it hands "
            "out the address of its memory, whose reads and writes mutad cannot follow. Read "
            "x.shape, x.dtype, x.strides or x.flags for its layout, and give compiled code that "
            "needs its memory a rule with mutad.adjoint (docs/guide.md, 'Custom rules').")

    __array_interface__ = property(_interface)
    __array_struct__ = property(_interface)

    def resize(self, *new_shape, refcheck=True):
        """``x.resize(shape)`` keeping the number of elements: NumPy neither reallocates nor
        checks references, it reshapes a single-segment array in place, and so does this
        (``x.shape = shape``: refused for an argument's array, as the caller's keeps its
        shape). ``x.resize(shape, refcheck=False)`` of another size, of an array the function
        made that owns its memory: NumPy's new memory (the elements in C order, zeros after
        them), made by a copy and a join mutad differentiates, which this array then stands
        for (``adopt``). Else (an argument, a view, NumPy's reference check) refused."""
        if new_shape in ((), (None,)):
            return  # NumPy's x.resize(): nothing to do
        if len(new_shape) == 1 and not isinstance(new_shape[0], (int, np.integer)):
            new_shape = tuple(new_shape[0])
        if all(n >= 0 for n in new_shape) and math.prod(new_shape) == self.size:
            if self.flags.c_contiguous:
                try:
                    self.shape = new_shape
                except UnsupportedOperationError as error:
                    handled(error)  # (refused again, saying what resize does)
                    self._refuse("x.resize(...) of an argument", "NumPy would reshape the "
                                 "caller's array, whose shape stays. Make a new array: "
                                 "x = x.reshape(shape).")
                return
            if not self.flags.f_contiguous:
                raise ValueError("resize only works on single-segment arrays")  # NumPy's
        if refcheck or not self.resizable():
            self._refuse("x.resize(...)", "it replaces the array's memory in place, which "
                         "mutad follows only for an array the function made that owns its "
                         "memory, with refcheck=False, or keeps its number of elements. Make "
                         "a new array: x = np.resize(x, shape), or np.pad / np.concatenate.")
        data = np.zeros(new_shape, self.dtype, like=self)  # (NumPy's error for a negative length)
        kept = min(data.size, self.size)
        data.reshape(-1)[:kept] = np.ravel(self)[:kept]
        self.adopt(data)

    def setflags(self, write=None, align=None, uic=None):
        if write is not None and align is None and uic is None:
            if write is False and self.unwritten_constant():
                # (SciPy's ShortTimeFFT locks the window it is given, made in the function)
                memory(self).setflags(write=False)  # no write into it to undo: read-only now
                return
            if self.lock(bool(write)):
                return
        self._refuse("x.setflags(...)", "mutad writes the array's memory back during the "
                     "reverse pass, so it stays writeable. Leave the flags as they are (a "
                     "read-only flag only guards against writes the program makes), or set "
                     "them on a copy no gradient flows through, mutad.stop_gradient(x).copy().")

    def unwritten_constant(self):
        """Whether this is an array the function made that no derivative reaches and that
        nothing has written into since: nothing of it to put back in a reverse pass."""
        return False

    def lock(self, write):
        """``x.setflags(write=write)`` where the engine can undo it (``Traced.lock``): whether
        it did."""
        return False

    def byteswap(self, inplace=False):
        self._refuse("x.byteswap()", "reinterpreting its bytes has no derivative. Use "
                     "x.astype(...) for another dtype.")

    def getfield(self, dtype, offset=0):
        self._refuse("x.getfield(...)", "reinterpreting its bytes has no derivative. Use "
                     "indexing, or x.astype(...) for another dtype.")

    def setfield(self, val, dtype, offset=0):
        self._refuse("x.setfield(...)", "writing reinterpreted bytes has no derivative. Use "
                     "indexing to write elements.")

    def __neg__(self):
        result = np.negative(self)
        return weak_arithmetic(result) if self.weak else result

    def __invert__(self):
        return np.invert(self)

    def __pos__(self):
        result = np.positive(self)
        return weak_arithmetic(result) if self.weak else result

    def __abs__(self):
        result = np.absolute(self)
        put_abs_right(result, self)
        return weak_arithmetic(result) if self.weak else result

    def reshape(self, *shape, **kwargs):
        return numpy_scalar(self, np.reshape(self, shape[0] if len(shape) == 1 else shape,
                                             **kwargs))

    def transpose(self, *axes):
        """As ``ndarray.transpose``: axes as one tuple or as separate arguments."""
        return numpy_scalar(self, np.transpose(self, axes[0] if len(axes) == 1 else axes or None))

    def flatten(self, order="C"):
        return np.ravel(self, order=order).copy()

    def copy(self, order="C"):
        return numpy_scalar(self, np.copy(self, order=order))

    def conj(self):
        """As ``ndarray.conj``: of a real array, the array itself (not a copy, as ``np.conj``
        makes); of a Python complex number, a Python complex number."""
        if self.dtype.kind != "c":
            return self
        result = np.conjugate(self)
        return weak_arithmetic(result) if self.weak else result

    conjugate = conj

    def sort(self, axis=-1, kind=None, order=None):
        """Sorts in place, as ``ndarray.sort``."""
        self[...] = np.sort(self, axis=axis, kind=kind, order=order)

    def compress(self, condition, axis=None, out=None):
        return np.compress(condition, self, axis=axis, out=out)

    def partition(self, kth, axis=-1, kind="introselect", order=None):
        """Partitions in place, as ``ndarray.partition``."""
        self[...] = np.partition(self, kth, axis=axis, kind=kind, order=order)

    # NumPy's scalars (what a value standing for one is: ``stands_for_scalar``) fill and put
    # into a copy of themselves, which is then dropped: they stay as they are

    def fill(self, value):
        if not stands_for_scalar(self):
            self[...] = value

    def put(self, *args, **kwargs):
        if not stands_for_scalar(self):
            np.put(self, *args, **kwargs)

    def view(self, dtype=None, type=None):
        """As ``ndarray.view``: a new view of the same memory. A complex array viewed as its
        real and imaginary parts (``z.view(np.float64)``) and back is a view like
        ``z.real``: the gradient of a complex value is that of its two parts, laid out as
        they are (docs/guide.md, "Complex numbers and the FFT"), so the view's gradient is
        the same view of the array's. Reinterpreting its bytes as another dtype, or as an
        ndarray subclass, has no derivative and is refused."""
        if isinstance(dtype, builtins.type) and issubclass(dtype, np.ndarray):
            dtype, type = None, dtype
        if (dtype is None or np.dtype(dtype) == self.dtype) and type in (None, np.ndarray):
            return self if stands_for_scalar(self) else self[...]
        if (dtype is None or np.dtype(dtype) == self.dtype) and type in SUBCLASS_VIEWS:
            # (np.recarray's, of NumPy's view's dtype: np.record's records, not np.void's)
            plain = memory(self).view(type).view(np.ndarray)
            y = None if plain.dtype.type is self.dtype.type else view_as(self, plain)
            return SUBCLASS_VIEWS[type](self[...] if y is None else y)
        if type in (None, np.ndarray) and _parts_of_one_another(np.dtype(dtype), self.dtype):
            y = view_as(self, memory(self).view(dtype))  # NumPy's view, and its error
            if y is not None:
                return y
        instead = ("Use x.view(), reshape or indexing for views, and x.astype for another "
                   "dtype.")
        if type not in (None, np.ndarray):  # a user's subclass (class Field(np.ndarray))
            instead = (f"mutad follows plain ndarrays (and np.recarray, np.matrix, np.ma's "
                       f"masked arrays), not {type.__name__}, whose methods and attributes "
                       "it cannot follow: compute with the plain array inside the "
                       "differentiated function, keeping what the subclass adds (units, "
                       f"metadata) beside it, and make the {type.__name__} of the result "
                       "outside it.")
        if self.constant_here():  # (an array the function made: np.arange(4.0).view(S))
            raise UnsupportedOperationError(
                f"ndarray.view({dtype if type is None else type}) of an array mutad follows "
                "as a constant (one the function made, into which traced values may be "
                "written): a view reinterpreting its bytes, or as an ndarray subclass, is not "
                "followed, so what is written through it or into the array would be lost. "
                + instead)
        raise UnsupportedOperationError(
            f"ndarray.view({dtype if type is None else type}) on a differentiated array: "
            "reinterpreting its bytes, or viewing it as an ndarray subclass, has no derivative "
            "(a complex array's view as the floats of its parts, and back, has). " + instead)


def _parts_of_one_another(a, b):
    """Whether one of dtypes ``a`` and ``b`` is complex and the other the real dtype of its
    parts (complex128 and float64)."""
    if a.kind == "f" and b.kind == "c":
        a, b = b, a
    return a.kind == "c" and b.kind == "f" and a.isnative and b.isnative \
        and a.itemsize == 2 * b.itemsize


def _type_name(x):
    """The name Python's errors give the class of what NumPy would hand the program for ``x``
    (``numpy.float64``, ``float``)."""
    kind = numpy_class(x)
    return kind.__name__ if kind.__module__ == "builtins" else f"{kind.__module__}.{kind.__name__}"


def numpy_class(x):
    """The class of what NumPy would hand the program for traced or dual ``x``, which its
    ``__class__`` shows the user's code (``allocation.shown_class``): a Python number's where
    ``x`` stands for one (``x.item()``), NumPy's scalar type where for a scalar (``x[0]``),
    else the class of the array it wraps (``np.ndarray``, a device library's). Read from its
    kind alone, never its values, so a replay has nothing to guard."""
    value = memory(x)
    kind = type(value)
    if kind is Preexisting:
        return np.ndarray
    if kind not in (np.ndarray, float, int, complex):
        return kind
    if np.ndim(value):
        return np.ndarray
    if x.weak:
        return complex if np.iscomplexobj(value) else float
    if kind is np.ndarray and not stands_for_scalar(value) and not one_record(value):
        return np.ndarray  # a 0-d array of the program's own (np.zeros(()))
    return np.asarray(value).dtype.type  # (a replay's number for a traced one: ``numpy_value``)


def numpy_value(value):
    """What NumPy hands Python for a 0-d ``value`` standing for a scalar: the scalar (of a
    Python number a replay holds for a traced one, ``Buffer.weak``, the NumPy scalar tracing
    decided on)."""
    if type(value) in (float, int, complex):
        return np.asarray(value)[()]
    return value[()] if value.ndim == 0 else value


def inexact_output(y):
    """A rule's output ``y``, a Python float or complex (SciPy's norms computed by BLAS return
    them), as NumPy's scalar of its value, which the engines wrap and differentiate as
    NumPy's own results; anything else as it is."""
    kind = type(y)
    return np.float64(y) if kind is float else np.complex128(y) if kind is complex else y


def _as_python_number(element, kind):
    """The traced 0-d ``element`` as the Python ``kind`` (float or complex) ``.item()`` gives:
    its value in double precision (exactly), a value of its own that NumPy promotes weakly."""
    y = np.positive(element.astype(np.float64 if kind is float else np.complex128))
    weaken(y)
    return y


def _scalar_method(v, name):
    """``v.name``, a method of Python's float that NumPy's float scalars have; NumPy's error
    for an array."""
    if isinstance(v, np.ndarray):
        raise AttributeError(f"'numpy.ndarray' object has no attribute '{name}'")
    return getattr(v, name)


ARRAY_ONLY = frozenset(name for name in dir(np.ndarray)
                       if not name.startswith("_") and not hasattr(float, name))
"""ndarray methods a Python float lacks (``sum``, ``reshape``, ``item``)."""


class ArrayMethod:
    """An ndarray method ``name`` of traced and dual values, which a value standing for a
    Python number (``weak``: a float argument, ``x.item()``) lacks, as Python's float does:
    reading it there is Python's ``AttributeError`` (so ``hasattr(k, "sum")`` is False and
    ``sum(v.sum() for v in [u, k])`` fails as in NumPy), for the program's code and NumPy's
    (whose ``np.round(k)`` then takes the path it takes for a float); mutad's own code reads
    it."""

    __slots__ = ("__func__", "name")  # (__func__: the function, as a method's)

    def __init__(self, method, name):
        self.__func__ = method
        self.name = name

    def __get__(self, x, kind=None):
        if x is None:
            return self.__func__
        if getattr(x, "weak", False) is True:  # (``lacked``'s first question: the frame only then)
            self.lacked(x, sys._getframe(1))
        return types.MethodType(self.__func__, x)

    def lacked(self, x, frame):
        """Python's ``AttributeError`` where ``x`` stands for a Python number and the code of
        ``frame`` reading the attribute is not mutad's."""
        if getattr(x, "weak", False) is True and str(frame.f_globals.get(
                "__name__")).partition(".")[0] != "mutad":
            raise AttributeError(
                f"'{numpy_class(x).__name__}' object has no attribute '{self.name}'")


class ArrayProperty(ArrayMethod):
    """An ndarray attribute ``name`` (a property: ``shape``, ``dtype``, ``ndim``) of traced and
    dual values, which a value standing for a Python number lacks, as ``ArrayMethod``'s:
    ``hasattr(k, "shape")`` is False, as of Python's float, where code branches on it."""

    __slots__ = ()

    def __get__(self, x, kind=None):
        if x is None:
            return self.__func__
        if getattr(x, "weak", False) is True:  # (as ``ArrayMethod``'s)
            self.lacked(x, sys._getframe(1))
        return self.__func__.__get__(x, kind)

    def __set__(self, x, value):
        self.__func__.__set__(x, value)


def array_methods_only(cls):
    """Make the ndarray methods ``cls`` defines that Python's float lacks ``ArrayMethod``s, and
    its properties ``ArrayProperty``s."""
    for name in ARRAY_ONLY.intersection(vars(cls)):
        method = vars(cls)[name]
        if inspect.isfunction(method):
            setattr(cls, name, ArrayMethod(method, name))
        elif type(method) is property:
            setattr(cls, name, ArrayProperty(method, name))


def _install_methods():
    for name in FORWARDED:
        setattr(ArrayMethods, name, _call(name))
    array_methods_only(ArrayMethods)


_install_methods()


class Flags:
    """``x.flags`` of a traced or dual array: NumPy's flags, to read; ``writeable`` set as
    ``x.setflags(write=...)`` sets it. Other flags would change the array mutad writes back
    during the reverse pass (or the caller's own array): refused."""

    __slots__ = ("array",)

    def __init__(self, array):
        object.__setattr__(self, "array", array)

    numpy_flags = property(lambda self: self.array.value.flags)

    def __getattr__(self, name):
        return getattr(self.numpy_flags, name)

    def __getitem__(self, key):
        return self.numpy_flags[key]

    def __setattr__(self, name, value):
        if name in ("writeable", "w", "W", "WRITEABLE"):
            self.array.setflags(write=value)
            return
        raise UnsupportedOperationError(
            f"x.flags.{name} = {value!r} on a differentiated array: mutad writes the array's "
            "memory back during the reverse pass. Set flags on a copy (y = x.copy()).")

    def __setitem__(self, key, value):
        self.__setattr__(key, value)

    def __eq__(self, other):
        return self.numpy_flags == getattr(other, "numpy_flags", other)

    __hash__ = None  # type: ignore[assignment]  # unhashable, as NumPy's flags object

    def __repr__(self):
        return repr(self.numpy_flags)


class FlatIterator:
    """``x.flat`` of a traced or dual array, as NumPy's iterator: it reads the elements as they
    are when it reaches them (through ``np.ravel`` where ``x`` is C-contiguous, a view, else at
    the positions ``np.unravel_index`` names), an index gives a copy (or an element), and it
    writes through that view or at those positions. Values too few for the positions repeat,
    as in NumPy."""

    __slots__ = ("base", "position")

    def __init__(self, base):
        self.base = base
        self.position = 0

    def __len__(self):
        return self.base.size

    def __iter__(self):
        return self

    def __next__(self):
        base, k = self.base, self.position
        if k >= base.size:
            raise StopIteration
        self.position = k + 1
        if memory(base).flags.c_contiguous:
            return np.ravel(base)[k]
        return base[np.unravel_index(k, base.shape)]

    def __getitem__(self, key):
        y = np.ravel(self.base)[_plain_key(key)]
        return y if stands_for_scalar(y) else y.copy()  # NumPy's: a new array

    def __setitem__(self, key, value):
        base = self.base
        key = _plain_key(key)
        if hasattr(value, "dtype") and may_overlap(memory(value), memory(base)):
            raise UnsupportedOperationError(
                "x.flat[...] = v where v shares memory with x: NumPy reads v element by "
                "element as it writes x, so that earlier writes show in later reads (x.flat[1:] "
                "= x[:-1] repeats x[0]), which mutad does not follow. Write a copy, "
                "x.flat[...] = v.copy(), for the values v holds now.")
        if value is None or type(value) in (complex, str, bytes):
            # NumPy's conversion by the element type, its errors too (x.flat[0] = 1j into
            # floats: ValueError, x.flat[:2] = 1j: TypeError)
            converted = np.empty(base.shape, base.dtype)
            converted.flat[key] = value
            value = converted.flat[key]
        raised = None
        try:
            positions = np.arange(base.size)[key]
        except IndexError:
            # an index out of bounds: NumPy writes the positions before it, in the index's
            # order, then raises (its error, from the same write into a scratch array)
            try:
                np.empty(base.shape, base.dtype).flat[key] = 0
            except IndexError as error:
                raised = error
            if raised is None or not isinstance(key, (list, np.ndarray)):
                raise
            flat_key = np.ravel(np.asarray(key))
            if flat_key.dtype.kind not in "iu":
                raise
            inside = (flat_key < base.size) & (flat_key >= -base.size)
            key = flat_key[:int(np.argmin(inside))]
            positions = np.arange(base.size)[key]
            count = flat_key.size
        else:
            count = positions.size
        if type(value) in (list, tuple):  # x.flat = [u * v for ...]: the array NumPy makes
            value = lists_as_arrays([value])[0]
        values = np.ravel(value)
        if values.size != count and values.size:
            values = np.take(values, np.arange(count) % values.size)
        values = np.reshape(values[:positions.size], positions.shape)
        if base.value.flags.c_contiguous:
            np.ravel(base)[key] = values
        else:
            base[np.unravel_index(positions, base.shape)] = values
        if raised is not None:
            raise raised

    def copy(self):
        return np.ravel(self.base).copy()

    def __array__(self, dtype=None, copy=None):
        raise conversion_error("np.asarray")


def _plain_key(key):
    """An index with the values of differentiated arrays in it (an index has no derivative).
    A constant (``np.argmax(x)``, ``x > 0``) converts as a plain array, which a replay guards:
    its values are a decision of the program."""
    while isinstance(key, Tracer):
        plain = key.plain_value()
        key = key.value if plain is None else plain
    if type(key) in (list, tuple):
        return type(key)(_plain_key(k) for k in key)
    return key


def into_outs(ufunc, inputs, kwargs):
    """``ufunc(*inputs, out=(a, b))`` of a ufunc with several outputs (``np.divmod``,
    ``np.modf``, ``np.frexp``): its results, each written into its ``out=`` array where one is
    given (NumPy's loop computes them all, then they are in those arrays), as a tuple of those
    arrays and the other results. Refused with ``where=``, or an ``out=`` of another dtype than
    its result's (NumPy would cast in its loop)."""
    kwargs = dict(kwargs)
    outs = kwargs.pop("out")
    if "where" in kwargs:
        raise UnsupportedOperationError(
            f"np.{ufunc.__name__} with several out= arrays and where=: compute without out= "
            "and select with np.where(mask, new, old).")
    raised = None
    try:
        results = ufunc(*inputs, **kwargs)
    except Exception as error:
        if not raised_after_writing(error):
            raise
        # NumPy raises after writing every result into its out= array (f may catch it and go
        # on): written here too, then raised
        if not all(written_in_place_before_raising(o, inputs) for o in outs if o is not None):
            raise unknown_write_refused(ufunc) from error
        raised = error
        with np.errstate(**raising_ignored()):
            results = ufunc(*inputs, **kwargs)
    for o, y in zip(outs, results, strict=True):
        if o is not None and memory(o).dtype != memory(y).dtype:
            raise UnsupportedOperationError(
                f"np.{ufunc.__name__} with several out= arrays, one of dtype {memory(o).dtype} "
                f"for a result of dtype {memory(y).dtype}: give out= arrays of the results' "
                "dtypes, or write y.astype(...) yourself.")
    for o, y in zip(outs, results, strict=True):
        if o is not None:
            o[...] = y
    if raised is not None:
        raise raised
    return tuple(y if o is None else o for o, y in zip(outs, results, strict=True))


def single_out(ufunc, kwargs):
    """Take the one ``out=`` array of a ufunc call out of ``kwargs`` (None if there is none)."""
    out = kwargs.pop("out", None)
    if out is not None:
        if len(out) != 1:
            raise UnsupportedOperationError(f"np.{ufunc.__name__} with several out= arrays.")
        out = out[0]
    return out


def masked_ufunc(ufunc, inputs, out, kwargs):
    """``ufunc(*inputs, out=out, where=mask, **kwargs)`` as NumPy computes it: the elements of
    ``out`` where ``mask`` holds are the ufunc's of those of the inputs (broadcast), the others
    stay as they are. Taken as ``out[mask] = ufunc(*(x[mask] for x in inputs))``: the same
    loop on the same elements gives the same bits (NumPy's masked loop hands the selected runs
    to the elementwise loop, whose value at an element does not depend on its neighbours:
    tests/test_masked_ufuncs.py checks every NumPy ufunc) and warns of the same ones; no
    element the mask leaves out is computed, nor differentiated; the engine differentiates
    the reads and the write as it does any other."""
    kwargs = dict(kwargs)
    mask = kwargs.pop("where")
    if out is None:
        raise UnsupportedOperationError(
            f"{function_name(ufunc)}(..., where=...) without out=: NumPy leaves the elements "
            "where the mask is False uninitialised. Pass out= (np.zeros_like(x), say), or "
            "select with np.where(mask, new, old).")
    if "dtype" in kwargs or "signature" in kwargs:
        raise UnsupportedOperationError(
            f"{function_name(ufunc)}(..., where=..., dtype=...) on differentiated operands: "
            "cast the operands first (x.astype(...)), then call it without dtype=.")
    # NumPy's errors where it refuses the call: an output it may not cast to out's dtype
    # under the call's casting rule, a mask that is not boolean
    loop = ufunc.resolve_dtypes(tuple(_resolved_type(x) for x in (*inputs, out)),
                                casting=kwargs.get("casting", "same_kind"))
    odd = [d for d in loop if d.kind in "fc" and d not in _MASKED_LOOPS]
    if odd:
        raise UnsupportedOperationError(
            f"{function_name(ufunc)}(..., where=...) computing in {odd[0].name}: NumPy's "
            "masked loop of that dtype may round the elements otherwise than its loop of them "
            "alone. Compute in float32 or float64 (x.astype(np.float32)), or select with "
            "np.where(mask, new, old).")
    if memory(out).dtype.kind not in "fc":
        raise UnsupportedOperationError(
            f"{function_name(ufunc)}(..., where=...) into an out= of dtype {memory(out).dtype} "
            "from differentiated operands: give a float out= array.")
    if type(mask) in (bool, list, tuple):
        mask = np.asarray(mask)
    if not np.can_cast(_resolved_type(mask), bool, casting="safe"):
        raise TypeError(f"Cannot cast array data from {_resolved_type(mask)!r} to dtype('bool') "
                        "according to the rule 'safe'")  # NumPy's
    shape = np.shape(out)
    if np.shape(mask) != shape:  # (a mask the function computed stays its value: a replay
        mask = np.broadcast_to(mask, shape)  # follows it)
    picked = [x if type(x) in (float, int, complex, bool) or np.ndim(x) == 0
              else np.broadcast_to(x, shape)[mask] for x in inputs]
    try:
        out[mask] = ufunc(*picked, **kwargs)
    except Exception as error:
        if not raised_after_writing(error):
            raise
        # Under np.errstate(...="raise") NumPy raises after writing the selected elements
        # (f may catch the error and go on): written here too, then raised
        if not written_in_place_before_raising(out, inputs):
            raise unknown_write_refused(ufunc) from error
        with np.errstate(**raising_ignored()):
            out[mask] = ufunc(*picked, **kwargs)
        raise
    return out


_MASKED_LOOPS = frozenset(np.dtype(t) for t in ("f4", "f8", "c8", "c16"))
"""The dtypes whose masked ufunc loops give each element the bits of the unmasked loop of the
selected elements (``masked_ufunc``; tests/test_masked_ufuncs.py checks every ufunc): not
float16, which NumPy computes in float32 and casts back in pieces that depend on the layout."""


def _resolved_type(x):
    """``x``'s dtype as NumPy's type resolution takes it: a Python number's type (weak), a
    value standing for one as that number."""
    if type(x) in (float, int, complex):
        return type(x)
    if type(x) is bool:
        return np.dtype(bool)
    if weak(x):
        return type(weak_value(memory(x)))
    dtype = getattr(x, "dtype", None)
    return np.asarray(x).dtype if dtype is None else dtype


OUT_POSITIONS = {}


def out_position(func):
    """The position of ``func``'s ``out`` parameter when it can be passed positionally, and
    the names of the parameters from there on (``out`` first)."""
    if func not in OUT_POSITIONS:
        try:
            parameters = list(inspect.signature(func).parameters.values())
        except (TypeError, ValueError):
            parameters = []
        position = next((i for i, p in enumerate(parameters)
                          if p.name == "out" and p.kind == p.POSITIONAL_OR_KEYWORD), None)
        names = () if position is None else tuple(
            p.name for p in parameters[position:] if p.kind == p.POSITIONAL_OR_KEYWORD)
        OUT_POSITIONS[func] = position, names
    return OUT_POSITIONS[func][0]


def out_by_keyword(func, args, kwargs):
    """``args`` and ``kwargs`` with ``out`` and every argument after it passed by keyword, when
    the call gave ``out`` positionally (``np.sum(x, 0, None, None, True)``): rules take ``out``
    apart, and the arguments after it must keep their names."""
    position = out_position(func)
    if position is None or len(args) <= position:
        return args, kwargs
    names = OUT_POSITIONS[func][1]
    kwargs = dict(kwargs)
    kwargs.update(zip(names, args[position:], strict=False))
    return args[:position], kwargs


def judge_out(func, args, kwargs):
    """Raise NumPy's own error where NumPy refuses ``func(*args, **kwargs)``'s ``out=`` array
    (``np.dot`` takes a C-contiguous ``out`` of its result's dtype alone, ``np.einsum`` casts
    into it only safely, a reduction's has its result's number of dimensions, none is
    read-only): the engines compute the result apart and assign it into ``out``, which would
    accept them all. NumPy itself judges, by the call on the plain operands into an array of
    ``out``'s dtype, shape and strides (its result is dropped): one place for every function's
    contract, whatever it is. An ``out`` that overlaps an operand is no error in NumPy (it
    computes into a copy), so the stand-in's own memory does not change the judgement."""
    out = kwargs.get("out")
    if type(out) is tuple and len(out) == 1:
        out = out[0]
    target = memory(out)
    if type(target) is Preexisting:
        target = plain_memory(target)
    if type(target) is not np.ndarray:
        return
    plain_args, plain_kwargs = _plain_tree(args), _plain_tree(kwargs)
    layout = _layout((func, plain_args, plain_kwargs))
    if layout is not None and layout in _ACCEPTED_OUTS:
        return
    stand_in = _laid_out_like(target)
    call = getattr(*func) if type(func) is tuple else func  # (ufunc, method)
    with np.errstate(all="ignore"), warnings.catch_warnings():  # (the real call's to issue)
        warnings.simplefilter("ignore")
        call(*plain_args, **{**plain_kwargs, "out": (
            (stand_in,) if type(kwargs["out"]) is tuple else stand_in)})
    if layout is not None:
        if len(_ACCEPTED_OUTS) >= 512:
            _ACCEPTED_OUTS.clear()
        _ACCEPTED_OUTS.add(layout)


# The calls whose out= NumPy accepted, by layout (``_layout``): whether NumPy takes an out=
# array is decided by the operands' and out's dtypes, shapes, strides, alignment and
# writeability and the other arguments, never by the arrays' values (errors that depend on
# values, such as an index out of range, are the computation's own), so a loop's
# ``np.dot(a, b, out=c)`` is judged once, not at every step
_ACCEPTED_OUTS: set = set()


def _layout(tree):
    """A hashable description of ``tree`` (a call's function and plain arguments) that holds
    everything NumPy's acceptance of its out= array can depend on: each array's dtype, shape,
    strides, alignment and writeability, every other object by type and value; None where an
    object cannot be described so (the call is then judged every time)."""
    kind = type(tree)
    if kind is np.ndarray:
        flags = tree.flags
        return (np.ndarray, tree.dtype, tree.shape, tree.strides, flags.aligned,
                flags.writeable)
    if kind is list or kind is tuple:
        items = tuple(_layout(x) for x in tree)
        return None if None in items else (kind, items)
    if kind is dict:
        items = tuple((k, _layout(v)) for k, v in tree.items())
        return None if any(v is None for _, v in items) else (dict, items)
    try:
        hash(tree)
    except TypeError:
        return None
    return (kind, tree)


def _laid_out_like(a):
    """A new array of ``a``'s dtype, shape, strides, alignment and writeability."""
    itemsize, low, high = a.dtype.itemsize, 0, a.dtype.itemsize
    if a.size:
        for n, stride in zip(a.shape, a.strides, strict=True):
            low, high = low + min(0, (n - 1) * stride), high + max(0, (n - 1) * stride)
    misaligned = 0 if a.flags.aligned else 1
    buffer = np.empty(high - low + misaligned + itemsize, np.uint8)
    offset = -low + misaligned + (-buffer.ctypes.data % max(a.dtype.alignment, 1))
    stand_in = np.ndarray(a.shape, a.dtype, buffer=buffer, offset=offset, strides=a.strides)
    stand_in.flags.writeable = a.flags.writeable
    return stand_in


def _plain_tree(tree):
    """``tree`` with every traced, dual or stand-in array replaced by the plain value a NumPy
    call takes for it."""
    kind = type(tree)
    if kind is list or kind is tuple:
        return kind([_plain_tree(x) for x in tree])
    if kind is dict:
        return {k: _plain_tree(v) for k, v in tree.items()}
    if kind is Preexisting:
        return plain_memory(tree)
    if wrapped(tree):
        value = memory(tree)
        return weak_value(value) if weak(tree) else value
    return tree


def joined_in_order(func, args, kwargs):
    """``np.concatenate(arrays, axis, out=out)`` or ``np.stack(...)`` whose ``out`` shares
    memory with one of the arrays, as NumPy computes it: each array is copied into its part
    of ``out`` in turn, so a later one reads what an earlier copy wrote
    (``np.concatenate([x[1:], x[:1]], out=x)`` makes ``[x1, x2, x3, x4, x1]``), by the
    engine's own assignments. None for any other call, which the rule computes before one
    assignment into ``out``."""
    if func is not np.concatenate and func is not np.stack:
        return None
    bound = dict(zip(("arrays", "axis", "out"), args))
    bound.update(kwargs)
    out, arrays = bound.get("out"), bound.get("arrays")
    if out is None or type(arrays) not in (list, tuple) or not any(
            hasattr(a, "dtype") and may_overlap(memory(out), memory(a)) for a in arrays):
        return None
    if bound.get("dtype") is not None or any(np.result_type(a) != out.dtype for a in arrays):
        raise UnsupportedOperationError(
            f"np.{func.__name__}(..., out=out) of arrays that share memory with out and have "
            "another dtype: NumPy casts each as it copies it. Join into a new array, then "
            "assign it: out[...] = np." + func.__name__ + "(...).")
    axis = bound.get("axis", 0)
    if func is np.stack:
        axis = normalize_axis_index(axis, out.ndim)
        arrays = [np.expand_dims(a, axis) for a in arrays]  # views: read as they are copied
    if axis is None:  # NumPy copies each flattened, element by element: refused
        raise UnsupportedOperationError(
            "np.concatenate(..., axis=None, out=out) of arrays that share memory with out: "
            "NumPy copies each element by element as it flattens it, which mutad does not "
            "follow. Join into a new array, then assign it: out[...] = np.concatenate(...).")
    axis = normalize_axis_index(axis, out.ndim)
    start = 0
    for a in arrays:
        length = np.shape(a)[axis]
        out[(slice(None),) * axis + (slice(start, start + length),)] = a
        start += length
    return out


POSITIONAL = {}
"""Per function, its parameters that may be given positionally, by name: ``(position,
default)`` (``keywords_in_place``)."""


def keywords_in_place(func, rule, args, kwargs):
    """:func:`keywords_moved`, where NumPy's call of these values does not fail first: a
    keyword argument carrying a derivative that stays one is refused by the engines, after
    NumPy's own error (``np.clip(x, 0, max=b)``: its signature's), which NumPy raises first."""
    args, kwargs = keywords_moved(func, rule, args, kwargs)
    # (``like=`` names the array type NumPy dispatches on, never a value: mutad's own calls
    # pass a dual there, whose tangent a batch of directions cannot be asked about)
    if kwargs and "out" not in kwargs and any(
            carries_derivative(e) for name, v in kwargs.items() if name != "like"
            for e in (v if type(v) in (list, tuple) else (v,))):
        with np.errstate(all="ignore"), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            func(*_plain_values(args), **dict(zip(kwargs, _plain_values(kwargs.values()))))
    return args, kwargs


_DOUBLE = np.dtype(float)


def as_assigned(value, dtype):
    """``value`` as NumPy's assignment into an array of ``dtype`` takes it: a Python int into
    floats or complex numbers, alone or in a list or tuple, is first the nearest double,
    whatever its size (np.positive, or an array of ints, would cast it from int64, rounding
    once: 2**60 + 2**36 + 1 into float32, and refuse one past int64; Python's float raises
    NumPy's OverflowError past the doubles). A Python complex number into real numbers, a
    string or None is converted as NumPy's assignment converts it, by the target's type
    (``float(1j)`` raises TypeError, ``float("1.5")``, NaN for None), not cast by a ufunc.
    A traced value or an array of wider numbers of the target's kind (doubles into float32)
    is first cast to its type, as NumPy's assignment casts it (an overflow "encountered in
    cast", which the ufunc writing it would word as its own)."""
    if dtype.kind not in "fc":
        return value
    given = type(value)
    traced = isinstance(value, ArrayMethods)  # (either engine's: Traced, Dual)
    kind = _DOUBLE if given is float else value.value.dtype if traced else \
        getattr(value, "dtype", None)
    if kind is not None and kind.kind == dtype.kind and kind.itemsize > dtype.itemsize:
        if traced or type(value) is np.ndarray:
            return value.astype(dtype)
        if type(value) is float or isinstance(value, np.generic):
            return np.asarray(value, dtype)[()]
    if type(value) is int:
        return float(value)
    if value is None or type(value) in (str, bytes) or (type(value) is complex
                                                          and dtype.kind == "f"):
        return np.asarray(value, dtype)[()]
    if type(value) in (list, tuple):
        return [as_assigned(item, dtype) for item in value]
    return value


def sequence_assigned(target, key, value, convert):
    """``convert(value)``, the array NumPy makes of a list or tuple assigned as ``target[key] =
    value`` (the engine's conversion: ``x[:3] = [x[2], 2 * x[1], 5.0]``). Where an element
    cannot be converted ("q", a complex number into floats, an int past the doubles, an
    object: an array of objects, which NumPy's assignment converts element by element), NumPy's
    own error is raised where its assignment, made on a copy of ``target``'s values, writes
    nothing (a broadcast sequence, an index array, a first element); where NumPy converts the
    sequence into the array element by element and raises with the elements before that one
    written, which f may catch and go on with, it is refused (the engines convert it whole
    first)."""
    try:
        converted = convert(value)
    except (ValueError, TypeError, OverflowError) as error:
        _numpys_assignment(target, key, value, error)
        raise
    if getattr(converted, "dtype", None) == object and target.dtype != object:
        _numpys_assignment(target, key, value, None)
    return converted


def _numpys_assignment(target, key, value, error):
    """NumPy's own ``target[key] = value`` on a copy of ``target``'s values: its error raised
    where it wrote nothing; refused where it raised having written some elements."""
    values = _plain_values((target,))[0]
    probe = values.copy()
    try:
        probe[_plain_values((key,))[0]] = _plain_values((value,))[0]
    except Exception as numpys:
        if probe.tobytes() == values.tobytes():
            raise numpys from None  # NumPy's own error, having written nothing
        raise UnsupportedOperationError(
            f"x[key] = {type(value).__name__} whose element NumPy cannot convert to "
            f"{values.dtype} ({numpys}): NumPy writes such a sequence into the array element "
            "by element, leaving those before that element written as it raises, which "
            "mutad does not follow. Convert the values first (np.asarray(values, "
            "dtype=float)), or check them before assigning.") from error or numpys


def _plain_values(items):
    """The plain values of ``items`` (of each tracer's innermost level, in lists and tuples
    too)."""
    def plain(x):
        while isinstance(x, Tracer):
            x = x.value
        return type(x)(plain(e) for e in x) if type(x) in (list, tuple) else x
    return [plain(x) for x in items]


def keywords_moved(func, rule, args, kwargs):
    """``args`` and ``kwargs`` with each keyword argument that is traced (or holds traced
    values) given at its position instead, filling the positions before it with their
    defaults, where that position is among the arguments ``rule`` differentiates (its ``leading``, as
    ``registry.padded`` records it): ``np.diff(x, prepend=x0)``, ``np.linspace(start=a,
    stop=b)``, and the keyword-only arguments the rule takes at a position (its ``keywords``:
    ``np.clip(x, min=lo)``, ``np.pad(x, 1, constant_values=c)``). Rules take differentiated
    values positionally; any other keyword argument that carries one is left for the engine
    to refuse."""
    leading = getattr(rule, "leading", None)
    if leading is None or not kwargs:
        return args, kwargs
    # (never out=, which the engines take apart, whatever position the function gives it)
    moved = [name for name, value in kwargs.items()
             if name != "out" and innermost((value,)) is not None]
    if not moved:
        return args, kwargs
    if func not in POSITIONAL:
        try:
            parameters = list(inspect.signature(func).parameters.values())
        except (TypeError, ValueError):
            parameters = []
        POSITIONAL[func] = {p.name: (i, p.default) for i, p in enumerate(parameters)
                            if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)}
    positions = {**POSITIONAL[func], **rule.keywords}
    if not all(name in positions and len(args) <= positions[name][0] < leading
               for name in moved):
        return args, kwargs
    # (a keyword-only argument moved: the others too, which go together, as min= and max=)
    aliases = rule.keywords if any(name in rule.keywords for name in moved) else ()
    if aliases and (len(args) > min(i for i, _ in aliases.values()) or any(
            positions[name][0] == aliases[alias][0] for alias in aliases
            for name in kwargs if name not in aliases and name != "out" and name in positions)):
        return args, kwargs  # np.clip(x, 0, max=b), np.clip(x, a_min=0, max=b): NumPy refuses
    last = max(positions[name][0] for name in (*moved, *aliases))
    by_position = collections.defaultdict(list)  # a keyword-only alias first: its absence
    for name, (i, default) in reversed(positions.items()):
        by_position[i].append((name, default))
    given, rest = list(args), dict(kwargs)
    for i in range(len(args), last + 1):
        names = by_position.get(i)
        if not names:
            return args, kwargs
        name = next((name for name, _ in names if name in rest), None)
        if name is not None:
            given.append(rest.pop(name))
        elif names[0][1] is inspect.Parameter.empty:
            return args, kwargs  # a required argument missing: NumPy's own error follows
        else:
            given.append(names[0][1])
    return (*args, *lists_as_arrays(given[len(args):])), rest  # constant_values=(a, b)


def records_key(x, key):
    """``x[key]`` of an array of records (a structured dtype) that ``x`` is, where its
    derivative is followed: a field (``a['m']``, ``a[['m', 'v']]``) or records by a basic
    index (``a[1:]``) are views of its memory, which mutad follows as any view; one record by
    integers (NumPy's ``np.void``, a view of it) is the 0-d view ``x[i, ...]``, through which
    ``a[i]['m'] = v`` writes; records gathered by an array or a mask would need cotangents
    of records: refused where they carry a derivative. ``key`` as the engine is to take it."""
    names = x.dtype.names
    if names is None:
        return key
    if type(key) is str or type(key) is list and all(type(k) is str for k in key):
        return key
    if isinstance(key, (int, np.integer)) and one_record(memory(x)):
        return names[key]  # a field by its position, as NumPy's np.void reads it
    if picks_one_record(x, key):
        return (*(key if type(key) is tuple else (key,)), Ellipsis)
    return key


def picks_one_record(x, key):
    """Whether ``x[key]`` of an array of records ``x`` is one record (NumPy's ``np.void``):
    integers, one for each dimension."""
    items = key if type(key) is tuple else (key,)
    return all(isinstance(k, (int, np.integer)) for k in items) and len(items) == x.ndim


_ONE_RECORDS: "weakref.WeakValueDictionary[int, np.ndarray]" = weakref.WeakValueDictionary()
"""The plain 0-d views, by their ids, that stand for one record (``rec[1]``, NumPy's
``np.void``) rather than for NumPy's 0-d array of records (``rec[1, ...]``, which views the
same bytes): a decision of the program's indexing, never of values."""


def as_one_record(y):
    """``y``, the traced or dual 0-d view ``x[i, ...]`` that ``x[i]`` of an array of records
    is followed as, marked as standing for NumPy's ``np.void`` (``one_record``)."""
    value = memory(y)
    _ONE_RECORDS[id(value)] = value
    return y


def records_gathered(x, key):
    """``x[key]`` of an array of records holding differentiated values where ``key`` gathers
    records (an index array or a mask): the records moved (``records_moved``); else None,
    for ``records_key`` to say how the engine takes it."""
    if type(key) is str or type(key) is list and all(type(k) is str for k in key):
        return None
    items = key if type(key) is tuple else (key,)
    if all(isinstance(k, (int, np.integer, slice)) or k is None or k is Ellipsis
           for k in items) or not carries_derivative(x):
        return None
    return records_moved(operator.getitem, (x, key), {})


def one_record(value):
    """Whether ``value``, the plain value of a traced or dual array of records, is one record
    of an array (``rec[1]``, NumPy's ``np.void``, which mutad follows as the 0-d view
    ``rec[1, ...]``) rather than a 0-d array of its own."""
    return value.ndim == 0 and value.dtype.names is not None \
        and _ONE_RECORDS.get(id(value)) is value


def text_element(value, key):
    """NumPy's ``str`` (or ``bytes``) that ``value[key]`` is, ``value`` the plain value of a
    traced or dual array, where it reads one element of text: an element of a text array
    (records' names, ``rec['name'][1]``) or a text field of one record (``rec[1]['name']``,
    NumPy's ``np.void`` read by its field, which mutad follows as the 0-d view of the
    record); else None. Text carries no derivative, and NumPy's code runs on its str
    (``len``, its methods, ``==``)."""
    if value.dtype.kind in "US":
        element = value[key]
        return None if type(element) is np.ndarray else element
    if type(key) is str and one_record(value):
        field = value[key]
        if field.dtype.kind in "US" and field.ndim == 0:
            return field[()]
    return None


def records_write(x, key, value):
    """``x[key] = value`` into an array of records (a structured dtype) by records where ``x``
    or ``value`` holds differentiated values, written field by field as NumPy assigns them: a
    tuple (one record, ``a[0] = (v, 1.0)``) its items in the fields' order, a list of tuples
    (``a[1:] = [(v, 1.0), (w, 2.0)]``) record by record, records (``a[1:] = b``) their fields
    by position, and a field of one record by its position
    (``rec[1][0] = v``). True where written so; other values refused
    (mutad follows writes into the fields, ``a['m'][0] = v``)."""
    if type(key) is str or type(key) is list and all(type(k) is str for k in key):
        return False
    names = x.dtype.names
    if isinstance(key, (int, np.integer)) and one_record(memory(x)):
        x[names[key]] = value  # a field by its position, as NumPy's np.void writes it
        return True
    if type(value) is tuple:
        items = value
    elif getattr(getattr(value, "dtype", None), "names", None) is not None:
        items = [value[name] for name in value.dtype.names]
    else:
        items, names = value if type(value) is list else (value,), ()
    # (values of no differentiation: NumPy's write; a traced or dual value without derivative,
    # a constant the function made (c[0] of c = np.zeros(3)), is written by its field as
    # one with a derivative is: converted whole, a tuple of them would be a row of floats)
    if not (carries_derivative(x) or holds_wrapped(items)):
        return False
    target = x[key] if type(value) is list and all(type(v) is tuple for v in value) else None
    if target is not None and target.ndim == 1 and len(value) in (1, len(target)):
        for i in range(len(target)):  # a list of records (tuples), each to its record
            target[i] = value[i if len(value) > 1 else 0]  # (one broadcast, as NumPy does)
        return True
    if len(items) != len(names):
        raise UnsupportedOperationError(
            "x[key] = value into records of an array of records (a structured dtype) holding "
            "differentiated values, of a value other than a record (a tuple of one item per "
            "field) or records: mutad follows writes into its fields. Write each field: "
            "a['m'][key] = v.")
    for name, item in zip(names, items):
        x[name][key] = item
    return True


_SHAPED_LIKE = {np.zeros_like, np.empty_like, np.ones_like, np.shape, np.ndim, np.size}
"""Functions of an array's shape and dtype alone, whose results carry no derivative."""


def holds_records(items):
    """Whether an array of records (a structured dtype) some differentiation traces is among
    ``items`` (or in a list or tuple among them): asked of every NumPy function's arguments,
    so by type and dtype alone, before ``refuse_records``' questions."""
    for x in items:
        kind = type(x)
        if kind is list or kind is tuple:
            if holds_records(x):
                return True
        elif kind in WRAPPERS and memory(x).dtype.names is not None:
            return True
    return False


def _new_records(a, order="K", shape=None):
    """A new array of ``a``'s records (np.empty_like's) that the differentiations follow."""
    plain = np.empty_like(memory(a), order=order, shape=shape)
    return allocate(plain, (np.empty_like, (plain,), {}))


def _records_copy(a, order="K", subok=False):
    """``np.copy`` of an array of records: a new one of its dtype and layout (np.empty_like's,
    as NumPy's copy), each field written."""
    y = _new_records(a, order)
    for name in a.dtype.names:
        y[name] = a[name]
    return y


def _records_sort(a, axis=-1, kind=None, order=None, *, stable=None):
    """``np.sort`` of an array of records: NumPy's order (``np.argsort``, which has no
    derivative) applied to each field."""
    order_of = np.argsort(a, axis=axis, kind=kind, order=order, stable=stable)
    if isinstance(order_of, np.ndarray):  # (the mode's stand-in of integers: NumPy's array)
        order_of = np.ndarray.view(order_of, np.ndarray)
    fields = {name: a[name] for name in a.dtype.names}
    if axis is None:  # (of the records flattened)
        fields = {name: field.reshape((-1,) + field.shape[a.ndim:])  # (subarrays kept)
                  for name, field in fields.items()}
        axis = 0
    index = list(np.indices(order_of.shape, sparse=True))
    index[axis] = order_of  # (np.take_along_axis's index, for fields of any dtype)
    y = _new_records(a, shape=order_of.shape)
    for name, field in fields.items():
        y[name] = field[tuple(index)]
    return y


def _records_unique(ar, *args, **kwargs):
    """``np.unique`` of an array of records: NumPy's call of their plain values says which
    records it keeps (``return_index``, of NumPy's order), gathered from ``ar`` flattened. The
    choice is a decision on the values, which a replay does not take again. Along an axis,
    None (refused)."""
    flags = {**dict(zip(("return_index", "return_inverse", "return_counts", "axis"), args)),
             **kwargs}
    if flags.get("axis") is not None:
        return None
    plain = settled(ar, "np.unique of an array of records")
    _, index, *rest = np.unique(plain, **{**flags, "return_index": True})
    y = records_moved(operator.getitem, (np.reshape(ar, (-1,)), index), {})
    if y is None:
        return None
    results = (y, index, *rest) if flags.get("return_index") else (y, *rest)
    return results if len(results) > 1 else y


def _records_full_like(a, fill_value, *args, **kwargs):
    """``np.full_like`` of an array of records, of a fill value without a derivative: NumPy's
    new array, which the differentiations follow (writes into it); of one with a derivative,
    None (refused)."""
    if carries_derivative(fill_value) or type(fill_value) in (list, tuple) and any(
            map(carries_derivative, fill_value)):
        return None
    plain = np.full_like(memory(a), fill_value, *args, **kwargs)
    return allocate(plain, (np.full_like, (plain, fill_value, *args), kwargs))


def _records_unstructured(arr, dtype=None, copy=False, casting="unsafe"):
    """``structured_to_unstructured`` of an array of records: NumPy's view of their memory
    where NumPy's result is one (the fields of one dtype, evenly spaced), as a view of the
    array's; else its fields, each flattened to a run along the last axis, side by side in
    NumPy's dtype."""
    y = recfunctions.structured_to_unstructured(memory(arr), dtype, copy, casting)
    if np.shares_memory(y, memory(arr)) and (view := view_as(arr, y)) is not None:
        return view
    runs = [arr[name].astype(y.dtype).reshape(arr.shape + (-1,)) for name in arr.dtype.names]
    return np.concatenate(runs, axis=-1)


def _records_cast(cast, a, dtype, *args, **kwargs):
    """``a.astype(dtype)`` (``cast``: ``np.ndarray.astype`` or ``np.astype``) of an array of
    records to records of as many fields, none of records: NumPy's cast of each field to the
    field in its place (a cast of records goes by position); None (refused) to another
    dtype."""
    y = cast(memory(a), dtype, *args, **kwargs)
    if y is memory(a):  # (copy=False, the same dtype)
        return a
    names = y.dtype.names
    if names is None or len(names) != len(a.dtype.names) \
            or any(y.dtype.fields[name][0].names is not None for name in names):
        return None
    out = _new_records(y)
    for source, name in zip(a.dtype.names, names):
        out[name] = a[source]
    return out


def _records_built(build, a, *args, like=None, **kwargs):
    """``build(a, ...)`` (``np.array`` and its variants) of an array of records: ``a`` itself
    where NumPy's is the array given, a view of it where NumPy's is one, else a copy of its
    records (NumPy's layout, each field written); None (refused) where NumPy's changes the
    records' dtype or shape."""
    y = build(memory(a), *args, **kwargs)
    if y is memory(a):
        return a
    if y.dtype != a.dtype or y.shape != a.shape:
        return None
    if np.shares_memory(y, memory(a)):
        return view_as(a, y)
    out = _new_records(y)
    for name in a.dtype.names:
        out[name] = a[name]
    return out


RECORD_FUNCTIONS = {np.copy: _records_copy, np.sort: _records_sort, np.unique: _records_unique,
                    np.full_like: _records_full_like,
                    recfunctions.structured_to_unstructured: _records_unstructured,
                    np.astype: functools.partial(_records_cast, np.astype),
                    np.ndarray.astype: functools.partial(_records_cast, np.ndarray.astype)}
"""NumPy's functions of whole records (a structured dtype) that are written field by field
where a derivative is among them (``records_function``)."""
RECORD_FUNCTIONS.update({build: functools.partial(_records_built, build) for build in (
    np.array, np.asarray, np.asanyarray, np.ascontiguousarray, np.asfortranarray)})


RECORDS_MOVED = {np.concatenate, np.stack, np.vstack, np.hstack, np.dstack, np.where,
                 np.reshape, np.ravel, np.transpose, np.swapaxes, np.moveaxis, np.squeeze,
                 np.expand_dims, np.take, np.repeat, np.tile, np.flip, np.fliplr, np.flipud,
                 np.roll, np.atleast_1d, np.atleast_2d, np.atleast_3d, np.append, np.delete,
                 np.insert, np.resize, np.broadcast_to, np.compress, np.extract, np.choose,
                 np.rot90, np.block, np.array_split, np.split, np.diagonal}
"""NumPy's functions that move whole records, computing nothing of them (``records_moved``)."""


def records_moved(func, args, kwargs):
    """``func(*args, **kwargs)``, a function that moves whole records (``RECORDS_MOVED``,
    indexing by an array) of arrays of records holding differentiated values: NumPy's result
    of the plain values, a view of an argument's records where NumPy's is one (``reshape``,
    ``transpose``), else a new array of its dtype each field of which is gathered from the
    arguments' fields by NumPy's function of the records' positions. None for records with
    fields of records (refused)."""
    sources = []  # (the arrays of records among the arguments, whose positions are counted)

    def positions(tree):
        if type(tree) in (list, tuple):
            return type(tree)(positions(v) for v in tree)
        # (one record of NumPy's, np.void, is records too: np.where(c, rec[0], a))
        if isinstance(tree, (np.ndarray, np.void, Tracer)) and tree.dtype.names is not None:
            start = sum(np.size(x) for x in sources)
            sources.append(tree)
            return np.arange(start, start + np.size(tree)).reshape(np.shape(tree))
        return tree

    def plain(tree):
        if type(tree) in (list, tuple):
            return type(tree)(plain(v) for v in tree)
        return memory(tree) if isinstance(tree, Tracer) else tree

    at = func(*positions(args), **positions(kwargs))
    if any(x.dtype.fields[name][0].names is not None for x in sources for name in x.dtype.names):
        return None
    y = func(*plain(args), **plain(kwargs))
    if type(y) in (list, tuple):  # (np.split's, np.atleast_2d's of several)
        return type(y)(_gathered(sources, a, b) for a, b in zip(at, y))
    return _gathered(sources, at, y)


def _gathered(sources, at, y):
    """The array of records NumPy's ``y`` is, of the records of ``sources`` at positions
    ``at`` (``records_moved``)."""
    for x in sources:
        if isinstance(x, Tracer) and views(y, memory(x)):
            view = view_as(x, y)
            if view is not None:
                if not y.flags.writeable:  # (np.diagonal's: read-only, as NumPy's)
                    memory(view).flags.writeable = False
                return view
    out = _new_records(y)
    for name in y.dtype.names:
        fields = [x[name] for x in sources]
        runs = [f.reshape((-1,) + np.shape(f)[np.ndim(x):]) for f, x in zip(fields, sources)]
        out[name] = (np.concatenate(runs) if len(runs) > 1 else runs[0])[at]
    return out


def records_function(func, args, kwargs):
    """``func(*args, **kwargs)`` of an array of records holding differentiated values, field by
    field (``RECORD_FUNCTIONS``, ``RECORDS_MOVED``), or None where ``func`` is not one of
    those."""
    if func in RECORDS_MOVED:
        return records_moved(func, args, kwargs)
    by_fields = RECORD_FUNCTIONS.get(func)
    if by_fields is None or not args:
        return None
    if type(args[0]) in (list, tuple):  # (a sequence of arrays: the function's own questions)
        return by_fields(*args, **kwargs)
    if not isinstance(args[0], Tracer) \
            or args[0].dtype.names is None or not carries_derivative(args[0]) \
            or not getattr(by_fields, "nested", False) and any(
                args[0].dtype.fields[name][0].names is not None
                for name in args[0].dtype.names):  # (nested records: by their fields, where
        return None  # ``by_fields`` does not follow them down, its ``nested``)
    return by_fields(*args, **kwargs)


def refuse_records(what, items):
    """Refuse ``what`` (a NumPy function) of an array of records (a structured dtype) that
    holds differentiated values among ``items``: mutad follows its fields (each a float
    array) and views of its records, not whole records, whose derivatives would be records
    too. Arrays of records the function made and wrote no derivative into are NumPy's."""
    for x in items:
        if type(x) in (list, tuple):  # np.concatenate([a, b])
            refuse_records(what, x)
        elif isinstance(x, Tracer) and x.dtype.names is not None and carries_derivative(x) \
                and what not in _SHAPED_LIKE:
            name = getattr(what, "__name__", str(what))
            raise UnsupportedOperationError(
                f"np.{name} of an array of records (a structured dtype) holding differentiated "
                "values: mutad follows its fields (a['m'], a['m'][1:] = ..., a[1:]['m']) and "
                "views of its records, not NumPy's functions of whole records. Compute with "
                "the fields: copies of each (a['m'].copy()), an order taken by np.argsort of "
                "a field and applied to each.")


def settled(tree, what):
    """``tree`` (lists and tuples of it) with each traced or dual array that carries no
    derivative (a constant the function computed: an index, a count) as the plain value it
    holds, for a function that reads it as a setting. Its program keeps this call's values:
    a replay recording the call checks they are the same again where they carry no
    derivative (``Recorder.settle``); differentiated values, which change from call to call
    (a matrix whose factors SciPy pivots by them), refuse it, saying ``what``."""
    if isinstance(tree, Tracer):
        recorder = getattr(getattr(tree, "tape", None), "recorder", None)
        if recorder is not None and recorder.ready:
            if carries_derivative(tree):
                recorder.refuse(what)
            else:
                recorder.settle(tree, what)
        return settled(tree.value, what)
    if type(tree) in (list, tuple):
        return type(tree)(settled(x, what) for x in tree)
    return tree


def item_assignment_refused(x):
    """NumPy's error for ``x[key] = value`` where ``x`` stands for a NumPy scalar (immutable)."""
    return TypeError(f"'numpy.{memory(x).dtype.name}' object does not support item assignment")


# ----------------------------------------------------------------------------------------------
# Conversions and writes that would lose a derivative


def _inside_masked(user):
    """Whether the conversion happened inside ``numpy.ma`` (below the user's frame)."""
    frame = sys._getframe(2)
    while frame is not None and frame is not user:
        name = str(frame.f_globals.get("__name__", ""))
        if name == "numpy.ma" or name.startswith("numpy.ma."):  # not numpy.matrixlib
            return True
        frame = frame.f_back
    return False


def conversion_error(what):
    frame = _outside(sys._getframe(2), ("numpy", "mutad"))
    where = "" if frame is None else (
        f" in {frame.f_globals.get('__name__', '?')}.{frame.f_code.co_name}")
    if frame is not None and _storing_item(frame):
        error = untraced_write(f"an assignment into an element or slice{where}")
        if _naming_a_field(frame):
            error.args = (error.args[0] + " " + STRUCTURED_FIX,)
        if any(isinstance(v, np.memmap) for v in frame.f_locals.values()):
            error.args = (error.args[0] + " " + MEMMAP_FIX,)
        if any(isinstance(v, (python_array, bytearray, memoryview))
               for v in frame.f_locals.values()):
            error.args = (error.args[0] + " " + BUFFER_FIX,)
        return error
    called = _called(frame)
    what = f"{called}()" if called else what  # as the code spells it: np.array, not np.asarray
    fix = CONVERSION_FIXES.get(what.removesuffix("()").rsplit(".", 1)[-1], CONVERSION_FIX)
    if ".ma." in what or what.startswith("ma.") or _inside_masked(frame):
        fix = MASKED_FIX
    elif fix is CONVERSION_FIX and _plain_method(what):
        array, name = what.removesuffix("()").rsplit(".", 1)
        fix = (f"{array}.{name}(...) of a plain array is NumPy's method, which converts its "
               f"arguments: call the function, np.{name}({array}, ...)"
               + (f" (or {array} @ x)" if name == "dot" else "") + ", which mutad follows.")
    elif fix is CONVERSION_FIX and what.startswith(("np.", "numpy.")):
        fix = LIST_FIX  # NumPy's own function, not dispatched to: a traced value inside a list
    user = _outside(frame, ("numpy", "mutad", "scipy"))
    if user is None or user is frame:
        return ConversionError(
            f"a traced array was converted to a plain array by {what}{where}, which would cut "
            f"its gradient. {fix}")
    called = _called(user) or "a library function"
    equivalent = _mutad_equivalent(user, called)
    return ConversionError(
        f"a traced array was converted to a plain array by {what}{where}, called through "
        f"{called} in {user.f_globals.get('__name__', '?')}.{user.f_code.co_name}, which would "
        "cut its gradient. "
        + (f"Call {equivalent} instead, which mutad differentiates. " if equivalent else "")
        + (fix if fix is MASKED_FIX else CONVERSION_FIX))  # (scipy.stats.mstats: np.ma's)


def _plain_method(what):
    """Whether ``what`` (a call as the code spells it, ``A.dot()``) is a method of an object's
    that is a NumPy function of the object (``FORWARDED``): called on a plain array, NumPy's
    method converted a traced argument where the function dispatches to mutad."""
    head, _, name = what.removesuffix("()").rpartition(".")
    return what.endswith("()") and bool(head) and name in FORWARDED \
        and head not in ("np", "numpy")


MASKED_FIX = ("Masked arrays (np.ma) are not differentiated: compute with the data and the "
              "mask apart, np.where(mask, 0.0, x) for the values and x[~mask].sum() for "
              "reductions over the elements kept.")
LIST_FIX = ("NumPy's own code converted it: the function has no rule in mutad (wrap it with "
            "mutad.adjoint and give it one, docs/guide.md 'Custom rules', or take "
            "mutad.stop_gradient(x) where no gradient should flow), or it was handed a list or "
            "tuple of traced values with no traced array beside it, which mutad does not read "
            "as an array (np.vstack([[a, b], [c, d]])): build the array first, "
            "np.array([a, b]) or np.stack([a, b]).")
_DRAW_FIX = ("mutad follows the draws with differentiated parameters of NumPy's Generators "
             "and of np.random's own functions; a RandomState draws with NumPy's own code, "
             "and so does a Generator held in a container: draw the "
             "standard numbers (z = rng.standard_normal(size)) and move and scale them "
             "yourself (loc + scale * z), which mutad follows.")
CONVERSION_FIX = (
    "If that function has no mutad rule (a SciPy routine, say), wrap it with mutad.adjoint and "
    "give it a rule (docs/guide.md, 'Custom rules'). Where no gradient should flow, take "
    "mutad.stop_gradient(x).")
CONVERSION_FIXES = {  # what to write instead of a conversion in the user's own code
    "array": "Inside the differentiated code np.array(x) of a traced x is a traced copy; where "
             "mutad's allocation mode does not reach (mutad.plain_allocation, a name bound "
             "inside a function), copy it with x.copy().",
    "asarray": "A traced array is already an array: use it as it is. " + LIST_FIX,
    "float": "Keep computing with the array itself (a 0-d array works wherever NumPy takes a "
             "float; comparisons such as `if x > 0:` work, f'{x:.3g}' formats it, and x.item() "
             "is a Python number mutad follows); take "
             "integer results with NumPy (np.argmin, np.floor(x).astype(int)), and "
             "float(mutad.stop_gradient(x)) where no gradient should flow.",
}
CONVERSION_FIXES.update(dict.fromkeys(("normal", "uniform", "exponential", "lognormal"),
                                     _DRAW_FIX))
CONVERSION_FIXES.update(dict.fromkeys(("tobytes", "bytes", "bytearray"), (
    "Numbers read back from bytes (np.frombuffer) have no derivative: keep computing with the "
    "array. For a key or a checksum no gradient flows through, take "
    "mutad.stop_gradient(x).tobytes().")))
CONVERSION_FIXES.update(dict.fromkeys(("dumps", "dump"), (
    "A pickled array comes back as plain numbers, which would cut the gradient: copy it with "
    "copy.deepcopy(x) or x.copy(), which mutad follows, and pickle mutad.stop_gradient(x) to "
    "save values no gradient flows through.")))
CONVERSION_FIXES["pack"] = CONVERSION_FIXES["pack_into"] = (
    "struct.pack writes the numbers as bytes, which have no derivative: keep computing with the "
    "numbers themselves (a tuple of them, an array), and pack mutad.stop_gradient(x) where bytes "
    "are needed (a file, a message, a checksum).")
CONVERSION_FIXES["longdouble"] = (
    "mutad differentiates float16, float32 and float64 values (and complex64 and complex128), "
    "not long doubles: compute in float64, np.float64(x).")
CONVERSION_FIXES["round"] = (
    "round() of a NumPy scalar is a Python int: round the array with NumPy instead, "
    "np.round(x) (its derivative is zero almost everywhere), and take integer results with "
    "np.round(x).astype(int); round(mutad.stop_gradient(x)) where no gradient should flow.")
for _name in ("int", "complex", "item", "tolist"):
    CONVERSION_FIXES[_name] = CONVERSION_FIXES["float"]
del _name
CONVERSION_FIXES["float"] += (
    " (float() itself is followed as x.item() is where the differentiated code calls it, "
    "unless code of its module compares a type with float by identity, `type(v) is float`, "
    "or compares what type() gives, `type(v) == float`: isinstance(v, float) replaces both.)")
CONVERSION_FIXES["matrix"] = CONVERSION_FIXES["asmatrix"] = CONVERSION_FIXES["mat"] = (
    "np.matrix(x) and np.asmatrix(x) of float64 values are followed where the differentiated "
    "code calls them and compares no type with np.matrix by identity (`type(m) is "
    "np.matrix`: isinstance(m, np.matrix) replaces it); otherwise compute with 2-d arrays "
    "(NumPy discourages np.matrix), writing A @ B for its A * B, A.T for its transpose and "
    "np.linalg.inv(A) for A.I.")


def _outside(frame, packages):
    """The first frame from ``frame`` outwards whose module is in none of ``packages``."""
    while frame is not None and frame.f_globals.get("__name__", "").split(".")[0] in packages:
        frame = frame.f_back
    return frame


def _called(frame):
    """The function the call ``frame`` is executing is spelled as in its source
    (``np.array``, ``scipy.linalg.expm``, ``x.item``), or None."""
    if frame is None:
        return None
    try:
        line, end_line, start, end = list(frame.f_code.co_positions())[frame.f_lasti // 2]
    except (AttributeError, IndexError, ValueError):
        return None
    if None in (line, end_line, start, end):
        return None
    text = "".join(linecache.getline(frame.f_code.co_filename, n)
                   for n in range(line, end_line + 1)).encode()
    last = len(text) - len(linecache.getline(frame.f_code.co_filename, end_line).encode())
    callee = _callee(text[start:last + end].decode(errors="replace"))
    return callee if callee and re.fullmatch(r"[A-Za-z_][\w.()]*", callee) else None


def bytearray_refused(x, frame):
    """The error for ``bytearray(x)`` (the user's call at ``frame``), where Python asks ``x``
    for an index (then iterates it, asking each element: a forward-mode value, which has no
    ``__index__``, is asked at its ``__iter__``), as it does of an object that hands out no
    buffer, as NumPy's array does; None where ``frame`` makes no such call. Of a traced
    value, the conversion ``bytes(x)`` refuses, with its fix; of a constant, what to call."""
    if frame is None or "bytearray" not in frame.f_code.co_names or \
            _called(frame) != "bytearray":  # (the names at once: iterations ask it too)
        return None
    x._converted("bytearray()")  # (raises, of a value with a derivative)
    return UnsupportedOperationError(
        "bytearray(x) of an array mutad follows, which hands Python no buffer: take "
        "bytearray(x.tobytes()), the bytes of its values (which have no derivative).")


def _callee(call):
    """What ``call``, the source of a call expression, calls: its text before the parenthesis
    that opens its last argument list (``u.max().item`` for ``u.max().item()``)."""
    call = call.strip()
    if not call.endswith(")"):
        return None
    depth = 0
    for i in range(len(call) - 1, -1, -1):
        depth += {")": 1, "(": -1}.get(call[i], 0)
        if depth == 0:
            return call[:i].strip()
    return None


def _mutad_equivalent(frame, called):
    """``mutad.scipy.linalg.expm`` for a call of ``scipy.linalg.expm`` (however the code
    imported it), ``mutad.scipy.stats.norm.logpdf`` for ``norm.logpdf``, when mutad has a
    differentiated version of that function."""
    head, *rest = called.split(".")
    func = frame.f_locals.get(head, frame.f_globals.get(head))
    for name in rest:
        func = getattr(func, name, None)
    parts = (getattr(func, "__module__", None) or "").split(".")
    equivalent = sys.modules.get(f"mutad.scipy.{parts[1]}") if (
        len(parts) > 1 and parts[0] == "scipy") else None
    if equivalent is None:
        return None
    path = called.split(".")[-2 if inspect.ismethod(func) else -1:]  # norm.logpdf, expm
    target = equivalent
    for name in path:
        target = getattr(target, name, None)
    return f"{equivalent.__name__}.{'.'.join(path)}" if callable(target) else None


def _formatting(frame):
    """Whether ``frame`` is executing ``text % values`` (``"%.3f" % loss``, the logging
    module's ``msg % args``), where Python reads a float of a value only to write its digits."""
    instructions = {i.offset: i for i in dis.get_instructions(frame.f_code)}
    instruction = instructions.get(frame.f_lasti)
    return instruction is not None and (instruction.opname == "BINARY_MODULO" or (
        instruction.opname == "BINARY_OP" and instruction.argrepr in ("%", "%=")))


def _storing_item(frame):
    """Whether ``frame`` is executing ``array[key] = value``: NumPy converts a traced value
    assigned into a plain array, and the conversion should be reported as that write."""
    instructions = {i.offset: i.opname for i in dis.get_instructions(frame.f_code)}
    return instructions.get(frame.f_lasti) == "STORE_SUBSCR"


def _naming_a_field(frame):
    """Whether the line ``frame`` runs stores with a string key (``p['pos'] = x``): a field of
    a structured array, most likely."""
    instructions = list(dis.get_instructions(frame.f_code))
    line = next((i.positions.lineno for i in instructions if i.offset == frame.f_lasti), None)
    return line is not None and any(
        i.opname == "LOAD_CONST" and type(i.argval) is str and i.positions.lineno == line
        for i in instructions)


STRUCTURED_FIX = ("If it is a field of a structured array (a record dtype, p['pos']): mutad "
                  "follows the fields of one the function allocates with NumPy's factories "
                  "(np.zeros(n, dtype=[('pos', float), ('vel', float)]), np.empty, np.array "
                  "of tuples) or reaches by a name (self.p, a module's), not of one made "
                  "before that it reaches otherwise or one made by np.rec or np.recarray. "
                  "Allocate it so inside the function, or keep each field in an array of its "
                  "own (pos = np.zeros(n); vel = np.zeros(n)).")


BUFFER_FIX = ("If it is Python's array.array, a bytearray or a memoryview: they hold plain "
              "numbers, which have no derivative. Collect traced values in a list "
              "(np.array(values) stacks them), or write them into an array made inside the "
              "function (np.zeros(n), np.empty_like(x)).")


MEMMAP_FIX = ("If it is a memory map (np.memmap, wherever it was made, mode='w+' or 'c' in "
              "the function too): mutad does not follow its writes, whose bytes are a file's "
              "(or, of mode='c', the map's own copy of them). Write traced values into an "
              "array the function follows, np.array(m) (a copy of its numbers, as mode='c' "
              "keeps its writes from the file) or np.zeros, and its numbers into the memory "
              "map after the differentiation.")


def integers_out(ufunc, inputs, out, kwargs, method="__call__"):
    """``ufunc(*inputs, out=k)`` of values with a derivative into an integer or boolean array
    ``k`` f made (``np.zeros(n, int)``, the allocation mode's stand-in of its own, whose
    ``__array_ufunc__`` passes on a plain view of it), as NumPy computes it: the ufunc's values
    cast into ``k`` (``casting='unsafe'``), whose derivative is zero. Written as
    ``k[...] = ufunc(*inputs)``, the cast the engines make of a value into integers, which a
    replay guards; None where this is no such call (an array made before f: its error), or
    where it has other settings than ``casting=`` and ``dtype=`` (``where=``: its error).
    A ``method`` (``np.add.accumulate(x, out=k)``, ``reduce``, ``reduceat``) computes in the
    promotion of its operand's dtype and ``k``'s and casts into ``k`` whatever the kinds, as
    NumPy's reductions do; with ``axis=``, ``keepdims=`` or ``initial=`` too."""
    settings = {"casting", "dtype"} if method == "__call__" else {
        "axis", "dtype", "keepdims", "initial"}
    if not integers_made(out) or set(kwargs) - settings - {"out"} \
            or method not in ("__call__", "reduce", "accumulate", "reduceat") \
            or not any(wrapped(x) for x in inputs):
        return None
    computing = {k: v for k, v in kwargs.items() if k not in ("out", "casting")}
    if method != "__call__":
        computing.setdefault("dtype", np.promote_types(memory(inputs[0]).dtype, out.dtype))
    y = getattr(ufunc, method)(*inputs, **computing)
    if method == "__call__" and not np.can_cast(y.dtype, out.dtype,
                                                kwargs.get("casting", "same_kind")):
        plain = [memory(x) if wrapped(x) else x for x in inputs]
        ufunc(*plain, out=np.empty(out.shape, out.dtype), **kwargs)  # NumPy's error
    out[...] = y
    return out


def integers_made(out):
    """Whether ``out`` is an integer or boolean array f made (``np.zeros(n, int)``: the
    allocation mode's stand-in of its own passes on a plain view of it), into which values
    with a derivative are cast as NumPy casts them, their derivative zero."""
    return isinstance(out, np.ndarray) and out.dtype.kind in "iub" \
        and type(owner(out)) is Preexisting


def integers_assigned(out, y):
    """``f(..., out=k)`` of a function with a rule (``np.clip``, ``np.cumsum``, ``np.mean``)
    whose result ``y``, computed apart, has a derivative, and ``k`` an integer or boolean array
    f made: ``y`` cast into ``k``, as NumPy casts its result into such an ``out`` (NumPy's
    refusal of the cast already raised: ``judge_out``), whose derivative is zero. Written as
    ``k[...] = y``, the cast the engines make of a value into integers, which a replay
    guards, as ``integers_out`` does for ufuncs; None where ``k`` is no such array."""
    if not integers_made(out) or not wrapped(y):
        return None
    out[...] = y
    return out


def numpys_loop_error(ufunc, values):
    """Raise NumPy's own error where ``ufunc`` has no loop for the types of ``values``
    (``np.divmod``, ``np.modf``, ``np.frexp`` of complex values: a TypeError), which a rule
    routed to would otherwise refuse for a reason of mutad's (no complex rule): asked of empty
    arrays of the operands' dtypes, Python numbers as they are (NumPy's weak promotion); a
    generalized ufunc's (``np.matvec``) of the operands' dimensions, each of length 0, so that
    its core dimensions agree."""
    core = ufunc.signature is not None
    ufunc(*(np.empty((0,) * (np.ndim(x) if core else 1), x.dtype) if hasattr(x, "dtype") else x
            for x in values))


def untraced_write(what, into=None):
    """The error for writing a traced value into an array mutad does not follow (``into``,
    where the caller has it)."""
    error = UntracedWriteError(
        f"{what}: a traced value was written into a plain array mutad does not follow, so its "
        "gradient would be lost: one created before the differentiation started that the "
        "function reaches only through an object mutad does not look into (a cache, a "
        "deque), or an integer or structured one, or one created by an enclosing "
        "differentiation, or one made inside the function by a call the allocation mode does "
        "not follow (a draw from a generator made before the differentiation, a copy of an "
        "array reached only through such an object). Allocate it inside "
        "the function (np.zeros, np.empty, u = U0.copy(), np.array(a)), which is followed, "
        "reach it by a name (a module-level or closure variable, a default argument, an "
        "attribute its code names: its writes are then followed, and its bytes written back), "
        "or pass it as an argument. " + FRESH_FIX)
    if isinstance(into, np.memmap):
        error.args = (error.args[0] + " " + MEMMAP_FIX,)
    return error


FRESH_FIX = ("A new array a call made inside the function from plain values (np.ma.getdata, "
             "np.asarray of a SciPy matrix) takes traced values by an augmented assignment to "
             "the one name that holds it (y *= x), nothing else holding it (another name, a "
             "view, an object); otherwise write into a copy of it (y = np.array(y)).")


def lost_tangent(what):
    """The error for writing a value with a tangent of an inner forward level into an array of
    an outer level (traced, or a dual of an outer jvp), where that tangent would be lost."""
    return UntracedWriteError(
        f"{what}: a value with a forward-mode tangent (from mutad.jvp) was written into an "
        "array of an enclosing differentiation, which carries no such tangent, so it would be "
        "lost. Allocate the destination inside the function jvp differentiates (np.zeros(n) "
        "there carries a tangent).")


ALIAS_FIX = ("Pass the array as an argument too (arguments that share memory are one buffer "
             "with one gradient), or read a copy of it made before the differentiation.")


def alias_read_after_write(shape, argument):
    """The error for reading, from elsewhere than the arguments (a global, a closure), an
    array of ``shape`` that shares memory with an argument of shape ``argument`` the
    function wrote into: its values depend on the arguments, and are read as constants."""
    return ConstantModifiedError(
        f"an array of shape {shape} that the function reads from elsewhere than its arguments "
        f"(a global, a closure, an attribute) shares memory with an argument of shape "
        f"{argument}, which the function wrote into: its values depend on the arguments, and "
        "the derivative through them would be lost. " + ALIAS_FIX)


def alias_written(shape, argument):
    """The error for writing, by NumPy alone, into an array of ``shape`` that the function
    reaches from elsewhere than its arguments and that shares memory with an argument of shape
    ``argument``: the write would change the argument where the differentiation does not see
    it."""
    return ConstantModifiedError(
        f"the function writes into an array of shape {shape} it reaches from elsewhere than "
        f"its arguments (a global, a closure, an attribute) that shares memory with an "
        f"argument of shape {argument}: the write would change the argument where mutad does "
        "not see it. Write into the argument itself, or into a copy of the array.")


def alias_written_after_read(shape, argument):
    """The error for writing into an argument of shape ``argument`` after an operation read,
    from elsewhere than the arguments, an array of ``shape`` sharing its memory, as a constant
    whose values its gradient needs."""
    return ConstantModifiedError(
        f"the function writes into an argument of shape {argument} whose memory an array of "
        f"shape {shape} it read from elsewhere than its arguments (a global, a closure, an "
        "attribute) shares: an operation read that array as a constant, its gradient needs "
        "those values, and the write would change them. " + ALIAS_FIX)


# ----------------------------------------------------------------------------------------------
# out= of another dtype than the result: computed as NumPy computes it


def _dtype_of(x):
    dtype = getattr(x, "dtype", None)
    return None if dtype is None else np.dtype(dtype)


def _out_reductions():
    """The functions whose NumPy ``out=`` makes the reduction run in the promotion of the
    input's dtype and ``out``'s (a ufunc's ``reduce`` or ``accumulate`` with ``out`` and no
    ``dtype``: float32 data summed into a float64 ``out`` is summed in float64)."""
    reductions = {np.sum, np.nansum, np.prod, np.nanprod, np.cumsum, np.cumprod, np.nancumsum,
                  np.nancumprod, np.trace}
    for name in ("cumulative_sum", "cumulative_prod"):
        if hasattr(np, name):
            reductions.add(getattr(np, name))
    for ufunc in (np.add, np.multiply):
        reductions.update((ufunc, method) for method in ("reduce", "accumulate", "reduceat"))
    return reductions


OUT_REDUCTIONS = _out_reductions()
OUT_MEANS = {np.mean: True, np.nanmean: False}  # (whether float16 data is summed in float32)
OUT_ROUNDED_APART = {np.var, np.std, np.ptp}
"""NumPy's ``out=`` of another dtype than their result rounds their steps apart: ``np.var``
computes the mean and the deviations in the data's dtype, sums their squares in ``out``'s;
``np.ptp`` takes the maximum into ``out`` before subtracting the minimum."""
OUT_FFTS = {getattr(np.fft, name) for name in (
    "fft", "ifft", "rfft", "irfft", "hfft", "ihfft", "fftn", "ifftn", "rfftn", "irfftn", "fft2",
    "ifft2", "rfft2", "irfft2")}
"""``np.fft``'s ``out=`` of a wider dtype: the transform is computed at ``out``'s precision."""


def _dtype_position(func):
    """The position of ``func``'s ``dtype`` parameter when it can be passed positionally."""
    if func not in DTYPE_POSITIONS:
        try:
            parameters = list(inspect.signature(func).parameters.values())
        except (TypeError, ValueError):
            parameters = []
        DTYPE_POSITIONS[func] = next((i for i, p in enumerate(parameters) if p.name == "dtype"
                                      and p.kind == p.POSITIONAL_OR_KEYWORD), None)
    return DTYPE_POSITIONS[func]


DTYPE_POSITIONS = {}


def out_computation(func, args, kwargs):
    """``args`` and ``kwargs`` with the settings that make a rule (which computes its result,
    which the engine then assigns to ``out``) compute what NumPy computes when
    ``func(*args, **kwargs)`` is given an ``out`` of another dtype than its result: a
    reduction (``np.sum``, ``np.cumsum``, ``np.add.reduce``, ``np.mean``) or ``np.einsum``
    given no ``dtype`` computes in the promotion of its operands' dtypes and ``out``'s, which
    ``dtype=`` says (in the position the call gave it). Where NumPy's ``out=`` rounds steps
    apart that no setting reproduces, refused with what to write instead."""
    out = kwargs.get("out")
    if type(out) is tuple and len(out) == 1:
        out = out[0]
    out_dtype = _dtype_of(out)
    if out_dtype is None or out_dtype.kind not in "fc" or not args:
        return args, kwargs
    name = function_name(func)
    position = None if type(func) is tuple else _dtype_position(func)
    positional = position is not None and len(args) > position
    given = args[position] if positional else kwargs.get("dtype")

    def computed_in(dtype):  # the call with dtype= given, where the call gave it
        if positional:
            return (*args[:position], dtype, *args[position + 1:]), kwargs
        return args, {**kwargs, "dtype": dtype}

    if func is np.einsum:
        operands = args[1:] if isinstance(args[0], str) else args[0:len(args) - len(args) % 2:2]
        dtypes = [_dtype_of(x) for x in operands]
        if given is not None or any(d is None for d in dtypes):
            return args, kwargs
        if kwargs.get("optimize", False) is not False and len(operands) > 1:
            return args, kwargs  # its last contraction is a product NumPy rounds into out
        if np.result_type(*dtypes, out_dtype) == out_dtype != np.result_type(*dtypes):
            return computed_in(out_dtype)
        return args, kwargs
    dtype = _dtype_of(args[0])
    if dtype is None or dtype.kind not in "biufc":
        return args, kwargs
    if func in OUT_REDUCTIONS:
        if given is None:
            return computed_in(np.promote_types(dtype, out_dtype))
        return args, kwargs
    if func in OUT_MEANS:
        summed = given
        if summed is None:
            summed = np.dtype(np.float64) if dtype.kind in "biu" else \
                np.dtype(np.float32) if OUT_MEANS[func] and dtype == np.float16 else dtype
            summed = np.promote_types(summed, out_dtype)
        if np.dtype(summed) == out_dtype:
            return computed_in(out_dtype)
        raise UnsupportedOperationError(
            f"{name}(..., out=...) into an array of dtype {out_dtype}, narrower than the "
            f"{np.dtype(summed)} NumPy sums in: NumPy rounds the sum into out before dividing, "
            f"and mutad does not follow that. Compute the mean without out= and assign it "
            f"(out[...] = {name}(x, ...)), or give out the dtype {np.dtype(summed)}.")
    if func in OUT_ROUNDED_APART or func in OUT_FFTS:
        probe = np.zeros((2, 2) if func in OUT_FFTS else 2, dtype)
        settings = {} if given is None else {"dtype": given}
        result = np.dtype(func(probe, **settings).dtype)
        if result != out_dtype:
            how = ("computes the transform at out's precision" if func in OUT_FFTS else
                   "rounds its steps apart into out")
            raise UnsupportedOperationError(
                f"{name}(..., out=...) into an array of dtype {out_dtype} where its result is "
                f"{result}: NumPy {how}, and mutad does not follow that. Compute it without "
                f"out= and assign it (out[...] = {name}(x, ...)), or convert x first "
                f"({name}(x.astype(...), out=out)).")
    return args, kwargs
