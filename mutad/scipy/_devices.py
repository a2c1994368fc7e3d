"""SciPy's routines on device arrays (CuPy's): the values of the device's SciPy counterpart
(``cupyx.scipy``, ``devices.scipy_of``), the derivatives of mutad's rules.

A rule computes with mutad's wrappers of SciPy's functions and with NumPy's names. Given plain
device arrays, NumPy's names dispatch to the device library, and a wrapper calls, through
:func:`call`, the counterpart of its SciPy function: the function of the same name in the same
submodule of the device's SciPy (``cupyx.scipy.linalg.lu_factor`` for
``scipy.linalg.lu_factor``). So a rule written for NumPy arrays computes on the device, values
and cotangents, and nothing is copied to the host.

``ROUTINES`` is the one list of the routines so differentiated: those whose rules compute with
nothing but these wrappers and NumPy's names, and whose counterparts take SciPy's parameters
in SciPy's order (as cupyx.scipy's do); it names each one's array parameters, which a rule
may give as lists or host arrays (``lfilter([1.0], a, ...)``) and which are copied to the
device, as the counterparts take device arrays only. ``ADAPTED`` computes the few the
device's SciPy lacks with the device library's own functions (``scipy.linalg.solve`` of a
general matrix with ``cupy.linalg.solve``). A routine that is not listed, or that the device
lacks, is refused by name when given a device array (``_adjoints.refuse_device_arrays``).

The counterparts themselves, called by user code on traced arrays
(``cupyx.scipy.linalg.lu_factor(a, ...)``), are routed to mutad's wrappers of SciPy's
functions while a differentiation runs (``registry.defroute``): the same rules.
"""

import functools
import inspect

from ..core import devices
from ..core.debug import from_callers_line
from ..core.errors import UnsupportedArrayError
from ..core.registry import defroute

ROUTINES = {
    "linalg": {"solve": ("a", "b"), "solve_triangular": ("a", "b"), "lu_factor": ("a",),
               "lu_solve": ("b",), "cholesky": ("a",), "cho_factor": ("a",),
               "cho_solve": ("b",)},
    "special": {"logsumexp": ("a", "b")},
    "signal": {"lfilter": ("b", "a", "x", "zi"), "convolve": ("in1", "in2"),
               "fftconvolve": ("in1", "in2")},
    # mutad's convolve, gaussian_filter and uniform_filter are compositions of its primitive
    # filter (mutad.scipy.ndimage), whose values the device's correlate, correlate1d and
    # uniform_filter1d compute
    "ndimage": {"correlate": ("input", "weights"), "correlate1d": ("input", "weights"),
                "uniform_filter1d": ("input",), "convolve": ("input", "weights"),
                "gaussian_filter": ("input",), "uniform_filter": ("input",)},
}
"""SciPy's routines differentiated on a device, by submodule, with their array parameters."""


def _general_solve(namespace):
    """``scipy.linalg.solve`` of one general matrix with the device library's
    ``linalg.solve`` (``cupy.linalg.solve``; cupyx.scipy.linalg has no ``solve``): the same
    solution, rounded as the device's LU solver rounds it. SciPy's other structures are
    refused; ``check_finite`` is not checked (a read on the host), as cupyx.scipy's functions
    check nothing by default."""
    device_solve = getattr(getattr(namespace, "linalg", None), "solve", None)
    if device_solve is None:
        return None

    def solve(a, b, lower=False, overwrite_a=False, overwrite_b=False, check_finite=True,
              assume_a=None, transposed=False):
        if assume_a not in (None, "gen", "general") or a.ndim != 2:
            raise UnsupportedArrayError(
                f"scipy.linalg.solve(a, b, assume_a={assume_a!r}) of a {a.ndim}-d array was "
                "given a device array (CuPy's): on a device mutad solves one general matrix "
                "(assume_a=None or 'gen'), with the device's linalg.solve. Use "
                "np.linalg.solve, or np.linalg.cholesky and solve_triangular for a positive "
                "definite matrix.")
        return device_solve(a.T if transposed else a, b)

    return solve


def _one_matrix(name, a):
    if a.ndim != 2:
        raise UnsupportedArrayError(
            f"scipy.linalg.{name} of a {a.ndim}-d array was given a device array (CuPy's): on "
            "a device mutad factors one matrix; loop over the stack.")


def _read_triangle(xp, a, lower):
    """The Hermitian matrix LAPACK's potrf reads in ``a``'s ``lower`` (or upper) triangle:
    the device's ``linalg.cholesky`` reads the lower one."""
    if lower:
        return xp.tril(a) + xp.conj(xp.tril(a, -1)).T
    return xp.triu(a) + xp.conj(xp.triu(a, 1)).T


def _cholesky(namespace):
    """``scipy.linalg.cholesky`` with the device library's ``linalg.cholesky`` (of the
    triangle SciPy reads): the factor, zeros in the other triangle."""
    xp = namespace
    if getattr(getattr(xp, "linalg", None), "cholesky", None) is None:
        return None

    def cholesky(a, lower=False, overwrite_a=False, check_finite=True):
        _one_matrix("cholesky", a)
        factor = xp.tril(xp.linalg.cholesky(_read_triangle(xp, a, lower)))
        return factor if lower else xp.conj(factor).T

    return cholesky


def _cho_factor(namespace):
    """``scipy.linalg.cho_factor``: the factor in the triangle SciPy reads, ``a``'s own
    entries in the other one, as LAPACK's potrf leaves them."""
    xp = namespace
    if getattr(getattr(xp, "linalg", None), "cholesky", None) is None:
        return None

    def cho_factor(a, lower=False, overwrite_a=False, check_finite=True):
        _one_matrix("cho_factor", a)
        factor = xp.tril(xp.linalg.cholesky(_read_triangle(xp, a, lower)))
        if lower:
            return factor + xp.triu(a, 1), lower
        return xp.conj(factor).T + xp.tril(a, -1), lower

    return cho_factor


def _cho_solve(namespace):
    """``scipy.linalg.cho_solve``: two triangular solves with the device's SciPy's
    ``solve_triangular``, which reads the factor's triangle alone (A = L Lᴴ, or Uᴴ U)."""
    solve_triangular = _COUNTERPARTS.get((id(namespace), "linalg", "solve_triangular"))
    if solve_triangular is None or solve_triangular[1] is None:
        return None
    solve_triangular = solve_triangular[1]

    def cho_solve(c_and_lower, b, overwrite_b=False, check_finite=True):
        c, lower = c_and_lower
        first = solve_triangular(c, b, 0 if lower else 2, lower)
        return solve_triangular(c, first, 2 if lower else 0, lower)

    return cho_solve


ADAPTED = {("linalg", "solve"): _general_solve, ("linalg", "cholesky"): _cholesky,
           ("linalg", "cho_factor"): _cho_factor, ("linalg", "cho_solve"): _cho_solve}
"""Routines the device's SciPy lacks, computed with the device library's own functions:
``(submodule, name) -> (namespace -> SciPy's function on that device, or None)``."""

_COUNTERPARTS = {}
"""``(id(namespace), submodule, name) -> (namespace, the device's function or None)``, read
when the namespace became known (before the mode swaps stand-ins into its modules)."""

_DEVICES_OWN = {}
"""The counterparts that are functions of the device's SciPy (not ``ADAPTED``), which user code
may call: ``_COUNTERPARTS``' entries routed to mutad's stand-ins."""

_KNOWN = {}  # id(namespace) -> namespace, for the namespaces read

_STAND_INS = {}
"""``(submodule, name) -> mutad's stand-in for SciPy's function``, as the wrappers are made."""


def routine(fn):
    """``(submodule, name)`` of SciPy's function ``fn`` if it is in ``ROUTINES``, else None."""
    module = getattr(fn, "__module__", None) or ""
    parts = module.split(".")
    name = getattr(fn, "__name__", None)
    if len(parts) < 2 or parts[0] != "scipy" or name not in ROUTINES.get(parts[1], ()):
        return None
    return parts[1], name


def counterpart(fn, namespace):
    """The function of device library ``namespace``'s SciPy counterpart that computes SciPy's
    ``fn``, or None (not in ``ROUTINES``, or missing on that device)."""
    key = routine(fn)
    if key is None:
        return None
    key = (id(namespace),) + key
    found = _COUNTERPARTS.get(key)
    if found is None or found[0] is not namespace:
        _known(namespace)
        found = _COUNTERPARTS[key]
    return found[1]


def device_among(args):
    """The namespace of the first device array among ``args`` (one level into lists and
    tuples), or None."""
    for a in args:
        for item in a if type(a) in (tuple, list) else (a,):
            found = devices.device_of(item)
            if found is not None:
                return found
    return None


THROUGH_COUNTERPARTS = set()
"""mutad's own functions built on SciPy's (a primitive a rule family shares) that compute with
SciPy's functions through :func:`call`, so on a device with their counterparts."""


def through_counterparts(fn):
    """Declare that ``fn``, a function of mutad's own, calls SciPy's through :func:`call`."""
    THROUGH_COUNTERPARTS.add(fn)
    return fn


def computes_on(fn, namespace):
    """Whether ``fn`` (SciPy's, or mutad's own on SciPy's) computes on device ``namespace``."""
    if scipys(fn):
        return counterpart(fn, namespace) is not None
    return fn in THROUGH_COUNTERPARTS


def scipys(fn):
    """Whether ``fn`` is SciPy's (not a function of mutad's own built on SciPy's)."""
    return (getattr(fn, "__module__", None) or "").partition(".")[0] == "scipy"


def call(fn, args, kwargs):
    """``fn(*args, **kwargs)`` on plain values: for SciPy's ``fn`` given a device array (among
    ``args``, one level into lists and tuples), its device counterpart, refused by name where
    there is none."""
    ours = not scipys(fn)
    namespace = None if ours else device_among((*args, *kwargs.values()))
    if namespace is None:
        # (SciPy's warnings name the line that called it for the user's code, not mutad's)
        return fn(*args, **kwargs) if ours else from_callers_line(fn, args, kwargs)
    on_device = counterpart(fn, namespace)
    if on_device is None:
        raise refusal(fn)
    arrays = ROUTINES[routine(fn)[0]][fn.__name__]
    positions = list(_parameters(fn))
    args = [_beside(namespace, a) if i < len(positions) and positions[i] in arrays else a
            for i, a in enumerate(args)]
    kwargs = {k: _beside(namespace, v) if k in arrays else v for k, v in kwargs.items()}
    return on_device(*args, **kwargs)


def refusal(fn):
    """The error of SciPy's ``fn`` given a device array where mutad has no way to compute it
    there."""
    module = (getattr(fn, "__module__", None) or "scipy").split(".")
    if module[0] == "scipy":
        module = module[:2]  # scipy.linalg.inv, not scipy.linalg._basic.inv
    name = f"{'.'.join(module)}.{getattr(fn, '__name__', fn)}"
    public = routine(fn)
    known = ", ".join(f"scipy.{sub}.{n}" for sub, names in ROUTINES.items() for n in names)
    why = ("the device's SciPy (cupyx.scipy) has no counterpart of it" if public is not None
           else "mutad differentiates on a device only the SciPy routines its device's SciPy "
           f"(cupyx.scipy) computes there: {known}")
    return UnsupportedArrayError(
        f"{name} was given a device array (CuPy's): {why}. On a device, write the step with "
        "NumPy's functions, which mutad differentiates there (np.linalg.inv for "
        "scipy.linalg.inv), or call it on values that carry no derivative.")


@functools.lru_cache(maxsize=None)
def _parameters(fn):
    return tuple(inspect.signature(fn).parameters)


def _beside(namespace, value):
    """An array argument on the device: a list, tuple, number or host array copied there."""
    if value is None or devices.device_of(value) is not None:
        return value
    if type(value) in (list, tuple) and any(devices.device_of(v) is not None for v in value):
        return value  # (lu_and_piv: the device's own factors)
    return namespace.asarray(value)


def made(original, stand_in):
    """Note that ``stand_in`` stands in for SciPy's ``original`` while a differentiation runs;
    where it is in ``ROUTINES`` its devices' counterparts are routed to it too."""
    key = routine(original)
    if key is None:
        return
    _STAND_INS[key] = stand_in
    for (_, *of), (_, found) in list(_DEVICES_OWN.items()):
        if tuple(of) == key:
            defroute(found, stand_in)


def _known(namespace):
    """Read device library ``namespace``'s counterparts of ``ROUTINES`` and route them to
    mutad's stand-ins (a ``devices.FOUND`` callback)."""
    if _KNOWN.get(id(namespace)) is namespace:
        return
    _KNOWN[id(namespace)] = namespace
    for sub, name in _keys():
        module = devices.scipy_module(namespace, sub)
        found = getattr(module, name, None)
        if found is None and (sub, name) in ADAPTED:
            _COUNTERPARTS[id(namespace), sub, name] = (namespace, ADAPTED[sub, name](namespace))
            continue  # (no function of the device's SciPy to route)
        _COUNTERPARTS[id(namespace), sub, name] = (namespace, found)
        if found is None:
            continue
        _DEVICES_OWN[id(namespace), sub, name] = (namespace, found)
        stand_in = _STAND_INS.get((sub, name))
        if stand_in is not None:
            defroute(found, stand_in)


def _keys():
    return ((sub, name) for sub, names in ROUTINES.items() for name in names)


devices.FOUND.append(_known)
for _namespace in list(devices.NAMESPACES.values()):
    if _namespace is not None:
        _known(_namespace)
