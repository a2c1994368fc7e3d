"""``scipy.interpolate``'s interpolants, differentiated in their data and their query points.

>>> import numpy as np, mutad
>>> from mutad.scipy.interpolate import CubicSpline   # or from scipy.interpolate, in user code
>>> x = np.linspace(0.0, 3.0, 7)
>>> def area(y):
...     return CubicSpline(x, y)(np.array([0.5, 1.2])).sum()
>>> mutad.gradient(area, np.sin(x))[0].round(4)
array([ 0.0131,  0.8949,  0.7023,  0.4754, -0.1057,  0.0229, -0.0029])

User code calls SciPy by its own names (``CubicSpline``, ``interp1d``, ``make_interp_spline``,
``make_lsq_spline``, ``BSpline``, ``PPoly`` (and ``PPoly.from_spline`` of a spline ``(t, c, k)``
of traced coefficients, linear in them), ``BPoly`` (and ``BPoly.from_derivatives``),
``BarycentricInterpolator``, ``barycentric_interpolate``,
``PchipInterpolator``, ``pchip_interpolate``, ``Akima1DInterpolator``, ``KroghInterpolator``
and ``krogh_interpolate`` (SciPy's own steps on the traced arrays),
``CubicHermiteSpline``, ``RegularGridInterpolator``, ``interpn``; for scattered data
``griddata``, ``LinearNDInterpolator``, ``NearestNDInterpolator``, ``RBFInterpolator``; and
``splrep`` then ``splev``, ``splint``, ``splder``, ``splantider``; ``UnivariateSpline``, its
smoothing fit on FITPACK's knots too; the legacy ``Rbf``), however it imported them:
while a differentiation runs, a constructor given traced data returns an interpolant of mutad's
own (its values SciPy's, computed on the plain data at each call), and an interpolant SciPy
built from plain data (outside the differentiated function, or inside it) is differentiated in
its query points when called with traced ones (``registry.defmethod``), FITPACK's curves and
surfaces (``UnivariateSpline`` and its subclasses, the bivariate splines' ``__call__`` and
``ev``) too.

Derivatives:

* in the query points: the interpolant's derivative there (``cs(x, 1)``; the partial
  derivatives along each axis for ``RegularGridInterpolator``, from its spline of the same
  degree: ``'slinear'`` for ``'linear'``). Where the interpolant is piecewise constant
  (``'nearest'``, ``'previous'``, ``'next'``, ``'zero'``) or the query is outside the data and
  gets the constant ``fill_value``, it is 0; at a knot where a derivative jumps, one side's.
* in ``interp1d``'s ``fill_value`` (a number, an array, a ``(below, above)`` tuple): 1 where
  the query lies outside the data and gets it (``_Filled``).
* in the data ``y``: the interpolants of ``CubicSpline``, ``interp1d``, ``make_interp_spline``,
  ``make_lsq_spline`` (its least-squares fit on constant knots and weights), ``BSpline`` (its coefficients ``c``), ``PPoly`` and ``BPoly`` (their coefficients ``c``, of ``axis=0``,
  real or complex; ``BPoly.from_derivatives``'s coefficients are linear in the values and
  derivatives at the constant knots), ``BarycentricInterpolator`` and ``barycentric_interpolate`` (``yi``, real
  or complex, with the weights of
  one construction of SciPy's: SciPy draws a random order of the nodes for them, so pass
  ``rng=`` for values that repeat bit for bit; its derivatives in the queries assume the
  polynomial's weights, so given weights ``wi`` at traced queries are refused),
  ``CubicHermiteSpline`` (``y`` and ``dydx``) and
  ``RegularGridInterpolator`` are linear in the data (affine with boundary values:
  ``bc_type=((1, 0.5), ...)``, ``fill_value``), so the values
  at the queries are ``W y``, ``W`` the values at the queries of the interpolants of the identity
  columns (with zero boundary values and fills): ``ȳ = Wᵀ v̄``, ``ẏ ↦ W ẏ``. ``W`` has one
  column per data point (per grid point), computed a block of columns at a time (m × n values
  in all, for m queries and n data points: a few seconds for n = m = 5000).
  ``PchipInterpolator`` and ``Akima1DInterpolator`` are cubic Hermite splines whose slopes are
  functions of ``y`` (not linear): their slopes are recomputed with NumPy operations that mutad
  differentiates (SciPy's formulas, their decisions at extrema and flat pieces kept), and the
  Hermite interpolant is linear in ``(y, slopes)``. A ``CubicSpline`` whose prescribed end
  derivatives (``bc_type=((1, s), ...)``) are traced is linear in ``y`` and them jointly: they
  are further rows of its datum, after ``y``'s along the interpolation axis.

Periodic boundary conditions read ``y[0]`` and ``y[-1]`` as one value: each gets half of its
cotangent (the derivative along periodic data). The spline methods of
``RegularGridInterpolator`` (``'slinear'``, ``'cubic'``, ``'quintic'``) solve for their
coefficients with SciPy's iterative solver by default (``gcrotmk``, ``atol=1e-6``): the values
are SciPy's, their derivatives in the points those of SciPy's spline, and their gradient in the
values that of the exactly solved spline (mutad solves directly), which SciPy's values follow
to the solver's tolerance; pass ``solver=scipy.sparse.linalg.spsolve`` for values linear in the
data up to rounding.

Traced knots ``x`` of ``interp1d(kind='linear')`` (or ``'slinear'``) and of ``CubicSpline``:
SciPy's values, with the derivatives of SciPy's steps in the knots, the data
and the queries (interp1d's formula; the spline's tridiagonal system and Hermite pieces), the
order of the knots and each query's interval decided on the plain values. Traced knots of
interp1d's piecewise constant kinds (``'previous'``, ``'next'``, ``'nearest'``,
``'nearest-up'``, ``'zero'``): SciPy's values, each a data point picked by a step function of
the knots and queries (derivative zero in them), differentiated in the data; the point each
query picks decided on the plain values.

Refused, with an error that says what to do: other traced knots ``x`` and grids (interpolate in
a variable made from them instead), traced boundary values in ``bc_type`` (but a
``CubicSpline``'s on plain knots) and a traced
``fill_value``, ``method='pchip'`` of ``RegularGridInterpolator`` with traced values or points,
and attributes of a traced interpolant other than calling it, ``derivative``, its knots
``x`` (a B-spline's ``t`` and ``k``) and its coefficients ``c`` (SciPy's, differentiated as
the affine map of the data they are: ``c₀ + Σ_i C_i d_i``, ``C_i`` the coefficients of the
interpolants of the identity columns), build it from plain data for those. ``antiderivative`` and
``integrate(a, b)`` of ``CubicSpline``, the Hermite splines and ``PPoly`` (not of one already
differentiated or integrated, whose spec would not reproduce SciPy's chained values, nor with
periodic extrapolation past the data's interval) are linear in the data too: the antiderivative
is SciPy's ``derivative(-nu)``, and an integral SciPy's own value with the derivatives of
F(b) - F(a), differentiated in the data and the bounds; ``integrate(a, b)`` of the B-splines
(``BSpline``, ``make_interp_spline``'s, ``make_lsq_spline``'s) too, its bounds clipped to the
base interval where SciPy clips them (``extrapolate=False``).

Every rule computes with this module's evaluations and NumPy, so a derivative is differentiated
again (``mutad.hvp``, a gradient of a gradient) and forward mode works as reverse mode does.

Scattered data (``griddata``, ``LinearNDInterpolator``, ``NearestNDInterpolator``,
``RBFInterpolator``): the values are SciPy's own interpolant's (of the plain values and
points). Linear interpolation is differentiated in the values and the queries as
Σ_k b_k(x) values[vertex_k], the barycentric weights b of the simplex of SciPy's Delaunay
triangulation that holds each query (decided on the plain queries; 0 outside, where SciPy
gives ``fill_value``), affine in x; of traced data points (``griddata(method='linear')``,
``LinearNDInterpolator``) the weights solve each simplex's system in the traced points, the
triangulation and each query's simplex decided on the plain points. The nearest neighbour
passes each query's cotangent to the value at SciPy's nearest data point (its derivative in
the queries 0). One-dimensional
``griddata`` is SciPy's ``interp1d`` of the sorted points (above). ``RBFInterpolator`` (and
SciPy's own at differentiated queries) is differentiated in its values ``d``, its data points
``y`` and the queries through SciPy's vectorized steps written with functions mutad
differentiates: the polynomial domain scaled by the data's bounds, the system of kernels and
monomials solved, its coefficients applied at the queries (the kernels smooth in r² written in
r², the others with the derivative 0 at a query on a data point). With ``neighbors`` its local
systems are differentiated in ``d`` alone, as ``W d``, ``W`` the values of the interpolants of
the identity columns, a block of columns at a time (both modes and every order through the
transposed pair). Refused: differentiated data points of the nearest neighbour and
Clough-Tocher interpolants,
a differentiated ``fill_value`` (but ``interp1d``'s), differentiated queries, data points,
``smoothing`` or ``epsilon`` of ``RBFInterpolator`` with ``neighbors`` (without, the
composition is differentiated in ``smoothing`` and ``epsilon`` too), and ``CloughTocher2DInterpolator`` (and
``griddata(method='cubic')`` in two dimensions) of differentiated values at differentiated
queries or of more than one column of values (of plain values it is differentiated at its
queries: SciPy's cubic Bezier polynomial of a query's barycentric weights); of one column of differentiated values it is linear in them for the number
of sweeps SciPy's iterative gradient estimate took, a decision of the forward pass, and is
differentiated so. ``lagrange`` is
SciPy's steps on differentiated nodes and values (refused where the sum cancels the leading
coefficient to 0, which SciPy's ``poly1d`` trims).
"""

import copy
import functools
import inspect
import math
import types
import warnings
from typing import Any

import numpy as np
import scipy.interpolate
import scipy.linalg
import scipy.sparse.linalg
import scipy.spatial
from scipy.interpolate import _fitpack_impl, _interpnd

from scipy.sparse.linalg import spsolve

from ..core.allocation import lists_as_arrays
from ..engines.arraylike import settled
from ..custom import Adjoint, dispatch
from ..core.errors import UnsupportedOperationError
from ..core.levels import Tracer
from ..core.views import memory
from ..core.registry import HOLOMORPHIC, defmethod, defroute
from ..api import stop_gradient
from ..linalg.structured import solve_banded as _solve_banded
from ..rules._helpers import unbroadcast
from ..rules._helpers import interp_piece, interp_sides
from ._adjoints import (ScipyAdjoint, Value, array_argument, following_scipys_code,
                        found_again, linear_map, refused_attribute, reproduces, scipys_value)

# SciPy's own names, kept before a differentiation routes the module's attributes to the
# stand-ins below (which call these)
_interpolate = types.SimpleNamespace(**vars(scipy.interpolate))

__all__ = ["Akima1DInterpolator", "BSpline", "BarycentricInterpolator",
           "CloughTocher2DInterpolator", "CubicHermiteSpline",
           "CubicSpline", "LinearNDInterpolator", "NearestNDInterpolator", "PPoly", "BPoly",
           "KroghInterpolator", "PchipInterpolator", "RectBivariateSpline",
           "RBFInterpolator", "Rbf", "RegularGridInterpolator", "griddata", "interp1d", "interpn",
           "barycentric_interpolate", "bisplrep", "krogh_interpolate", "lagrange",
           "make_interp_spline",
           "make_lsq_spline", "make_smoothing_spline", "pchip_interpolate",
           "splantider", "splder", "splev", "splint", "splprep", "splrep", "sproot"]


def _traced(tree):
    """Whether a value in ``tree`` (lists, tuples, dicts) carries a derivative for a running
    differentiation. An array the differentiated function made from none of its arguments
    (knots from ``np.linspace``) is a constant, which SciPy may read as it is."""
    if isinstance(tree, (list, tuple)):
        return any(_traced(item) for item in tree)
    if isinstance(tree, dict):
        return any(_traced(item) for item in tree.values())
    return isinstance(tree, Tracer) and tree.plain_value() is None


def _refuse_traced(name, what, value, instead):
    if _traced(value):
        _refuse_in_recording(value, message := (
            f"scipy.interpolate.{name}: mutad does not differentiate with respect to {what}, "
            f"and it depends on the differentiated arguments. {instead}"))
        raise UnsupportedOperationError(message)


def _refuse_in_recording(tree, message):
    """Before refusing traced ``tree`` (lists, tuples, dicts): a recording follows the arrays
    outside argnums as inputs of its program, so what is computed from them alone is traced
    there, where tracing holds it a constant and takes another path. The call is traced
    again (``replay.Replayed``), also where f catches the refusal and goes on
    (``Recorder.mistraced``), and so is its signature from then on. Whether one records."""
    if isinstance(tree, (list, tuple, dict)):
        items = tree.values() if isinstance(tree, dict) else tree
        return any([_refuse_in_recording(item, message) for item in items])
    recorder = getattr(getattr(tree, "tape", None), "recorder", None)
    if recorder is None or not recorder.outside_argnums:
        return False
    if recorder.mistraced is None:
        recorder.refuse(message)
        recorder.mistraced = message
    return True


def _plain_copy(value):
    """A plain array's own copy: SciPy copies what it keeps, and so must a traced interpolant,
    since the caller may write into the array afterwards."""
    return np.array(value, copy=True)


# ----------------------------------------------------------------------------------------------
# The evaluation: one differentiable operation, values(data..., points) at derivative order nu


class _Evaluation(Adjoint):
    """``spec.value(data, points, nu)``, differentiated in the data (linearly: the basis ``W``
    of each datum, ``values = W datum``) and in the points (the evaluation at the next
    derivative order, computed in the forward pass).

    A query's interval, and whether it lies outside the data, are decisions the pullback must
    not take again on points the default policy restored by inversion: the pullback computes
    ``W`` from a copy of the points made in the forward pass, a block of its columns at a time
    (so that large data need no m × n matrix). Where an outer differentiation follows the
    points, ``W`` is computed in the forward pass with this same operation instead, so that
    the outer one differentiates it."""

    complex_values: str | None = None

    def __init__(self):
        super().__init__(self._plain)
        self.__name__ = self.__qualname__ = "scipy.interpolate evaluation"
        self.rule(self._pullback_rule)
        self.jvp_rule(self._forward_rule)

    def _name(self):
        return self.__qualname__

    @staticmethod
    def _plain(*operands, spec, nu, followed=None):
        return spec.value(operands[:-1], operands[-1], nu)

    def __call__(self, *operands, spec, nu):
        followed = tuple(_traced(a) for a in operands)
        if not any(followed):
            return spec.value(operands[:-1], operands[-1], nu)
        return dispatch(self, operands, {"spec": spec, "nu": nu, "followed": followed})

    def _parts(self, operands, spec, nu, followed):
        """The basis of each followed datum, and the points' partials if they are followed."""
        *data, points = operands
        if _traced(points):  # an outer differentiation follows W: computed by this operation
            bases = [_Basis(_defined(self(*spec.identity(i, data), points,
                                          spec=spec.linear(i, data, spec.columns_count(i, data)),
                                          nu=nu)))
                     if is_followed else None for i, is_followed in enumerate(followed[:-1])]
        else:
            kept = np.array(points, copy=True)  # the forward pass's points, decisions and all
            bases = [_Blocks(spec, i, data, kept, nu) if is_followed else None
                     for i, is_followed in enumerate(followed[:-1])]
        slopes = None
        if followed[-1]:
            slopes = [_defined(self(*data, points, spec=spec.derivative_spec(), nu=higher))
                      for higher in spec.higher(nu)]
        return bases, slopes

    def _pullback_rule(self, *operands, spec, nu, followed):
        *data, points = operands
        y = self(*operands, spec=spec, nu=nu)
        bases, slopes = self._parts(operands, spec, nu, followed)
        position = spec.position(data, points)
        q = spec.query_ndim(points)

        def back(dy):
            cotangents = [None if w is None else spec.uncolumns(
                w.transpose_times(_query_first(dy, position, q)), d)
                for w, d in zip(bases, data, strict=True)]
            dpoints = None
            if slopes is not None:
                dpoints = spec.points_cotangent(
                    [_batch_sum(s * dy, position, q) for s in slopes], points)
            return (*cotangents, dpoints)

        return y, back

    def _forward_rule(self, tangents, *operands, spec, nu, followed):
        *data, points = operands
        y = self(*operands, spec=spec, nu=nu)
        bases, slopes = self._parts(operands, spec, nu, followed)
        position = spec.position(data, points)
        q = spec.query_ndim(points)
        dy = None
        for w, t in zip(bases, tangents[:-1], strict=True):
            if w is not None and t is not None:
                term = _query_back(w.times(spec.columns(t)), position, q)
                dy = term if dy is None else dy + term
        if slopes is not None and tangents[-1] is not None:
            for s, t in zip(slopes, spec.points_tangents(tangents[-1]), strict=True):
                batch = np.ndim(s) - position - q
                t = np.reshape(t, (1,) * position + np.shape(t) + (1,) * batch)
                dy = s * t if dy is None else dy + s * t
        if dy is not None and np.shape(dy) != np.shape(y):
            dy = np.broadcast_to(dy, np.shape(y))
        return y, dy


_evaluate = _Evaluation()


class _ComplexEvaluation(_Evaluation):
    """The evaluation of an interpolant whose values are linear in its data with real
    coefficients (its basis ``W`` real: real knots and queries), so that complex data are
    differentiated as real ones (holomorphic): ``PPoly``'s coefficients, a barycentric
    interpolant's values."""

    complex_values = HOLOMORPHIC


_evaluate_complex = _ComplexEvaluation()


class _Basis:
    """A datum's basis ``W`` (queries..., columns), as an array."""

    def __init__(self, w):
        self.w = w

    def transpose_times(self, v):
        """Wᵀ v, ``v`` (queries..., batch...) contracted over the queries' axes."""
        return _transpose_times(self.w, v)

    def times(self, t):
        """W t, ``t`` (columns, batch...)."""
        return np.tensordot(self.w, t, 1)


_BLOCK = 1 << 21
"""About how many entries of a basis a block of its columns holds."""


class _Blocks:
    """A datum's basis ``W``, computed on plain points a block of columns at a time."""

    def __init__(self, spec, i, data, points, nu):
        self.spec, self.i, self.data, self.points, self.nu = spec, i, data, points, nu
        self.count = spec.columns_count(i, data)
        queries = max(1, int(np.prod(np.shape(points)[:spec.query_ndim(points)], dtype=int)))
        self.step = max(1, _BLOCK // max(queries, spec.rows(i, data)))

    def _blocks(self):
        for start in range(0, self.count, self.step):
            stop = min(start + self.step, self.count)
            identity = self.spec.identity(self.i, self.data, start, stop)
            linear = self.spec.linear(self.i, self.data, stop - start)
            yield start, stop, _defined(linear.value(identity, self.points, self.nu))

    def transpose_times(self, v):
        return np.concatenate([_transpose_times(w, v) for _, _, w in self._blocks()])

    def times(self, t):
        return functools.reduce(np.add, [np.tensordot(w, t[start:stop], 1)
                                         for start, stop, w in self._blocks()])


def _defined(v):
    """``v`` with 0 where it is NaN: a query outside the data of an interpolant that does not
    extrapolate has the constant value NaN, which no datum or query moves."""
    return np.where(np.isnan(v), 0.0, v)


def _transpose_times(w, v):
    """Wᵀ v: the basis ``w`` (queries..., columns) contracted with ``v`` (queries..., batch...)
    over the queries' axes."""
    q = tuple(range(np.ndim(w) - 1))
    return np.tensordot(w, v, (q, q))


def _query_first(v, position, q):
    """Values with the query axes (``q`` of them, at ``position``) moved to the front."""
    return np.moveaxis(v, tuple(range(position, position + q)), tuple(range(q)))


def _query_back(v, position, q):
    return np.moveaxis(v, tuple(range(q)), tuple(range(position, position + q)))


def _batch_sum(v, position, q):
    """``v`` summed over every axis but the query axes."""
    axes = tuple(i for i in range(np.ndim(v)) if not position <= i < position + q)
    return np.sum(v, axis=axes) if axes else v


class _OneDimensional:
    """What the one-dimensional interpolants share: data with the interpolation axis at
    ``axis``, values with the query's axes in its place, one derivative order."""

    axis = 0

    def position(self, data, points):
        return self.axis % np.ndim(data[0]) if data else self.axis

    @staticmethod
    def query_ndim(points):
        return np.ndim(points)

    @staticmethod
    def higher(nu):
        return [nu + 1]

    def derivative_spec(self):
        return self

    @staticmethod
    def points_cotangent(partials, points):
        return partials[0]

    @staticmethod
    def points_tangents(t):
        return [t]

    def columns(self, t):
        return np.moveaxis(t, self.axis % np.ndim(t), 0)

    def uncolumns(self, g, datum):
        return np.moveaxis(g, 0, self.axis % np.ndim(datum))

    def rows(self, i, data):
        return np.shape(data[i])[self.axis % np.ndim(data[i])]

    columns_count = rows

    def identity(self, i, data, start=0, stop=None):
        """The data whose interpolants are columns ``start:stop`` of the basis of datum ``i``:
        identity columns (one value, or one slope, set), the other data zero, the
        interpolation axis first."""
        n = self.rows(i, data)
        stop = n if stop is None else stop
        return [_unit_columns(n, start, stop, self.periodic()) if j == i
                else np.zeros((n, stop - start)) for j in range(len(data))]

    def periodic(self):
        return False

    # What a traced interpolant was asked for: its .derivative(derived), called with
    # extrapolate=at_call. Values come from SciPy's own objects and calls, as the user's
    # would (a derivative object's values differ from a call with nu in the last bits).
    derived = 0
    at_call = None

    def value(self, data, points, nu):
        interpolant = self.build(data)
        if self.derived:
            interpolant = interpolant.derivative(self.derived)
        return interpolant(points, nu, self.at_call)

    def derivative(self, order):
        spec = copy.copy(self)
        spec.derived += order
        return spec

    def with_extrapolate(self, extrapolate):
        spec = copy.copy(self)
        spec.at_call = extrapolate
        return spec

    def basis_of(self, spec):
        """``spec``, the linear part of this one, asked for the same derivative and call."""
        spec.derived, spec.at_call = self.derived, self.at_call
        return spec


def _unit_columns(n, start, stop, periodic=False):
    """Columns ``start:stop`` of the identity of size n. Periodic data's first and last values
    are one: each of them gets half of their common column, so the cotangent is the
    derivative along periodic data (a basis SciPy accepts: its first and last rows are
    equal)."""
    columns = np.zeros((n, stop - start))
    columns[np.arange(start, stop), np.arange(stop - start)] = 1.0
    if periodic and n > 1:
        for j in {0, n - 1} & set(range(start, stop)):
            columns[0, j - start] = columns[n - 1, j - start] = 0.5
    return columns


def _zero_boundary(bc_type, columns):
    """SciPy's ``bc_type`` with every prescribed derivative value 0, one per column of a basis
    block."""
    if isinstance(bc_type, str) or bc_type is None:
        return bc_type
    if len(bc_type) == 2 and not isinstance(bc_type[0], (str, tuple, list)):
        return (bc_type[0], np.zeros(columns))  # one end's (order, value)
    return tuple(_zero_boundary(end, columns) for end in bc_type)


def _is_periodic(bc_type):
    return isinstance(bc_type, str) and bc_type == "periodic"


class _CubicSpline(_OneDimensional):
    def __init__(self, x, axis, bc_type, extrapolate):
        self.x, self.axis, self.bc_type, self.extrapolate = x, axis, bc_type, extrapolate

    def build(self, data):
        return _interpolate.CubicSpline(self.x, data[0], self.axis, self.bc_type, self.extrapolate)

    def linear(self, i, data, width):
        return self.basis_of(_CubicSpline(self.x, 0, _zero_boundary(self.bc_type, width),
                                          self.extrapolate))

    def periodic(self):
        return _is_periodic(self.bc_type)


class _CubicSplineWithEnds(_CubicSpline):
    """A ``CubicSpline`` whose prescribed end derivatives (``bc_type``'s ``(order, value)``
    pairs) are differentiated too: the spline is linear in the values and those derivatives
    jointly, so they are further rows of its one datum, after the ``n`` values along the
    interpolation axis (one row for each end in ``ends``, 0 the start and 1 the end)."""

    def __init__(self, x, axis, bc_type, extrapolate, ends):
        super().__init__(x, axis, bc_type, extrapolate)
        self.ends = ends

    def build(self, data):
        rows = np.moveaxis(data[0], self.axis, 0)
        n = len(self.x)
        bc_type = list(self.bc_type)
        for k, end in enumerate(self.ends):
            bc_type[end] = (bc_type[end][0], rows[n + k])
        return _interpolate.CubicSpline(self.x, np.moveaxis(rows[:n], 0, self.axis),
                                        self.axis, tuple(bc_type), self.extrapolate)

    def linear(self, i, data, width):
        return self.basis_of(_CubicSplineWithEnds(
            self.x, 0, _zero_boundary(self.bc_type, width), self.extrapolate, self.ends))


def _with_end_values(y, axis, bc_type):
    """``(y with bc_type's traced end derivatives as further rows along the axis, the ends
    they are of)``, or ``(y, ())`` where no end derivative is traced."""
    if isinstance(bc_type, str) or bc_type is None or len(bc_type) != 2:
        return y, ()
    ends = [end for end, bc in enumerate(bc_type) if type(bc) in (tuple, list)
            and len(bc) == 2 and _traced(bc[1])]
    if not ends:
        return y, ()
    axis = axis % np.ndim(y)
    rows = []
    for end in ends:
        value = bc_type[end][1]
        value = lists_as_arrays([value])[0] if type(value) in (list, tuple) else value
        rows.append(np.expand_dims(value, axis))
    return np.concatenate([y, *rows], axis=axis), tuple(ends)


class _Hermite(_OneDimensional):
    """A cubic Hermite spline: values ``y`` and slopes ``dydx``, linear in both."""

    def __init__(self, x, axis, extrapolate):
        self.x, self.axis, self.extrapolate = x, axis, extrapolate

    def build(self, data):
        return _interpolate.CubicHermiteSpline(self.x, data[0], data[1], self.axis,
                                               self.extrapolate)

    def linear(self, i, data, width):
        return self.basis_of(_Hermite(self.x, 0, self.extrapolate))


class _Made(_Hermite):
    """A Hermite spline whose slopes a SciPy class computes from ``y`` (PchipInterpolator,
    Akima1DInterpolator): its values are that class's own, from ``y`` alone (the slopes,
    the second datum, are mutad's recomputation of them, for their derivatives)."""

    def __init__(self, cls, x, axis, extrapolate, settings):
        super().__init__(x, axis, extrapolate)
        self.cls, self.settings = cls, settings

    def build(self, data):
        return self.cls(self.x, data[0], self.axis, extrapolate=self.extrapolate,
                        **self.settings)


class _Spline(_OneDimensional):
    """``make_interp_spline``'s B-spline."""

    def __init__(self, x, k, t, bc_type, axis):
        self.x, self.k, self.t, self.bc_type, self.axis = x, k, t, bc_type, axis

    def build(self, data):
        return _interpolate.make_interp_spline(self.x, data[0], self.k, self.t, self.bc_type,
                                               self.axis)

    def linear(self, i, data, width):
        return self.basis_of(_Spline(self.x, self.k, self.t, _zero_boundary(self.bc_type, width),
                                     0))

    def periodic(self):
        return _is_periodic(self.bc_type)


class _LsqSpline(_OneDimensional):
    """``make_lsq_spline``'s B-spline: the weighted least-squares fit of ``y`` on constant
    knots ``t`` and weights ``w``, c = (Bᵀ W B)⁻¹ Bᵀ W y, linear in y."""

    def __init__(self, x, t, k, w, axis, method):
        self.x, self.t, self.k, self.w, self.axis, self.method = x, t, k, w, axis, method

    def build(self, data):
        return _interpolate.make_lsq_spline(self.x, data[0], self.t, self.k, self.w, self.axis,
                                            method=self.method)

    def linear(self, i, data, width):
        return self.basis_of(_LsqSpline(self.x, self.t, self.k, self.w, 0, self.method))


class _SmoothingSpline(_OneDimensional):
    """``make_smoothing_spline``'s B-spline of a given ``lam``: the penalised least-squares
    fit on the knots x, c = (Bᵀ W B + lam Ω)⁻¹ Bᵀ W y, linear in y."""

    def __init__(self, x, w, lam, axis):
        self.x, self.w, self.lam, self.axis = x, w, lam, axis

    def build(self, data):
        return _interpolate.make_smoothing_spline(self.x, data[0], self.w, self.lam,
                                                  axis=self.axis)

    def linear(self, i, data, width):
        return self.basis_of(_SmoothingSpline(self.x, self.w, self.lam, 0))


class _BSpline(_OneDimensional):
    """``BSpline(t, c, k)``: linear in its coefficients ``c``."""

    def __init__(self, t, k, extrapolate, axis):
        self.t, self.k, self.extrapolate, self.axis = t, k, extrapolate, axis

    def build(self, data):
        return _interpolate.BSpline(self.t, data[0], self.k, self.extrapolate, self.axis)

    def linear(self, i, data, width):
        return self.basis_of(_BSpline(self.t, self.k, self.extrapolate, 0))


class _PPoly(_OneDimensional):
    """``PPoly(c, x)`` (``BPoly(c, x)``: ``kind``, its Bernstein basis): linear in its
    coefficients ``c`` (k, m, ...), held as the rows of ``c`` reshaped to (k m, ...), one per
    coefficient of a piece."""

    def __init__(self, x, pieces, extrapolate, kind=_interpolate.PPoly):
        self.x, self.pieces, self.extrapolate, self.kind = x, pieces, extrapolate, kind

    def build(self, data):
        rows = data[0]
        coefficients = np.reshape(rows, (np.shape(rows)[0] // self.pieces, self.pieces)
                                  + np.shape(rows)[1:])
        return self.kind(coefficients, self.x, self.extrapolate)

    def linear(self, i, data, width):
        return self.basis_of(_PPoly(self.x, self.pieces, self.extrapolate, self.kind))


class _Barycentric(_OneDimensional):
    """``BarycentricInterpolator(xi, yi)``: linear in ``yi``, with the weights ``wi`` SciPy
    computed once from the nodes (so that every evaluation uses the same ones)."""

    def __init__(self, xi, wi, axis):
        self.xi, self.wi, self.axis = xi, wi, axis

    def build(self, data):
        return _interpolate.BarycentricInterpolator(self.xi, data[0], self.axis, wi=self.wi)

    def value(self, data, points, nu):
        interpolant = self.build(data)
        return interpolant(points) if nu == 0 else interpolant.derivative(points, nu)

    def linear(self, i, data, width):
        return _Barycentric(self.xi, self.wi, 0)


_INTERP1D_ORDERS = {"linear": 1, "slinear": 1, "quadratic": 2, "cubic": 3, "zero": 0,
                    "nearest": 0, "nearest-up": 0, "previous": 0, "next": 0}


class _Interp1d(_OneDimensional):
    """``interp1d``; its derivatives are those of the spline of its kind's order through its
    sorted data (order 0: piecewise constant, derivative 0), 0 where a query gets the
    constant ``fill_value``."""

    def __init__(self, x, kind, axis, copy, bounds_error, fill_value, assume_sorted,
                 by_column=False):
        self.x, self.kind, self.axis, self.copy = x, kind, axis, copy
        self.bounds_error, self.fill_value = bounds_error, fill_value
        self.assume_sorted = assume_sorted
        self.by_column = by_column

    def value(self, data, points, nu):
        if self.by_column and nu == 0:  # (columns of the basis of 1-d data: ``linear``)
            return self._np_interps(data[0], points)
        scipy_interpolant = self._scipys(data[0])
        if nu == 0:
            return scipy_interpolant(points)
        return _interp1d_derivative(scipy_interpolant, points, nu)

    def _np_interps(self, columns, points):
        """np.interp(points, x, column) of each column (n, w) of a basis, as SciPy's
        ``_call_linear_np`` computes one-dimensional data, of its sorted knots: each point
        on its interval as np.interp puts it (``rules._helpers.interp_sides``, ``interp_piece``),
        weighing the interval's two rows; 0 outside the knots, where SciPy fills."""
        order = np.arange(len(self.x)) if self.assume_sorted else np.argsort(self.x,
                                                                             kind="mergesort")
        knots = np.asarray(self.x)[order]
        flat = np.ravel(points)
        _, _, inside, i = interp_sides(flat, knots)
        t, _ = interp_piece(flat, knots, knots, i, inside)
        rows = ((1.0 - t)[:, None] * columns[order[i]] + t[:, None] * columns[order[i + 1]])
        rows = np.where(inside[:, None], rows, 0.0)
        return np.reshape(rows, np.shape(points) + np.shape(columns)[1:])

    def _scipys(self, y):
        return _interpolate.interp1d(self.x, y, self.kind, self.axis, self.copy,
                                     self.bounds_error, self.fill_value, self.assume_sorted)

    def linear(self, i, data, width):
        """The basis's spec: SciPy's interpolant of the unit columns. Of one-dimensional
        data SciPy computes kind='linear' with np.interp (``_call_linear_np``), of several
        columns with its own search (``_call_linear``), which at a repeated knot picks
        another interval (or divides 0 by 0): the basis of such data (``_by_np_interp``)
        is computed as np.interp computes each of its columns (``by_column``), as SciPy
        computes the data's values."""
        fill = self.fill_value if _extrapolates(self.fill_value) else 0.0
        by_column = _by_np_interp(self.kind, self.x, data[0], self.fill_value)
        return _Interp1d(self.x, self.kind, 0, True, self.bounds_error, fill, self.assume_sorted,
                         by_column)


def _extrapolates(fill_value):
    return isinstance(fill_value, str) and fill_value == "extrapolate"


def _by_np_interp(kind, x, y, fill_value):
    """Whether SciPy's interp1d computes its values with np.interp (``_call_linear_np``):
    kind='linear' of float64 or integer knots and one-dimensional data of those dtypes, not
    extrapolating, two knots at least. Its own search (``_call_linear``), taken otherwise,
    puts a point on a repeated knot on another interval (or divides 0 by 0 there)."""
    return (kind == "linear" and np.ndim(y) == 1 and np.shape(x)[0] > 1
            and not _extrapolates(fill_value)
            and all(np.result_type(v) in (np.float64, np.int_) for v in (x, y)))


def _interp1d_derivative(interpolant, points, nu):
    """Derivative ``nu`` of SciPy's ``interp1d`` object at ``points``."""
    # interp1d keeps a spline kind's spline (its order k), and the other kinds' names
    order = interpolant._spline.k if interpolant._kind == "spline" else _INTERP1D_ORDERS[
        interpolant._kind]
    y = interpolant.y
    axis = interpolant.axis
    values_shape = y.shape[:axis] + np.shape(points) + y.shape[axis + 1:]
    if order == 0 or nu > order:
        return np.zeros(values_shape)
    spline = _interpolate.make_interp_spline(interpolant.x, y, k=order, axis=axis)
    values = spline(points, nu, extrapolate=True)
    if not _extrapolates(interpolant.fill_value):  # the constant fill outside the data
        outside = (np.asarray(points) < interpolant.x[0]) | (np.asarray(points) > interpolant.x[-1])
        if np.any(outside):
            mask = np.reshape(outside, (1,) * axis + np.shape(points)
                              + (1,) * (len(values_shape) - axis - np.ndim(points)))
            values = np.where(mask, 0.0, values)
    return values


# ----------------------------------------------------------------------------------------------
# Regular grids

_SPLINE_METHODS = ("slinear", "cubic", "quintic")
"""RegularGridInterpolator's methods that solve for a spline (with ``solver``), whose
derivatives SciPy evaluates (``nu=``)."""

_DERIVATIVE_METHODS = {"linear": "slinear", "slinear": "slinear", "cubic": "cubic",
                       "quintic": "quintic", "slinear_legacy": "slinear",
                       "cubic_legacy": "cubic", "quintic_legacy": "quintic"}
"""The spline method whose derivatives are a method's: its own, or the same function's."""


def _as_scipy_asks(solver):
    """SciPy's spline solve (``make_ndbspl``) takes its direct path where ``solver`` equals
    ``scipy.sparse.linalg.spsolve`` as the module gives it when SciPy asks: the mode's stand-in
    while a differentiation runs, SciPy's own outside one. Either one taken for the other
    would take the iterative path, which calls spsolve with ``atol=`` (a TypeError): either is
    made the one the module gives now, in the same call as SciPy's question."""
    if getattr(solver, "__name__", None) == "spsolve" and getattr(
            solver, "__module__", "").startswith(("scipy.sparse.", "mutad.scipy.sparse")):
        return scipy.sparse.linalg.spsolve
    return solver


class _Grid:
    """``RegularGridInterpolator``: data of shape grid + batch, points (..., ndim), values with
    the points' axes first; partial derivatives along each grid axis."""

    def __init__(self, points, method, bounds_error, fill_value, solver, solver_args, obj=None,
                 derivative=False):
        self.points, self.method, self.bounds_error = points, method, bounds_error
        self.fill_value, self.solver, self.solver_args = fill_value, solver, solver_args
        self.obj = obj  # SciPy's own interpolant, when it was made from plain values
        # derivative: the partial derivatives of the values (0 where the values are the
        # constant fill), rather than SciPy's values at ``nu`` (the fill there too)
        self.derivative = derivative

    def _variant(self, **changes):
        spec = copy.copy(self)
        spec.__dict__.update(changes)
        return spec

    def with_method(self, method):
        return self._variant(method=method)

    def _interpolant(self, values, method):
        if method != self.method or self.obj is None:
            if method in _SPLINE_METHODS:
                return _interpolate.RegularGridInterpolator(
                    self.points, values, method, self.bounds_error, self.fill_value,
                    solver=_as_scipy_asks(self.solver), solver_args=self.solver_args)
            return _interpolate.RegularGridInterpolator(self.points, values, method,
                                                        self.bounds_error, self.fill_value)
        return self.obj

    def value(self, data, points, nu):
        values = self.obj.values if self.obj is not None else data[0]
        if not any(nu):
            return self._interpolant(values, self.method)(points, self.method)
        if self.method == "nearest":
            return np.zeros(np.shape(self.value(data, points, (0,) * len(nu))))
        if not self.derivative and self.method in _SPLINE_METHODS:
            return self._interpolant(values, self.method)(points, self.method, nu=nu)
        method = _DERIVATIVE_METHODS.get(self.method)
        if method is None:
            raise UnsupportedOperationError(
                f"scipy.interpolate.RegularGridInterpolator(method={self.method!r}): mutad has "
                "no derivative of this method in the query points. Use method='cubic' (or "
                "'linear', 'slinear', 'quintic', 'nearest').")
        if method == self.method:  # SciPy's own spline: the derivative of SciPy's values
            result = self._interpolant(values, method)(points, method, nu=nu)
        else:  # the same function as a spline ('linear' is 'slinear'), solved exactly
            result = _interpolate.RegularGridInterpolator(
                self.points, values, method, False, None,
                solver=_as_scipy_asks(spsolve))(points, nu=nu)
        if self.fill_value is not None:  # the constant fill outside the grid
            outside = _outside(self.points, points)
            if np.any(outside):
                mask = np.reshape(outside, np.shape(outside) + (1,) * (np.ndim(result)
                                                                        - np.ndim(outside)))
                result = np.where(mask, 0.0, result)
        return result

    def linear(self, i, data, width):
        # The values' basis, solved directly: the exact linear map of the values
        return self._variant(fill_value=None if self.fill_value is None else 0.0, solver=spsolve,
                             solver_args=None, obj=None)

    def rows(self, i, data):
        return int(np.prod([len(p) for p in self.points], dtype=int))

    columns_count = rows

    def identity(self, i, data, start=0, stop=None):
        size = self.rows(i, data)
        stop = size if stop is None else stop
        return [np.reshape(_unit_columns(size, start, stop),
                           tuple(len(p) for p in self.points) + (stop - start,))]

    def position(self, data, points):
        return 0

    @staticmethod
    def query_ndim(points):
        return np.ndim(points) - 1

    def higher(self, nu):
        return [tuple(order + (axis == k) for axis, order in enumerate(nu))
                for k in range(len(nu))]

    def derivative_spec(self):
        return self._variant(derivative=True)

    @staticmethod
    def points_cotangent(partials, points):
        return np.stack(partials, axis=-1)

    @staticmethod
    def points_tangents(t):
        return [t[..., k] for k in range(np.shape(t)[-1])]

    def columns(self, t):
        d = len(self.points)
        return np.reshape(t, (-1,) + np.shape(t)[d:])

    def uncolumns(self, g, datum):
        return np.reshape(g, np.shape(datum))


def _outside(grid, points):
    """Which points (..., ndim) lie outside the grid, as RegularGridInterpolator decides."""
    points = np.asarray(points)
    outside = np.zeros(points.shape[:-1], dtype=bool)
    for k, axis in enumerate(grid):
        outside |= (points[..., k] < axis[0]) | (points[..., k] > axis[-1])
    return outside


def _grid_points(xi, ndim):
    """RegularGridInterpolator's query points as one array (..., ndim), as SciPy reads them: a
    tuple of coordinate arrays broadcast and stacked, a one-dimensional array ndim coordinates
    a row."""
    if isinstance(xi, tuple) and len(xi) == 1:
        xi = xi[0]
    if isinstance(xi, tuple):
        xi = np.stack(np.broadcast_arrays(*xi), axis=-1)
    elif isinstance(xi, list):
        xi = np.stack(xi)
    if np.ndim(xi) == 1:
        xi = np.reshape(xi, (-1, ndim))
    return xi


# ----------------------------------------------------------------------------------------------
# The interpolants mutad returns for traced data


class _TracedInterpolant:
    """An interpolant of traced data: called, its values are SciPy's, differentiated in the
    data and the query points. Made by the constructors of this module when their data are
    traced; not made directly."""

    read_when_called = ("_data",)
    """The attributes its calls read its traced values from: a solver that calls it (in a
    right-hand side) binds its own values there (``integrate._Parameters``)."""

    def __init__(self, name, spec, data, x=None, evaluate=_evaluate):
        self._name, self._spec, self._data = name, spec, tuple(data)
        self.x = x
        self._evaluate = evaluate

    def __call__(self, x, nu=0, extrapolate=None):
        if isinstance(self._spec, _Interp1d) and (nu, extrapolate) != (0, None):
            raise TypeError("interp1d's interpolant is called with the query points alone.")
        spec = self._spec if extrapolate is None else self._spec.with_extrapolate(extrapolate)
        return self._evaluate(*self._data, x, spec=spec, nu=nu)

    def derivative(self, nu=1):
        """The derivative interpolant of order ``nu``."""
        if isinstance(self._spec, _Interp1d) or self._spec.derived < 0:  # an antiderivative's
            return self.__getattr__("derivative")  # derivative is not the interpolant, bitwise
        return _TracedInterpolant(self._name, self._spec.derivative(nu), self._data, x=self.x,
                                  evaluate=self._evaluate)

    def antiderivative(self, nu=1):
        """The antiderivative interpolant of order ``nu``: SciPy's (PPoly.derivative(-nu) is
        PPoly.antiderivative(nu), and BSpline.derivative(-nu) BSpline.antiderivative(nu) but
        for periodic extrapolation, which SciPy's antiderivative turns off), linear in the
        data as the interpolant is, its derivative in the points the interpolant's values."""
        if not self._is_bspline() or self._spec.build(
                [np.asarray(stop_gradient(d)) for d in self._data]).extrapolate == "periodic":
            self._require_piecewise_polynomial("antiderivative")
        return _TracedInterpolant(self._name, self._spec.derivative(-nu), self._data, x=self.x,
                                  evaluate=self._evaluate)

    def integrate(self, a, b, extrapolate=None):
        """SciPy's integral from ``a`` to ``b`` (its own call, on the plain data), with the
        derivatives of F(b) - F(a), F the antiderivative (linear in the data; in the bounds,
        the interpolant's values there)."""
        # a B-spline's (BSpline, make_interp_spline, make_lsq_spline): the derivatives of
        # F(b) - F(a) too, F its antiderivative (SciPy's BSpline.derivative(-1)), the bounds
        # clipped to the base interval where SciPy clips them (extrapolate=False)
        bspline = self._is_bspline()
        if not bspline:
            self._require_piecewise_polynomial("integrate")
        spec = self._spec.derivative(-1)
        plain = [np.asarray(stop_gradient(d)) for d in self._data]
        built = self._spec.build(plain)
        at = built.extrapolate if extrapolate is None else extrapolate
        if at == "periodic":
            # bounds within the data's interval integrate what the extrapolated antiderivative
            # integrates there; beyond it, periods would wrap in, which is refused
            start, stop = ((built.t[built.k], built.t[len(built.t) - built.k - 1]) if bspline
                           else (built.x[0], built.x[-1]))
            bounds = [np.asarray(stop_gradient(bound)) for bound in (a, b)]
            if all(np.all((start <= bound) & (bound <= stop)) for bound in bounds):
                at = True
        if at == "periodic":
            raise UnsupportedOperationError(
                f"scipy.interpolate.{self._name}(...).integrate with periodic extrapolation "
                "and a bound beyond the data's interval, of an interpolant built from traced "
                "data: mutad differentiates integrals within the data's interval or "
                "extrapolated (extrapolate=True). Split the integral into whole periods and "
                "a part within the data's interval.")
        spec = spec.with_extrapolate(at)
        value = _integral_value(self._spec, a, b, extrapolate, *self._data)
        lo, hi = a, b
        if bspline and not at:
            t, k = built.t, built.k
            lo, hi = (np.clip(bound, t[k], t[len(t) - k - 1]) for bound in (a, b))
        composition = (self._evaluate(*self._data, hi, spec=spec, nu=0)
                       - self._evaluate(*self._data, lo, spec=spec, nu=0))
        integral = scipys_value(value, composition)
        # (SciPy's integral of 1-d data is a 0-d array, which the subtraction makes a scalar)
        scipys = memory(value)
        return integral[...] if type(scipys) is np.ndarray and scipys.ndim == 0 else integral

    def solve(self, y=0.0, discontinuity=True, extrapolate=None):
        """SciPy's roots of ``interpolant(x) = y`` (its own call, on the plain data), each
        differentiated by the implicit function theorem, ``dr = -(ds(r) - dy) / s'(r)`` (s
        the interpolant, moving with the data). A root where the slope is zero, or at a
        breakpoint of a PPoly (where it may jump through y), is refused."""
        self._require_piecewise_polynomial("solve")
        plain = [np.asarray(stop_gradient(d)) for d in self._data]
        built = self._spec.build(plain)
        roots = built.solve(np.asarray(stop_gradient(y)), discontinuity, extrapolate)
        if roots.size == 0:
            return roots
        slopes = built(roots, 1, extrapolate=True)
        # (a PPoly of given coefficients may jump at a breakpoint; the splines are continuous)
        jumps = isinstance(self._spec, _PPoly) and np.any(np.isin(roots, built.x))
        if not np.all(np.isfinite(slopes) & (slopes != 0.0)) or jumps:
            raise UnsupportedOperationError(
                f"scipy.interpolate.{self._name}(...).solve/roots of an interpolant built from "
                "traced data: a root where its slope is zero or at one of its breakpoints "
                "does not move smoothly with the data. Find the roots of the plain "
                "interpolant (built outside the differentiated function) there.")
        composition = roots - (self(roots, extrapolate=True) - y) / slopes
        return scipys_value(roots, composition)

    def roots(self, discontinuity=True, extrapolate=None):
        """``solve(0.0)``: SciPy's roots, differentiated."""
        return self.solve(0.0, discontinuity, extrapolate)

    @property
    def c(self):
        """SciPy's coefficients (of its object built from the plain data), affine in the data
        as the values are: ``c₀ + Σ_i C_i d_i``, ``C_i`` the coefficients of the interpolants
        of datum ``i``'s identity columns, ``c₀`` those of zero data (its boundary values)."""
        spec = self._spec
        plain = [np.asarray(stop_gradient(d)) for d in self._data]
        value = getattr(_derived(spec, spec.build(plain)), "c", None)
        if value is None:  # (an interpolant without coefficients: interp1d's, barycentric)
            return self.__getattr__("c")
        composition = _derived(spec, spec.build([np.zeros_like(d) for d in plain])).c
        for i, datum in enumerate(self._data):
            width = spec.rows(i, plain)
            basis = _derived(spec, spec.linear(i, plain, width).build(spec.identity(i, plain)))
            composition = composition + np.tensordot(basis.c, spec.columns(datum), axes=1)
        return _reproduced(value, composition, (
            f"scipy.interpolate.{self._name}(...).c of traced data: its coefficients as a "
            "linear map of the data did not reproduce SciPy's here, so mutad cannot "
            "differentiate them. Use the interpolant's values (calling it) instead."))

    def __getattr__(self, name):
        if name in _CONSTANT_ATTRIBUTES.get(type(self._spec), ()):
            return getattr(self._spec.build([np.asarray(stop_gradient(d))
                                             for d in self._data]), name)
        return refused_attribute(
            name,
            f"scipy.interpolate.{self._name}(...).{name}: this interpolant was built from "
            "traced data, and mutad differentiates its values and derivatives (calling it, "
            ".derivative()) and coefficients (.c) only, and for CubicSpline, the Hermite "
            "splines and PPoly .antiderivative(), .integrate(a, b), .solve(y) and .roots() of "
            "the interpolant itself (for the B-splines, .antiderivative() and .integrate(a, "
            "b)). Build it from "
            "plain data (outside the differentiated function) to use other attributes.")

    def _is_bspline(self):
        """Whether this is a B-spline (BSpline, make_interp_spline, make_lsq_spline), never
        differentiated or integrated before."""
        return isinstance(self._spec, (_BSpline, _Spline, _LsqSpline)) and not self._spec.derived

    def _require_piecewise_polynomial(self, name):
        # SciPy's piecewise polynomials (CubicSpline, the Hermite splines, PPoly), never
        # differentiated or integrated before: PPoly.derivative(-nu) is its antiderivative,
        # and a derivative of an antiderivative (or the reverse) differs from the interpolant
        # in its constant or its last bits, which the held spec would not reproduce.
        if not isinstance(self._spec, (_CubicSpline, _Hermite, _PPoly)) or self._spec.derived:
            self.__getattr__(name)



def _reproduced(value, composition, message):
    """SciPy's ``value`` with the derivatives of ``composition``, which must reproduce it (a
    guard: never another computation's derivative); refused by ``message`` where it does not."""
    if not reproduces(value, composition):
        raise UnsupportedOperationError(message)
    return scipys_value(value, composition)


def _derived(spec, interpolant):
    """``interpolant`` as ``spec`` asked for it: its derivative (or antiderivative)."""
    return interpolant.derivative(spec.derived) if spec.derived else interpolant


_B_SPLINE_SETTINGS = ("t", "k", "axis", "extrapolate")
_CONSTANT_ATTRIBUTES = {
    _CubicSpline: ("axis", "extrapolate"), _Hermite: ("axis", "extrapolate"),
    _Made: ("axis", "extrapolate"), _PPoly: ("axis", "extrapolate"),
    _Spline: _B_SPLINE_SETTINGS, _LsqSpline: _B_SPLINE_SETTINGS,
    _SmoothingSpline: _B_SPLINE_SETTINGS, _BSpline: _B_SPLINE_SETTINGS}
"""The attributes of a traced interpolant that do not depend on its data (its knots are the
constant x, t): SciPy's object's own."""


_integral_value = Value(
    lambda spec, a, b, extrapolate, *data: spec.build(data).integrate(a, b, extrapolate),
    "scipy.interpolate integrate")


class _TracedGridInterpolant:
    """``RegularGridInterpolator`` of traced values (or called at traced points)."""

    read_when_called = ("_values",)
    """As ``_TracedInterpolant``'s."""

    def __init__(self, spec, values):
        self._spec, self._values = spec, values
        self.grid = spec.points
        self.method = spec.method

    def __call__(self, xi, method=None, *, nu=None):
        spec = self._spec if method is None else self._spec.with_method(method)
        ndim = len(spec.points)
        if spec.method == "pchip" and (_traced(xi) or _traced(self._values)):
            raise UnsupportedOperationError(
                "scipy.interpolate.RegularGridInterpolator(method='pchip'): its values are not "
                "linear in the data and mutad has no derivative of them. Use method='cubic'.")
        if nu is None:
            nu = (0,) * ndim
        data = () if self._values is None else (self._values,)
        return _evaluate(*data, _grid_points(xi, ndim), spec=spec, nu=tuple(nu))

    def __getattr__(self, name):
        return refused_attribute(
            name,
            f"scipy.interpolate.RegularGridInterpolator(...).{name}: this interpolant was built "
            "from traced values, and mutad differentiates its values only. Build it from plain "
            "values to use other attributes.")


# ----------------------------------------------------------------------------------------------
# The constructors, by SciPy's names (registry.defroute)


def _knots(name, x, followed=""):
    _refuse_traced(name, "the knots x", x,
                   f"{followed}Interpolate in a variable the differentiated arguments do not "
                   "change (map the queries onto it), or give the spline a rule of your own.")
    return _plain_copy(x)


def _refuse_followed_knots(name, x):
    """Before a path that differentiates traced knots or data points ``x`` (SciPy's steps on
    traced arrays, whose derivatives in the values differ in the last bits from those of
    constant knots), where a recording may follow them only as computed from arrays outside
    argnums (``_refuse_in_recording``)."""
    message = (f"scipy.interpolate.{name} of knots a recording follows while arrays outside "
               "argnums are inputs of the program: a replay would not differentiate constant "
               "knots as tracing does")
    if _refuse_in_recording(x, message):
        raise UnsupportedOperationError(message)


def _plain_boundary(bc_type):
    """``bc_type`` with each traced end derivative its plain numbers."""
    if isinstance(bc_type, (tuple, list)):
        return type(bc_type)(_plain_boundary(bc) for bc in bc_type)
    return np.asarray(stop_gradient(bc_type)) if _traced(bc_type) else bc_type


def _boundary(name, bc_type):
    _refuse_traced(name, "the boundary values in bc_type", bc_type,
                   "Pass them as constants, or add the spline of the boundary term yourself.")
    return bc_type


class _Constructor(type):
    """The type of a stand-in for a SciPy class: calling it constructs (SciPy's object from
    plain data, mutad's from traced data), and otherwise it is the SciPy class, so that code
    reaching it while a differentiation runs may still call its class methods
    (``BSpline.design_matrix``) and test instances (``isinstance(s, CubicSpline)``)."""

    def __call__(cls, *args, **kwargs):
        return cls.construct(*args, **kwargs)

    def __instancecheck__(cls, instance):
        return isinstance(instance, (cls.scipy, _TracedInterpolant, _TracedGridInterpolant,
                                     _TracedBarycentric, _TracedRectBivariate, _FittedSpline))

    def __subclasscheck__(cls, subclass):
        return issubclass(subclass, cls.scipy)

    def __getattr__(cls, name):
        return getattr(cls.scipy, name)


def _route(scipy_function):
    """Register the decorated function as the stand-in for SciPy's ``scipy_function``
    (``registry.defroute``): as it is for a function, as a :class:`_Constructor` for a class."""
    def register(stand_in):
        doc = (f"``scipy.interpolate.{scipy_function.__name__}``, differentiated in its data "
               "and query points (see the module).")
        if isinstance(scipy_function, type):
            stand_in = _Constructor(scipy_function.__name__, (), {
                "construct": staticmethod(stand_in), "scipy": scipy_function, "__doc__": doc,
                "__module__": __name__, "__qualname__": scipy_function.__qualname__,
                "__signature__": inspect.signature(stand_in)})
        else:
            stand_in.__name__ = scipy_function.__name__
            stand_in.__qualname__ = scipy_function.__qualname__
            stand_in.__doc__ = doc
        defroute(scipy_function, stand_in)
        return stand_in
    return register


@_route(_interpolate.CubicSpline)
def CubicSpline(x: Any, y: Any, axis: int = 0, bc_type: Any = "not-a-knot",
                extrapolate: Any = None) -> Any:
    if not _traced((x, y, bc_type)):
        return _interpolate.CubicSpline(x, y, axis, bc_type, extrapolate)
    if _traced(x):
        _refuse_followed_knots("CubicSpline", x)
        return _SplineInKnots(x, y, axis, _boundary("CubicSpline", bc_type), extrapolate)
    x = _knots("CubicSpline", x)
    if not _traced(bc_type):
        spec = _CubicSpline(x, axis, bc_type, extrapolate)
        spec.value((np.zeros(np.shape(y)),), x[:1], 0)  # SciPy's checks of the arguments' shapes
        return _TracedInterpolant("CubicSpline", spec, (np.copy(y),), x=x)
    _interpolate.CubicSpline(x, np.zeros(np.shape(y)), axis, _plain_boundary(bc_type),
                             extrapolate)  # SciPy's checks of the arguments
    extended, ends = _with_end_values(y, axis, bc_type)
    spec = _CubicSplineWithEnds(x, axis, bc_type, extrapolate, ends)
    return _TracedInterpolant("CubicSpline", spec, (np.copy(extended),), x=x)


@_route(_interpolate.CubicHermiteSpline)
def CubicHermiteSpline(x: Any, y: Any, dydx: Any, axis: int = 0, extrapolate: Any = None) -> Any:
    if not _traced((x, y, dydx)):
        return _interpolate.CubicHermiteSpline(x, y, dydx, axis, extrapolate)
    x = _knots("CubicHermiteSpline", x)
    spec = _Hermite(x, axis, extrapolate)
    spec.value((np.zeros(np.shape(y)), np.zeros(np.shape(dydx))), x[:1], 0)
    return _TracedInterpolant("CubicHermiteSpline", spec, (np.copy(y), np.copy(dydx)), x=x)


@_route(_interpolate.make_interp_spline)
def make_interp_spline(x: Any, y: Any, k: int = 3, t: Any = None, bc_type: Any = None,
                       axis: int = 0, check_finite: bool = True) -> Any:
    if not _traced((x, y, t, bc_type)):
        return _interpolate.make_interp_spline(x, y, k, t, bc_type, axis, check_finite)
    x = _knots("make_interp_spline", x)
    _refuse_traced("make_interp_spline", "the knots t", t, "Pass the knots as constants.")
    spec = _Spline(x, k, None if t is None else _plain_copy(t),
                   _boundary("make_interp_spline", bc_type), axis)
    spec.value((np.zeros(np.shape(y)),), x[:1], 0)
    return _TracedInterpolant("make_interp_spline", spec, (np.copy(y),), x=x)


@_route(_interpolate.make_lsq_spline)
def make_lsq_spline(x: Any, y: Any, t: Any, k: int = 3, w: Any = None, axis: int = 0,
                    check_finite: bool = True, *, method: str = "qr") -> Any:
    if not _traced((x, y, t, w)):
        return _interpolate.make_lsq_spline(x, y, t, k, w, axis, check_finite, method=method)
    x = _knots("make_lsq_spline", x)
    _refuse_traced("make_lsq_spline", "the knots t", t, "Pass the knots as constants.")
    _refuse_traced("make_lsq_spline", "the weights w", w,
                   "Pass the weights as constants (the fit is linear in y alone).")
    spec = _LsqSpline(x, _plain_copy(t), k, None if w is None else _plain_copy(w), axis, method)
    spec.value((np.zeros(np.shape(y)),), x[:1], 0)  # SciPy's errors, on the settings
    return _TracedInterpolant("make_lsq_spline", spec, (np.copy(y),), x=x)


@_route(_interpolate.interp1d)
def interp1d(x: Any, y: Any, kind: Any = "linear", axis: int = -1, copy: bool = True,
             bounds_error: Any = None, fill_value: Any = np.nan,
             assume_sorted: bool = False) -> Any:
    if not _traced((x, y, fill_value)):
        return _interpolate.interp1d(x, y, kind, axis, copy, bounds_error, fill_value,
                                     assume_sorted)
    if _traced(fill_value) and not _extrapolates(fill_value):
        return _Filled(interp1d(x, y, kind, axis, copy, bounds_error, np.nan, assume_sorted),
                       x, y, axis, fill_value)
    if _traced(x) and kind in ("linear", "slinear"):
        _refuse_followed_knots("interp1d", x)
        return _LinearInKnots(x, y, kind, axis, bounds_error, fill_value, assume_sorted)
    if _traced(x) and kind in _PIECEWISE_CONSTANT:
        return _ConstantInKnots(x, y, kind, axis, bounds_error, fill_value, assume_sorted)
    x = _knots("interp1d", x, "(It does with kind='linear', 'slinear' and the piecewise "
               f"constant kinds, not {kind!r}.) ")
    spec = _Interp1d(x, kind, axis, copy, bounds_error, fill_value, assume_sorted)
    spec.value((np.zeros(np.shape(y)),), x[:1], 0)
    # copy=False of sorted data: SciPy reads y itself when called, but for its spline kinds
    referenced = not copy and assume_sorted and kind in ("linear", "nearest", "nearest-up",
                                                         "previous", "next")
    return _TracedInterpolant("interp1d", spec, (_held(y, None) if referenced else np.copy(y),),
                              x=x)


class _Filled:
    """``interp1d(..., fill_value=f)`` of a traced ``f``: the interpolant of a NaN fill, and
    where SciPy fills (a query below the knots, or above), ``f`` (of a tuple, its first below,
    its second above), broadcast over the data's other axes as SciPy's: SciPy's values, with
    the fill's derivative there. Whether a query lies outside is a decision on the plain
    values (asked again in a replay)."""

    def __init__(self, interpolant, x, y, axis, fill_value):
        self.interpolant, self.x = interpolant, np.copy(x)
        self.axis, self.ndim = axis % max(np.ndim(y), 1), np.ndim(y)
        self.rest = np.shape(y)[:self.axis] + np.shape(y)[self.axis + 1:]
        two = type(fill_value) is tuple and len(fill_value) == 2
        self.below, self.above = (array_argument(f) for f in (
            fill_value if two else (fill_value, fill_value)))
        # SciPy's checks of the fill's shape, on zeros of the shapes of its data
        zeros = tuple(np.zeros(np.shape(f)) for f in (self.below, self.above))
        _interpolate.interp1d(np.arange(np.shape(y)[self.axis], dtype=float),
                              np.zeros(np.shape(y)), axis=axis, bounds_error=False,
                              fill_value=zeros if two else zeros[0])

    def __call__(self, q):
        value = self.interpolant(q)
        below, above = _outside_knots(self.x, q)
        shown = (1,) * self.axis + np.shape(q) + (1,) * (self.ndim - self.axis - 1)

        def filling(fill):  # SciPy's: broadcast over the other axes, the queries' axes at axis
            rest = np.broadcast_to(fill, self.rest)
            return np.reshape(rest, self.rest[:self.axis] + (1,) * np.ndim(q)
                              + self.rest[self.axis:])

        return np.where(np.reshape(below, shown), filling(self.below),
                        np.where(np.reshape(above, shown), filling(self.above), value))

    def __getattr__(self, name):
        if name.startswith("_") or name == "fill_value":
            return refused_attribute(
                name, f"scipy.interpolate.interp1d(...).{name} of a traced fill_value: "
                "mutad differentiates its values (calling it); pass fill_value as a constant "
                "to read it.")
        return getattr(self.interpolant, name)


_outside_knots = Value(lambda x, q: (np.asarray(q) < np.min(x), np.asarray(q) > np.max(x)),
                       "scipy.interpolate.interp1d's queries outside the knots")


class _LinearInKnots:
    """``interp1d(x, y)`` (``kind='linear'`` or ``'slinear'``) of traced knots ``x``: SciPy's
    values (its own interpolant of the plain data, at each call), with the derivatives of its
    formula y_lo + (q - x_lo) (y_hi - y_lo) / (x_hi - x_lo) in the knots, the data and the
    queries; the order of the knots, each query's interval and whether it lies outside are
    decisions taken on the plain values (asked again in a replay). Outside the data, SciPy's
    constant fill has no derivative."""

    def __init__(self, x, y, kind, axis, bounds_error, fill_value, assume_sorted):
        self.x, self.y = np.copy(x), np.copy(y)
        self._settings = (kind, axis, bounds_error, fill_value, assume_sorted)
        self.axis = axis % max(np.ndim(y), 1)
        self._np_interp = _by_np_interp(kind, x, y, fill_value)
        _interp1d_value(self.x, self.y, self.x[:1], self._settings)  # SciPy's checks

    def __call__(self, q):
        value = _interp1d_value(self.x, self.y, q, self._settings)
        order, upper, outside = _linear_in_knots_decisions(self.x, q, self._settings,
                                                           self._np_interp)
        x = self.x[order]
        y = np.moveaxis(np.take(self.y, order, axis=self.axis), self.axis, 0)
        flat = np.ravel(q)
        x_lo, x_hi = x[upper - 1], x[upper]
        y_lo, y_hi = y[upper - 1], y[upper]
        rest = (slice(None),) + (None,) * (np.ndim(y) - 1)
        width = x_hi - x_lo
        if self._np_interp:  # np.interp's fp[-1] at x == xp[-1] == xp[-2]: no 0/0
            empty = width == 0
            width = np.where(empty, 1.0, width)
        composition = (y_hi - y_lo) / width[rest] * (flat - x_lo)[rest] + y_lo
        if self._np_interp and empty.any():
            composition = np.where(empty[rest], y_hi, composition)
        if outside.any():  # (SciPy's fill: a constant)
            composition = np.where(outside[rest], 0.0, composition)
        return scipys_value(value, _laid_out(composition, q, self.axis))

    def __getattr__(self, name):
        return refused_attribute(
            name, f"scipy.interpolate.interp1d(...).{name}: this interpolant was built from "
            "traced knots, and mutad differentiates its values (calling it) only. Build it "
            "from plain data to use other attributes.")


_PIECEWISE_CONSTANT = ("previous", "next", "nearest", "nearest-up", "zero")
"""interp1d's kinds whose values are data points ``y`` picked by the knots: steps in the knots
and the queries, whose derivatives there are zero wherever they have one."""


class _ConstantInKnots(_LinearInKnots):
    """``interp1d(x, y)`` of a piecewise constant kind (``_PIECEWISE_CONSTANT``) and traced
    knots ``x``: SciPy's values (its own interpolant of the plain data, at each call), each the
    data point SciPy picks, whose derivative is that point's in ``y`` and zero in the knots and
    the queries (a step function of them); which point each query picks, and whether it lies
    outside where SciPy fills, are decisions taken on the plain values (asked again in a
    replay). SciPy's constant fill has no derivative."""

    def __call__(self, q):
        value = _interp1d_value(self.x, self.y, q, self._settings)
        picked, outside = _picked_points(self.x, q, self._settings)
        y = np.moveaxis(self.y, self.axis, 0)[picked]
        if outside.any():  # (SciPy's fill: a constant)
            rest = (slice(None),) + (None,) * (np.ndim(y) - 1)
            y = np.where(outside[rest], 0.0, y)
        return scipys_value(value, _laid_out(y, q, self.axis))


def _picked(x, q, settings):
    """The data point SciPy's interpolant of a piecewise constant kind picks for each query
    (flat), by SciPy's own interpolant of the points' indices, and whether SciPy fills there
    instead (where the indices' interpolant gives NaN for its fill; an extrapolation picks
    points)."""
    kind, _, bounds_error, fill_value, assume_sorted = settings
    if not _extrapolates(fill_value):
        fill_value = np.nan
    indices = np.arange(len(x), dtype=float)
    where = _interp1d_of(x, indices, (kind, -1, bounds_error, fill_value, assume_sorted))(
        np.ravel(np.asarray(q, dtype=float)))
    outside = np.isnan(where)
    return np.where(outside, 0, where).astype(np.intp), outside


_picked_points = Value(_picked, "scipy.interpolate.interp1d's picked points")


def _laid_out(values, q, axis):
    """``values`` (one row per query, flat, then the data's other axes) laid out as SciPy's
    one-dimensional interpolants return them: the queries' axes where the data's ``axis``
    was."""
    values = np.reshape(values, np.shape(q) + np.shape(values)[1:])
    return np.moveaxis(values, list(range(np.ndim(q))), list(range(axis, axis + np.ndim(q))))


def _interp1d_of(x, y, settings):
    kind, axis, bounds_error, fill_value, assume_sorted = settings
    return _interpolate.interp1d(x, y, kind, axis, True, bounds_error, fill_value,
                                 assume_sorted)


_interp1d_value = Value(lambda x, y, q, settings: _interp1d_of(x, y, settings)(q),
                               "scipy.interpolate.interp1d")


def _decisions(x, q, settings, np_interp=False):
    """SciPy's order of the knots (``mergesort``), each query's upper knot (clipped to
    1 ... n - 1) as SciPy's search finds it, or np.interp's where SciPy computes with it
    (``np_interp``: ``_by_np_interp``), and whether it lies outside the knots where SciPy
    fills."""
    kind, axis, bounds_error, fill_value, assume_sorted = settings
    order = np.arange(len(x)) if assume_sorted else np.argsort(x, kind="mergesort")
    x = x[order]
    flat = np.ravel(np.asarray(q, dtype=float))
    if np_interp:
        upper = (interp_sides(flat, x)[3] + 1).astype(np.intp)
    else:
        upper = np.clip(np.searchsorted(x, flat), 1, len(x) - 1).astype(np.intp)
    outside = ((flat < x[0]) | (flat > x[-1])) & (not _extrapolates(fill_value))
    return order, upper, outside


_linear_in_knots_decisions = Value(_decisions, "scipy.interpolate.interp1d's intervals")


class _SplineInKnots:
    """``CubicSpline(x, y)`` of traced knots ``x``: SciPy's values (its own spline of the plain
    data, at each call), with the derivatives of SciPy's steps on the traced arrays: the
    slopes at the knots from its tridiagonal system (scipy.linalg.solve_banded, differentiated;
    the parabola of three points), the Hermite coefficients, each query's piece evaluated.
    Each query's piece, and whether it lies outside where SciPy gives NaN, are decisions
    taken on the plain values (asked again in a replay). ``bc_type``'s boundary values are
    constants."""

    def __init__(self, x, y, axis, bc_type, extrapolate, nu=0):
        self.x, self.y, self.axis = np.copy(x), np.copy(y), axis % max(np.ndim(y), 1)
        self._settings = (axis, bc_type, extrapolate)
        self._nu = nu
        _spline_in_knots_value(self.x, self.y, self.x[:1], 0, self._settings)  # SciPy's checks
        if np.iscomplexobj(y):
            raise UnsupportedOperationError(
                "scipy.interpolate.CubicSpline of traced knots x and complex values: mutad "
                "differentiates a real spline's knots. Interpolate the real and imaginary "
                "parts apart.")
        if isinstance(bc_type, str):
            bc_type = (bc_type, bc_type)
        if extrapolate is None and bc_type[0] == "periodic":  # (SciPy's default)
            self._settings = (axis, self._settings[1], "periodic")
        self._bc = [(1, 0.0) if bc == "clamped" else (2, 0.0) if bc == "natural" else bc
                    for bc in bc_type]

    def _slopes(self, x, y):
        """SciPy's slopes at the knots (CubicSpline.__init__), on the traced arrays."""
        n = np.shape(x)[0]
        dx = np.diff(x)
        dxr = np.reshape(dx, (n - 1,) + (1,) * (np.ndim(y) - 1))
        slope = np.diff(y, axis=0) / dxr
        start, end = self._bc
        if start == "periodic":
            return self._periodic_slopes(dx, dxr, slope)
        if n == 2:
            start = (1, slope[0]) if start == "not-a-knot" else start
            end = (1, slope[0]) if end == "not-a-knot" else end
        if n == 3 and start == end == "not-a-knot":  # the parabola through the three points
            one, zero = np.ones_like(dx[0]), np.zeros_like(dx[0])
            a = np.stack([np.stack([one, one, zero]),
                          np.stack([dx[1], 2 * (dx[0] + dx[1]), dx[0]]),
                          np.stack([zero, one, one])])
            b = np.stack([2 * slope[0], 3 * (dxr[0] * slope[1] + dxr[1] * slope[0]),
                          2 * slope[1]])
            return np.reshape(np.linalg.solve(a, np.reshape(b, (3, -1))), np.shape(b))
        if start == "not-a-knot":
            d = x[2] - x[0]
            diagonal0, upper0 = dx[1], d
            b0 = ((dxr[0] + 2 * d) * dxr[1] * slope[0] + dxr[0] ** 2 * slope[1]) / d
        elif start[0] == 1:
            diagonal0, upper0, b0 = 1.0, 0.0, start[1] + 0.0 * y[0]
        else:
            diagonal0, upper0 = 2 * dx[0], dx[0]
            b0 = -0.5 * start[1] * dx[0] ** 2 + 3 * (y[1] - y[0])
        if end == "not-a-knot":
            d = x[-1] - x[-3]
            diagonal1, lower1 = dx[-2], d
            b1 = (dxr[-1] ** 2 * slope[-2] + (2 * d + dxr[-1]) * dxr[-2] * slope[-1]) / d
        elif end[0] == 1:
            diagonal1, lower1, b1 = 1.0, 0.0, end[1] + 0.0 * y[0]
        else:
            diagonal1, lower1 = 2 * dx[-1], dx[-1]
            b1 = 0.5 * end[1] * dx[-1] ** 2 + 3 * (y[-1] - y[-2])

        def entry(v):
            return np.reshape(v + 0.0 * dx[0], (1,))

        band = np.stack([  # SciPy's (1, 1) band storage; its corners 0
            np.concatenate([entry(0.0), entry(upper0), dx[:-1]]),
            np.concatenate([entry(diagonal0), 2 * (dx[:-1] + dx[1:]), entry(diagonal1)]),
            np.concatenate([dx[1:], entry(lower1), entry(0.0)])])
        b = np.concatenate([np.reshape(b0, (1,) + np.shape(y)[1:]),
                            3 * (dxr[1:] * slope[:-1] + dxr[:-1] * slope[1:]),
                            np.reshape(b1, (1,) + np.shape(y)[1:])])
        solved = _solve_banded((1, 1), band, np.reshape(b, (n, -1)), check_finite=False)
        return np.reshape(solved, np.shape(b))

    @staticmethod
    def _periodic_slopes(dx, dxr, slope):
        """SciPy's slopes of a periodic spline: of three knots, its common slope; else the
        cyclic system of the n - 1 distinct slopes (s_{n-1} = s_0), which SciPy condenses to a
        banded one: row i, dx_i s_{i-1} + 2 (dx_{i-1} + dx_i) s_i + dx_{i-1} s_{i+1} =
        3 (dx_i m_{i-1} + dx_{i-1} m_i), indices cyclic (m the slopes of the pieces), solved
        densely here."""
        m = np.shape(dx)[0]
        if m == 2:
            common = np.sum(slope / dxr, axis=0) / np.sum(1.0 / dxr, axis=0)
            return np.stack([common] * 3)
        before, sloped_before = np.roll(dx, 1), np.roll(slope, 1, axis=0)
        eye = np.eye(m)
        matrix = (2 * (before + dx))[:, None] * eye + dx[:, None] * np.roll(eye, -1, axis=1) \
            + before[:, None] * np.roll(eye, 1, axis=1)
        rhs = 3 * (dxr * sloped_before + np.reshape(before, np.shape(dxr)) * slope)
        solved = np.reshape(np.linalg.solve(matrix, np.reshape(rhs, (m, -1))), np.shape(rhs))
        return np.concatenate([solved, solved[:1]])

    def __call__(self, q, nu=0, extrapolate=None):
        nu = nu + self._nu
        if nu < 0:
            return self.__getattr__("antiderivative")
        axis, bc_type, ext = self._settings
        ext = ext if extrapolate is None else extrapolate
        value = _spline_in_knots_value(self.x, self.y, q, nu, (axis, bc_type, ext))
        if ext == "periodic":  # PPoly's: the queries moved into the knots' period
            q = self.x[0] + (q - self.x[0]) % (self.x[-1] - self.x[0])
        piece, outside = _spline_in_knots_decisions(self.x, q, ext)
        y = np.moveaxis(self.y, self.axis, 0)
        s = self._slopes(self.x, y)
        dxr = np.reshape(np.diff(self.x), (-1,) + (1,) * (np.ndim(y) - 1))
        slope = np.diff(y, axis=0) / dxr
        t = (s[:-1] + s[1:] - 2 * slope) / dxr
        c = [t / dxr, (slope - s[:-1]) / dxr - t, s[:-1], y[:-1]]  # SciPy's PPoly coefficients
        for _ in range(nu):  # the derivative's: c_m times its power
            c = [k * (len(c) - 1 - m) for m, k in enumerate(c[:-1])] or [0.0 * y[:-1]]
        rest = (slice(None),) + (None,) * (np.ndim(y) - 1)
        u = (np.ravel(q) - self.x[piece])[rest]
        composition = 0.0 * u
        for k in c:  # Horner's scheme in the piece's own variable
            composition = composition * u + k[piece]
        if outside.any():  # (SciPy's NaN: no derivative)
            composition = np.where(outside[rest], 0.0, composition)
        composition = _laid_out(composition, q, self.axis)
        if not reproduces(value, composition):
            raise UnsupportedOperationError(  # (a guard: never another spline's derivative)
                "scipy.interpolate.CubicSpline of traced knots: SciPy's steps on the traced "
                "arrays did not reproduce its spline's values here (nearly coincident knots?), "
                "so mutad cannot differentiate it. Interpolate in a variable the "
                "differentiated arguments do not change.")
        return scipys_value(value, composition)

    def derivative(self, nu=1):
        return _SplineInKnots(self.x, self.y, *self._settings, nu=self._nu + nu)

    def __getattr__(self, name):
        return refused_attribute(
            name, f"scipy.interpolate.CubicSpline(...).{name}: this spline was built from "
            "traced knots, and mutad differentiates its values and derivatives (calling it, "
            ".derivative()) only. Build it from plain knots to use other attributes.")


_spline_in_knots_value = Value(
    lambda x, y, q, nu, settings: _interpolate.CubicSpline(x, y, *settings[:2])(
        q, nu, settings[2]), "scipy.interpolate.CubicSpline")


def _pieces(x, q, extrapolate):
    """PPoly's piece of each query (a knot begins its piece; the last knot ends the last)
    and whether the query lies outside, where SciPy gives NaN without extrapolation."""
    flat = np.ravel(np.asarray(q, dtype=float))
    piece = np.clip(np.searchsorted(x, flat, side="right") - 1, 0, len(x) - 2).astype(np.intp)
    outside = ((flat < x[0]) | (flat > x[-1])) & (extrapolate is False)
    return piece, outside


_spline_in_knots_decisions = Value(_pieces, "scipy.interpolate.CubicSpline's pieces")


def _made(name, cls, slopes, x, y, axis, extrapolate, settings):
    if not _traced((x, y)):
        return cls(x, y, axis, extrapolate=extrapolate, **settings)
    x = _knots(name, x)
    spec = _Made(cls, x, axis, extrapolate, settings)
    spec.value((np.zeros(np.shape(y)),), x[:1], 0)
    y = np.copy(y)
    return _TracedInterpolant(
        name, spec, (y, np.moveaxis(slopes(x, np.moveaxis(y, axis, 0), **settings), 0, axis)), x=x)


@_route(_interpolate.BSpline)
def BSpline(t: Any, c: Any, k: int, extrapolate: Any = True, axis: int = 0) -> Any:
    if not _traced((t, c)):
        return _interpolate.BSpline(t, c, k, extrapolate, axis)
    t = _knots("BSpline", t)
    spec = _BSpline(t, k, extrapolate, axis)
    spec.value((np.zeros(np.shape(c)),), t[k:k + 1], 0)
    complex_values = np.iscomplexobj(c)
    held = _held(c, np.complex128 if complex_values else np.float64)
    return _TracedInterpolant("BSpline", spec, (held,), x=t)


def _piecewise_polynomial(kind, c, x, extrapolate, axis):
    """``PPoly(c, x)`` or ``BPoly(c, x)`` (``kind``) of traced coefficients."""
    name = kind.__name__
    if not _traced((c, x)):
        return kind(c, x, extrapolate, axis)
    x = _knots(name, x)
    kind(np.zeros(np.shape(c)), x, extrapolate, axis)  # SciPy's checks
    if axis != 0:
        raise UnsupportedOperationError(
            f"scipy.interpolate.{name}(c, x, axis=...) with axis != 0 carrying a derivative: "
            "mutad differentiates coefficients with axis=0. Move the axis first (np.moveaxis) "
            "and pass axis=0.")
    held = _held(c, np.complex128 if np.iscomplexobj(c) else np.float64)
    rows = np.reshape(held, (np.shape(c)[0] * np.shape(c)[1],) + np.shape(c)[2:])
    return _TracedInterpolant(name, _PPoly(x, np.shape(c)[1], extrapolate, kind), (rows,),
                              x=x, evaluate=_evaluate_complex)


@_route(_interpolate.PPoly)
def PPoly(c: Any, x: Any, extrapolate: Any = None, axis: int = 0) -> Any:
    return _piecewise_polynomial(_interpolate.PPoly, c, x, extrapolate, axis)


@_route(_interpolate.BPoly)
def BPoly(c: Any, x: Any, extrapolate: Any = None, axis: int = 0) -> Any:
    return _piecewise_polynomial(_interpolate.BPoly, c, x, extrapolate, axis)


def _bernstein_from_derivatives(xi, yi, orders=None, extrapolate=None):
    """``BPoly.from_derivatives`` of traced values ``yi`` (a list of lists of the values and
    derivatives at each knot): SciPy's coefficients, linear in those numbers (``linear_map``),
    of constant knots ``xi``."""
    scipys = _interpolate.BPoly.from_derivatives
    if not _traced(yi):
        return scipys(xi, yi, orders, extrapolate)
    xi = _knots("BPoly.from_derivatives", xi)
    entries = [[np.shape(v) for v in row] for row in yi]
    flat = np.concatenate([np.ravel(np.asarray(v, float) if not isinstance(v, Tracer) else v)
                           for row in yi for v in row])

    def rebuilt(values):
        sizes = iter(np.split(values, np.cumsum([math.prod(s) for row in entries
                                                 for s in row])[:-1]))
        return [[np.reshape(next(sizes), shape) for shape in row] for row in entries]

    coefficients = linear_map(lambda v: scipys(xi, rebuilt(v), orders, extrapolate).c,
                              np.size(flat), "scipy.interpolate.BPoly.from_derivatives")(flat)
    return BPoly(coefficients, xi, extrapolate)


BPoly.from_derivatives = staticmethod(_bernstein_from_derivatives)


def _polynomials_of_spline(tck, extrapolate=None):
    """``PPoly.from_spline`` of a spline ``(t, c, k)`` of traced coefficients ``c`` (a traced
    ``splrep``'s): SciPy's piecewise coefficients, linear in ``c`` (``linear_map``), of
    constant knots ``t``."""
    scipys = _interpolate.PPoly.from_spline
    if isinstance(tck, _TracedInterpolant):
        raise UnsupportedOperationError(
            "scipy.interpolate.PPoly.from_spline of a B-spline built from traced data: mutad "
            "converts a spline given as a tuple (t, c, k) of traced coefficients (splrep's). "
            "Evaluate the B-spline itself, which mutad differentiates.")
    if not _traced(tck):
        return scipys(tck, extrapolate)
    t, c, k = tck
    t = _knots("PPoly.from_spline", t)
    shape = np.shape(c)
    coefficients = linear_map(
        lambda v: scipys((t, np.reshape(v, shape), k), extrapolate).c, math.prod(shape),
        "scipy.interpolate.PPoly.from_spline")(np.ravel(c))
    return PPoly(coefficients, t, extrapolate)


PPoly.from_spline = staticmethod(_polynomials_of_spline)


class _TracedBarycentric:
    """``BarycentricInterpolator`` of traced values ``yi``: called, or its ``derivative(x,
    der)``, SciPy's values, differentiated in ``yi`` and the query points."""

    def __init__(self, spec, yi, xi, weights_given=False):
        self._spec, self._yi, self.xi = spec, yi, xi
        self._weights_given = weights_given

    def __call__(self, x):
        return self.derivative(x, 0)

    def derivative(self, x, der=1):
        if self._weights_given and _traced(x):
            raise UnsupportedOperationError(
                "scipy.interpolate.BarycentricInterpolator(xi, yi, wi=...) at query points "
                "carrying a derivative: SciPy's derivatives assume the polynomial's weights, "
                "and with weights of your own they are not the derivatives of its values. Let "
                "SciPy compute the weights (wi=None), or differentiate in yi only.")
        return _evaluate_complex(self._yi, x, spec=self._spec, nu=der)

    def __getattr__(self, name):
        return refused_attribute(
            name,
            f"scipy.interpolate.BarycentricInterpolator(...).{name}: this interpolant was built "
            "from traced values, and mutad differentiates its values and derivatives (calling "
            "it, .derivative(x, der)) only. Build it from plain values to use other "
            "attributes.")


def _barycentric(xi, yi, axis, wi, randomness):
    """A barycentric interpolant of ``yi``: SciPy's own of plain values, mutad's of traced
    ones, with the weights of one construction of SciPy's (``wi``, or computed from ``xi``
    with the generator of ``randomness``, SciPy's keywords ``rng`` or ``random_state``, as
    SciPy does)."""
    if not _traced((xi, yi, wi)):
        return _interpolate.BarycentricInterpolator(xi, yi, axis, wi=wi, **randomness)
    xi = _knots("BarycentricInterpolator", xi)
    _refuse_traced("BarycentricInterpolator", "the weights wi", wi,
                   "Pass them as constants, or let SciPy compute them from xi.")
    nodes = _interpolate.BarycentricInterpolator(xi, None if yi is None else np.zeros(
        np.shape(yi)), axis, wi=_plain_copy(wi) if wi is not None else None, **randomness)
    if yi is None:
        raise UnsupportedOperationError(
            "scipy.interpolate.BarycentricInterpolator(xi) without yi, set later: mutad "
            "differentiates an interpolant given its values yi when it is made.")
    return _TracedBarycentric(_Barycentric(xi, nodes.wi, axis), yi, xi, wi is not None)


def _polynomial_weights(xi):
    """Whether ``wi`` of nodes ``xi`` are the polynomial's barycentric weights (up to the scale
    SciPy gives them): 1 / Π_{k≠j} (x_j - x_k)."""
    differences = xi[:, None] - xi[None, :]
    np.fill_diagonal(differences, 1.0)
    return 1.0 / np.prod(differences, axis=1)


class _BarycentricObject(_OneDimensional):
    """SciPy's ``BarycentricInterpolator`` of plain values, at traced query points."""

    def __init__(self, obj):
        self.obj, self.axis = obj, obj._y_axis

    def value(self, data, points, nu):
        return self.obj(points) if nu == 0 else self.obj.derivative(points, nu)


def _barycentric_object_rule(self, x, der=0):
    weights = _polynomial_weights(np.asarray(self.xi, dtype=float))
    ratio = self.wi / weights
    if not np.allclose(ratio, ratio[0], rtol=1e-8, atol=0.0):
        _TracedBarycentric(None, None, None, True).derivative(x)  # (refuses: weights given)
    return _evaluate_complex(x, spec=_BarycentricObject(self), nu=der)


defmethod(_interpolate.BarycentricInterpolator, "__call__",
          lambda self, x: _barycentric_object_rule(self, x))
defmethod(_interpolate.BarycentricInterpolator, "derivative",
          lambda self, x, der=1: _barycentric_object_rule(self, x, der))


@_route(_interpolate.BarycentricInterpolator)
def BarycentricInterpolator(xi: Any, yi: Any = None, axis: int = 0, *, wi: Any = None,
                            rng: Any = None, random_state: Any = None) -> Any:
    # (random_state, SciPy's older name, passed on only when given, as SciPy refuses both)
    randomness = {"rng": rng} if random_state is None else {"random_state": random_state}
    return _barycentric(xi, yi, axis, wi, randomness)


@_route(_interpolate.barycentric_interpolate)
def barycentric_interpolate(xi: Any, yi: Any, x: Any, axis: int = 0, *, der: Any = 0,
                            rng: Any = None) -> Any:
    if not _traced((xi, yi, x)):
        return _interpolate.barycentric_interpolate(xi, yi, x, axis, der=der, rng=rng)
    interpolant = _barycentric(xi, yi, axis, None, {"rng": rng})
    if isinstance(interpolant, _interpolate.BarycentricInterpolator):  # plain values, traced x
        interpolant = _TracedBarycentric(_Barycentric(_plain_copy(xi), interpolant.wi, axis),
                                         interpolant.yi, interpolant.xi)
    if np.ndim(der) != 0:
        raise UnsupportedOperationError(
            "scipy.interpolate.barycentric_interpolate(..., der=[...]) carrying a derivative: "
            "mutad differentiates one order at a time; call it once per order (der=k).")
    return interpolant(x) if der == 0 else interpolant.derivative(x, der)


# KroghInterpolator: SciPy's steps, pure NumPy (its divided differences, its Newton form's
# evaluation), run on the traced arrays, its conversions of them left out


def _krogh(xi, yi, axis):
    """SciPy's ``KroghInterpolator(xi, yi, axis)`` of traced values ``yi`` (or nodes ``xi``):
    SciPy's instance, its ``__init__``'s steps taken on the traced arrays (the divided
    differences ``c``), so that its values are SciPy's and differentiated in both."""
    interpolant = object.__new__(_TracedKrogh)
    yi, xi = (lists_as_arrays([a])[0] if isinstance(a, (list, tuple)) else a for a in (yi, xi))
    xi = xi if isinstance(xi, Tracer) else np.asarray(xi)
    shape = np.shape(yi) or (1,)
    if shape[axis] != len(xi):
        raise ValueError("x and y arrays must be equal in length along interpolation axis.")
    interpolant._y_axis = axis % np.ndim(yi)
    interpolant._y_extra_shape = (np.shape(yi)[:interpolant._y_axis]
                                  + np.shape(yi)[interpolant._y_axis + 1:])
    dtype = np.complex128 if np.iscomplexobj(yi) else np.float64
    interpolant.dtype = dtype
    interpolant.xi = xi
    rows = np.moveaxis(yi, interpolant._y_axis, 0)
    interpolant.yi = rows = np.reshape(rows, (np.shape(rows)[0], -1))
    n, r = interpolant.n, interpolant.r = np.shape(rows)
    if n > 30:
        warnings.warn(f"{n} degrees provided, degrees higher than about thirty cause problems "
                      "with numerical instability with 'KroghInterpolator'", stacklevel=3)
    c = np.zeros_like(rows, dtype=dtype, shape=(n + 1, r))
    c[0] = rows[0]
    vk = np.zeros_like(rows, dtype=dtype, shape=(n, r))
    for k in range(1, n):
        s = 0
        while s <= k and xi[k - s] == xi[k]:
            s += 1
        s -= 1
        vk[0] = rows[k] / float(math.factorial(s))
        for i in range(k - s):
            if xi[i] == xi[k]:
                raise ValueError("Elements of `xi` can't be equal.")
            if s == 0:
                vk[i + 1] = (c[i] - vk[i]) / (xi[i] - xi[k])
            else:
                vk[i + 1] = (vk[i + 1] - vk[i]) / (xi[i] - xi[k])
        c[k] = vk[k - s]
    interpolant.c = c
    return interpolant


def _krogh_call(self, x):
    """``KroghInterpolator.__call__`` at traced points or of traced values: SciPy's
    evaluation of its Newton form, ``p += pi * c[k]`` (each sum made anew: SciPy's writes into
    an array of its own), the points as ``_prepare_x`` makes them, without its conversion."""
    x = lists_as_arrays([x])[0] if isinstance(x, (list, tuple)) else x
    if not isinstance(x, Tracer):
        x = np.asarray(x)
    if x.dtype.kind not in "fc":
        x = x.astype(np.float64)
    shape = np.shape(x)
    x = np.reshape(x, (-1,))
    pi = 1
    p = np.zeros((len(x), self.r), dtype=self.dtype) + self.c[0, np.newaxis, :]
    for k in range(1, self.n):
        w = x - self.xi[k - 1]
        pi = w * pi
        p = p + pi[:, np.newaxis] * self.c[k]
    return self._finish_y(p, shape)


class _TracedKrogh(scipy.interpolate.KroghInterpolator):  # (SciPy's class, read at import)
    """SciPy's ``KroghInterpolator`` holding traced divided differences (``_krogh``): called
    as SciPy's is, on the traced arrays; what else SciPy's would read them for is refused."""

    __call__ = _krogh_call

    def derivatives(self, x, der=None):
        raise UnsupportedOperationError(
            "scipy.interpolate.KroghInterpolator(...).derivatives of traced values: mutad "
            "differentiates its values (calling it). Use BarycentricInterpolator, whose "
            "derivative mutad differentiates, or differentiate the values with mutad.")

    def derivative(self, x, der=1):
        return self.derivatives(x, der)


defmethod(_interpolate.KroghInterpolator, "__call__", _krogh_call)


@_route(_interpolate.KroghInterpolator)
def KroghInterpolator(xi: Any, yi: Any, axis: int = 0) -> Any:
    if not _traced((xi, yi)):
        return _interpolate.KroghInterpolator(stop_gradient(xi), stop_gradient(yi), axis)
    return _krogh(xi, yi, axis)


@_route(_interpolate.krogh_interpolate)
def krogh_interpolate(xi: Any, yi: Any, x: Any, der: Any = 0, axis: int = 0) -> Any:
    if not _traced((xi, yi, x)):
        return _interpolate.krogh_interpolate(xi, yi, x, der, axis)
    if der != 0:
        raise UnsupportedOperationError(
            "scipy.interpolate.krogh_interpolate(..., der=...) of traced values or points: "
            "mutad differentiates its values (der=0). Use BarycentricInterpolator's "
            "derivative, which mutad differentiates.")
    return KroghInterpolator(xi, yi, axis)(x)


def _held(data, dtype):
    """``data`` as SciPy's interpolant holds it: the array itself where SciPy keeps a reference
    to it (``np.asarray``, ``np.ascontiguousarray`` of an array already of ``dtype`` and laid
    out so: a later write into it changes the interpolant's values, as in SciPy), else a copy
    (``dtype`` None: any inexact dtype is kept, as ``RegularGridInterpolator`` keeps one)."""
    dtype_kept = (np.issubdtype(np.result_type(data), np.inexact) if dtype is None
                  else np.result_type(data) == dtype)
    if isinstance(data, Tracer) and np.ndim(data) and dtype_kept \
            and (dtype is None or memory(data).flags.c_contiguous):
        return data
    return np.copy(data)


@_route(_interpolate.pchip_interpolate)
def pchip_interpolate(xi: Any, yi: Any, x: Any, der: Any = 0, axis: int = 0) -> Any:
    if not _traced((xi, yi, x)):
        return _interpolate.pchip_interpolate(xi, yi, x, der, axis)
    interpolant = PchipInterpolator(xi, yi, axis)

    def of_order(nu):  # as SciPy evaluates it: a derivative is the derivative's polynomial's
        return interpolant(x) if nu == 0 else interpolant.derivative(nu)(x)
    if np.ndim(der) == 0:
        return of_order(der)
    return [of_order(nu) for nu in der]  # SciPy's list, one result per order


@_route(_interpolate.PchipInterpolator)
def PchipInterpolator(x: Any, y: Any, axis: int = 0, extrapolate: Any = None) -> Any:
    return _made("PchipInterpolator", _interpolate.PchipInterpolator, _pchip_slopes, x, y, axis,
                 extrapolate, {})


@_route(_interpolate.Akima1DInterpolator)
def Akima1DInterpolator(x: Any, y: Any, axis: int = 0, *, method: str = "akima",
                        extrapolate: Any = None) -> Any:
    # Akima's interpolant does not extrapolate by default, unlike the other Hermite splines
    return _made("Akima1DInterpolator", _interpolate.Akima1DInterpolator, _akima_slopes, x, y,
                 axis, False if extrapolate is None else extrapolate, {"method": method})


@_route(_interpolate.RegularGridInterpolator)
def RegularGridInterpolator(points: Any, values: Any, method: str = "linear",
                            bounds_error: bool = True, fill_value: Any = np.nan, *,
                            solver: Any = None, solver_args: Any = None) -> Any:
    if not _traced((points, values, fill_value)):
        # constants the program computed, as the plain values SciPy's compiled code reads
        points, values, fill_value = settled(
            (points, values, fill_value),
            "scipy.interpolate.RegularGridInterpolator of values the program computes")
        return _interpolate.RegularGridInterpolator(points, values, method, bounds_error,
                                                    fill_value, solver=solver,
                                                    solver_args=solver_args)
    _refuse_traced("RegularGridInterpolator", "the grid points", points,
                   "Pass the grid as constants.")
    _refuse_traced("RegularGridInterpolator", "fill_value", fill_value, "Pass it as a constant.")
    points = tuple(_plain_copy(p) for p in points)
    spec = _Grid(points, method, bounds_error, fill_value, solver, solver_args)
    spec._interpolant(np.zeros(np.shape(values)), method)  # SciPy's checks, now
    # SciPy solves for a spline of the values now for some methods, else reads them when called
    splined = method in getattr(_interpolate.RegularGridInterpolator,
                                "_SPLINE_METHODS_ndbspl", ())
    return _TracedGridInterpolant(spec, np.copy(values) if splined else _held(values, None))


@_route(_interpolate.interpn)
def interpn(points: Any, values: Any, xi: Any, method: str = "linear", bounds_error: bool = True,
            fill_value: Any = np.nan) -> Any:
    if not _traced((points, values, xi, fill_value)):
        return _interpolate.interpn(points, values, xi, method, bounds_error, fill_value)
    if method == "splinef2d":  # SciPy's RectBivariateSpline of the grid, read at xi
        return following_scipys_code(_interpolate.interpn, (points, values, xi), {
            "method": method, "bounds_error": bounds_error, "fill_value": fill_value})
    return RegularGridInterpolator(points, values, method, bounds_error, fill_value)(xi)


# ----------------------------------------------------------------------------------------------
# The slopes of PchipInterpolator and Akima1DInterpolator, as functions of y (the first axis
# the interpolation axis), by SciPy's formulas written with operations mutad differentiates.
# Their decisions (a sign change, a zero secant, Akima's undefined weights) are taken on the
# values, and the quotients are guarded where a decision discards them, so that their
# derivatives there are zeros, not NaN.


def _secants(x, y):
    h = np.reshape(np.diff(x), (-1,) + (1,) * (np.ndim(y) - 1))
    return h, (y[1:] - y[:-1]) / h


def _pchip_edge(h0, h1, m0, m1):
    """SciPy's one-sided three-point slope at an end, kept monotone (Moler, Numerical
    Computing with MATLAB, 2004, §3.6)."""
    d = ((2 * h0 + h1) * m0 - h0 * m1) / (h0 + h1)
    flips = np.sign(d) != np.sign(m0)
    overshoots = (np.sign(m0) != np.sign(m1)) & (np.abs(d) > 3.0 * np.abs(m0))
    return np.where(flips, 0.0, np.where(overshoots, 3.0 * m0, d))


def _pchip_slopes(x, y):
    """Fritsch & Butland's weighted harmonic means of the secants, 0 at a local extremum
    (SciPy's PchipInterpolator)."""
    h, m = _secants(x, y)
    if np.shape(y)[0] == 2:
        return np.concatenate([m, m])
    flat = (np.sign(m[1:]) != np.sign(m[:-1])) | (m[1:] == 0) | (m[:-1] == 0)
    w1, w2 = 2 * h[1:] + h[:-1], h[1:] + 2 * h[:-1]
    before, after = np.where(flat, 1.0, m[:-1]), np.where(flat, 1.0, m[1:])
    interior = np.where(flat, 0.0, (w1 + w2) / (w1 / before + w2 / after))
    first = _pchip_edge(h[0], h[1], m[0], m[1])
    last = _pchip_edge(h[-1], h[-2], m[-1], m[-2])
    return np.concatenate([first[None], interior, last[None]])


def _akima_slopes(x, y, method="akima"):
    """Akima's slopes (1970), and the modified ones of method='makima', as SciPy computes
    them: secants extended by two on each side, weighted by their differences."""
    h, inner = _secants(x, y)
    if np.shape(y)[0] == 2:
        return np.concatenate([inner, inner])
    second = 2.0 * inner[0] - inner[1]
    second_last = 2.0 * inner[-1] - inner[-2]
    m = np.concatenate([(2.0 * second - inner[0])[None], second[None], inner,
                        second_last[None], (2.0 * second_last - inner[-1])[None]])
    average = 0.5 * (m[3:] + m[:-3])
    dm = np.abs(np.diff(m, axis=0))
    if method == "makima":
        pm = np.abs(m[1:] + m[:-1])
        f1, f2 = dm[2:] + 0.5 * pm[2:], dm[:-2] + 0.5 * pm[:-2]
    else:
        f1, f2 = dm[2:], dm[:-2]
    f12 = f1 + f2
    defined = f12 > 1e-9 * np.max(f12)  # SciPy's cutoff of the weights
    weight = f2 / np.where(defined, f12, 1.0)
    return np.where(defined, m[1:-2] + weight * (m[2:-1] - m[1:-2]), average)


# ----------------------------------------------------------------------------------------------
# SciPy's interpolants made from plain data, called at traced points (registry.defmethod)


class _Object(_OneDimensional):
    """A SciPy interpolant object, evaluated by ``evaluate(obj, points, nu, extrapolate)``."""

    def __init__(self, obj, evaluate, extrapolate=None):
        self.obj, self.evaluate, self.extrapolate = obj, evaluate, extrapolate
        self.axis = obj.axis

    def value(self, data, points, nu):
        return self.evaluate(self.obj, points, nu, self.extrapolate)


def _spline_call(obj, points, nu, extrapolate):
    return obj(points, nu, extrapolate)


def _interp1d_call(obj, points, nu, extrapolate):
    return obj(points) if nu == 0 else _interp1d_derivative(obj, points, nu)


def _spline_rule(self, x, nu=0, extrapolate=None):
    """``PPoly.__call__`` (CubicSpline, PchipInterpolator, Akima1DInterpolator, ...) and
    ``BSpline.__call__`` at traced points."""
    return _evaluate(x, spec=_Object(self, _spline_call, extrapolate), nu=nu)


def _interp1d_rule(self, x):
    return _evaluate(x, spec=_Object(self, _interp1d_call), nu=0)


def _grid_rule(self, xi, method=None, *, nu=None):
    spec = _Grid(self.grid, self.method, self.bounds_error, self.fill_value, None, None, self)
    return _TracedGridInterpolant(spec, self.values)(xi, method, nu=nu)


class _FitpackCurve(_OneDimensional):
    """A FITPACK curve SciPy fitted to plain data (``UnivariateSpline``,
    ``InterpolatedUnivariateSpline``, ``LSQUnivariateSpline``), evaluated by SciPy's own
    ``__call__`` (``splev``) with its extrapolation mode ``ext``. A derivative of an order
    above the degree is 0. Beyond the knots SciPy's values are 0 (``ext=1``), the boundary
    value (``ext=3``, the values themselves: derivatives are extrapolated) or extrapolated;
    where they are constant there (``flat``), so are the derivatives in the points
    (``derived``: the evaluations that give them)."""

    def __init__(self, obj, ext, flat, derived=False):
        self.obj, self.ext, self.flat, self.derived = obj, ext, flat, derived

    def value(self, data, points, nu):
        t, _, k = self.obj._eval_args
        if nu > k:
            return np.zeros(np.shape(points))
        y = _FITPACK_CURVE_CALL(self.obj, points, nu, self.ext)
        if self.derived and self.flat:
            y = np.where((points < t[k]) | (points > t[-k - 1]), 0.0, y)
        return y

    def derivative_spec(self):
        return _FitpackCurve(self.obj, self.ext, self.flat, derived=True)


_FITPACK_CURVE_CALL = _interpolate.UnivariateSpline.__call__  # SciPy's own, held


def _fitpack_curve_rule(self, x, nu=0, ext=None):
    """``UnivariateSpline.__call__`` (and its subclasses') at traced points."""
    ext = self.ext if ext is None else scipy.interpolate._fitpack2._extrap_modes.get(ext, ext)
    flat = ext == 1 or (ext == 3 and nu == 0)
    return _evaluate(x, spec=_FitpackCurve(self, ext, flat), nu=nu)


defmethod(_interpolate.UnivariateSpline, "__call__", _fitpack_curve_rule)
_FITPACK_SURFACE_CALL = scipy.interpolate._fitpack2._BivariateSplineBase.__call__  # SciPy's


def _surface_value(x, y, spline, dx, dy, grid, followed):
    return _FITPACK_SURFACE_CALL(spline, x, y, dx, dy, grid)


_surface = Adjoint(_surface_value)
_surface.complex_values = None


def _surface_slope(x, y, spline, dx, dy, grid, axis):
    """The derivative of a FITPACK surface's values (partial derivative ``dx, dy``) in its
    points along ``axis``: its partial derivative of one order more there (the surface's own
    call, so that an enclosing differentiation differentiates it too), 0 beyond the knots,
    where FITPACK evaluates the surface at the boundary."""
    t, k = spline.tck[axis], spline.degrees[axis]
    order = (dx + 1, dy) if axis == 0 else (dx, dy + 1)
    if order[axis] >= k:
        raise UnsupportedOperationError(
            f"a scipy.interpolate bivariate spline of degree {k} along {'xy'[axis]}, evaluated "
            f"(derivative of order {order[axis] - 1}) at traced points: its derivative in "
            f"them, of order {order[axis]}, is one FITPACK does not compute. Evaluate a lower "
            "derivative, or fit a spline of a higher degree.")
    slope = spline(x, y, *order, grid=grid)
    points = np.asarray(memory(x if axis == 0 else y))
    outside = (points < t[k]) | (points > t[-k - 1])
    if grid:
        outside = np.reshape(outside, (-1, 1) if axis == 0 else (1, -1))
    return np.where(outside, 0.0, slope)


@_surface.rule
def _surface_rule(x, y, spline, dx, dy, grid, followed):
    value = _fitpack_surface_rule(spline, x, y, dx, dy, grid)  # (an enclosing level's too)
    slopes = [_surface_slope(x, y, spline, dx, dy, grid, axis) if is_followed else None
              for axis, is_followed in enumerate(followed)]

    def back(dv):
        cotangents = []
        for axis, (p, slope) in enumerate(zip((x, y), slopes)):
            if slope is None:
                cotangents.append(None)
            elif grid:
                cotangents.append(np.reshape(np.sum(dv * slope, axis=1 - axis), np.shape(p)))
            else:
                cotangents.append(unbroadcast(dv * slope, np.shape(p)))
        return tuple(cotangents)

    return value, back


@_surface.jvp_rule
def _surface_jvp(tangents, x, y, spline, dx, dy, grid, followed):
    value = _fitpack_surface_rule(spline, x, y, dx, dy, grid)  # (an enclosing level's too)
    dv = None
    for axis, t in enumerate(tangents[:2]):
        if t is None:
            continue
        if grid:
            t = np.reshape(t, (-1, 1) if axis == 0 else (1, -1))
        term = _surface_slope(x, y, spline, dx, dy, grid, axis) * t
        dv = term if dv is None else dv + term
    return value, None if dv is None else np.broadcast_to(dv, np.shape(value))


def _fitpack_surface_rule(self, x, y, dx=0, dy=0, grid=True):
    """``__call__`` (and so ``ev``) of SciPy's bivariate splines (``RectBivariateSpline``,
    ``SmoothBivariateSpline``, ``LSQBivariateSpline``) built from plain data, at traced
    points."""
    return _surface(x, y, spline=self, dx=dx, dy=dy, grid=grid,
                    followed=(isinstance(x, Tracer), isinstance(y, Tracer)))


defmethod(scipy.interpolate._fitpack2._BivariateSplineBase, "__call__", _fitpack_surface_rule)
defmethod(_interpolate.PPoly, "__call__", _spline_rule)
defmethod(_interpolate.BSpline, "__call__", _spline_rule)
defmethod(_interpolate.interp1d, "__call__", _interp1d_rule)
defmethod(_interpolate.RegularGridInterpolator, "__call__", _grid_rule)


# ----------------------------------------------------------------------------------------------
# FITPACK's spline classes where the fit is linear in y: InterpolatedUnivariateSpline,
# UnivariateSpline with s=0 (knots at the data, set by x alone) and LSQUnivariateSpline (knots
# given). The object is SciPy's knots with coefficients c = L y, their values SciPy's own, L
# the fit of the identity columns (linear_map); splev, splder, splantider and splint are
# linear in c in their turn.


class _FittedSpline:
    """SciPy's ``UnivariateSpline`` (or ``InterpolatedUnivariateSpline``,
    ``LSQUnivariateSpline``) fitted to differentiated data: SciPy's knots ``t`` and degree
    ``k``, the coefficients ``c`` traced, its methods SciPy's on them; a smoothing fit's
    ``residual`` (FITPACK's fp) traced too."""

    def __init__(self, name, t, c, k, ext, residual=None):
        self.name, self.t, self.c, self.k, self.ext = name, t, c, k, ext
        self.residual = residual

    def _of(self, function, name):
        """The coefficients ``function(t, c, k)`` gives (SciPy's splder, splantider), as the
        spline's; with its knots and degree."""
        t, _, k = function((self.t, np.zeros(len(self.t)), self.k))
        c = linear_map(lambda c: function((self.t, c, self.k))[1], len(self.t),
                        f"scipy.interpolate.{name}")(self.c)
        return _FittedSpline(self.name, t, c, k, 1 if self.ext == 3 else self.ext)

    def __call__(self, x: Any, nu: int = 0, ext: Any = None) -> Any:
        ext = self.ext if ext is None else _interpolate._fitpack2._extrap_modes.get(ext, ext)
        if not _traced(x) and np.size(x) == 0:
            return np.array([])
        return splev(x, (self.t, self.c, self.k), nu, ext)

    def derivative(self, n: int = 1) -> Any:
        return self._of(lambda tck: _interpolate.splder(tck, n), "splder")

    def antiderivative(self, n: int = 1) -> Any:
        return self._of(lambda tck: _interpolate.splantider(tck, n), "splantider")

    def integral(self, a: float, b: float) -> Any:
        _refuse_traced(f"{self.name}.integral", "the bounds a and b", (a, b),
                       "Pass them as constants.")
        return linear_map(lambda c: _interpolate.splint(a, b, (self.t, c, self.k)),
                           len(self.t), "scipy.interpolate.splint")(self.c)

    def get_knots(self) -> Any:
        return self.t[self.k:len(self.t) - self.k].copy()

    def get_coeffs(self) -> Any:
        return self.c[:len(self.t) - self.k - 1]

    def get_residual(self) -> Any:
        if self.residual is None:
            return self.__getattr__("get_residual")
        return self.residual

    def __getattr__(self, name):
        return refused_attribute(
            name, f"scipy.interpolate.{self.name}(...).{name}: this spline was fitted to "
            "differentiated data, and mutad differentiates its values (calls), derivative, "
            "antiderivative, integral, get_coeffs and get_knots only. Compute the quantity "
            "from those, or fit plain data (mutad.stop_gradient).")


# FITPACK's smoothing fit (curfit at s > 0: UnivariateSpline, splrep) places its knots by the
# data, a decision of the forward pass as an argmax is, and then fits on them: the least-squares
# spline on those knots where its residual fp = Σ (w (y - s(x)))² is within curfit's tolerance
# of s (or above it, out of knots), else the smoothing spline c(p) that minimizes
# fp + Σ (jumps of the k-th derivative at the interior knots / p)², p found by curfit's
# iteration on fp(p) = s from the fits at p = 0 (the polynomial) and p = ∞. The fit on SciPy's
# knots is computed again in traced steps (least squares for curfit's Givens rotations, the
# iteration step for step, its branches guarded as every decision is), which differentiate it
# through p; the values stay SciPy's, and where the steps do not reproduce SciPy's coefficients
# (to CURFIT_RTOL) mutad refuses rather than give another fit's derivative.

CURFIT_TOL, CURFIT_MAXIT = 0.001, 20  # curfit's own
CURFIT_RTOL = 1e-7


def _curfit_jumps(t, k):
    """FITPACK's fpdisc: the jumps of the k-th derivative of the B-splines at the interior knots
    t[k+1:n-k-1], scaled as curfit scales them, one row a knot (n - 2k - 2, n - k - 1)."""
    n, k1 = len(t), k + 1
    nk1 = n - k1
    fac = (nk1 - k) / (t[nk1] - t[k])
    jumps = np.zeros((n - 2 * k1, nk1))
    for row, l in enumerate(range(k + 1, nk1)):  # the knot t[l]
        h = np.concatenate([t[l] - t[l - k1:l], t[l] - t[l + 1:l + k1 + 1]])
        for j in range(k + 2):
            prod = h[j] * np.prod(h[j + 1:j + k1] * fac)
            jumps[row, row + j] = (t[row + j + k1] - t[row + j]) / prod
    return jumps


def _curfit_rational(p1, f1, p2, f2, p3, f3):
    """FITPACK's fprati: the next p of the rational interpolation r(p) = (u p + v)/(p + w) of
    three points of f, and the bracket (p1, f1, p3, f3) it keeps (p3 < 0: infinity)."""
    if p3 > 0:
        h1, h2, h3 = f1 * (f2 - f3), f2 * (f3 - f1), f3 * (f1 - f2)
        p = -(p1 * p2 * h3 + p2 * p3 * h1 + p3 * p1 * h2) / (p1 * h1 + p2 * h2 + p3 * h3)
    else:
        p = (p1 * (f1 - f3) * f2 - p2 * (f2 - f3) * f1) / ((f1 - f2) * f3)
    return (p, p2, f2, p3, f3) if not f2 < 0 else (p, p1, f1, p2, f2)


def _smoothing_fit(name, x, y, w, xb, xe, k, s, t, c, fp):
    """The coefficients (``len(t)``) and residual of curfit's fit at ``s > 0`` of the traced
    ``y`` on SciPy's knots ``t``: SciPy's values ``c`` and ``fp``, differentiated as that fit
    on those knots (see above)."""
    refusal = UnsupportedOperationError(
        f"scipy.interpolate.{name} of differentiated data at s > 0: mutad's steps of FITPACK's "
        "smoothing fit on its knots did not reproduce SciPy's coefficients here (an "
        "ill-conditioned fit, or a decision of the iteration on p taken within rounding), so "
        "mutad cannot differentiate it. Fit at knots you choose (LSQUnivariateSpline, "
        "make_lsq_spline), smooth with make_smoothing_spline(x, y, lam=...), or pass the data "
        "through mutad.stop_gradient where no gradient should flow.")
    try:
        fit, residual = _curfit_steps(x, y, w, xb, xe, k, s, t)
    except np.linalg.LinAlgError:  # a singular system, whose fit FITPACK's rotations rank
        raise refusal from None
    n = len(t)
    value = c[:n]  # (its last k + 1 entries FITPACK's workspace: unread)
    if not np.max(np.abs(stop_gradient(fit) - value[:n - k - 1])) <= \
            CURFIT_RTOL * np.max(np.abs(value[:n - k - 1])):
        raise refusal
    return (scipys_value(value, np.concatenate([fit, np.zeros(k + 1)])),
            scipys_value(fp[()], residual))


def _curfit_steps(x, y, w, xb, xe, k, s, t):
    """curfit's fit on the knots ``t`` of the traced ``y`` (its coefficients, n - k - 1, and
    residual): the least-squares spline, or the smoothing spline of the p its iteration
    finds."""
    x, w, t = np.asarray(x, float), np.asarray(w, float), np.asarray(t, float)
    n, k1 = len(t), k + 1
    acc = CURFIT_TOL * s
    design = w[:, None] * _interpolate.BSpline.design_matrix(x, t, k).toarray()
    wy = w * y

    def least_squares(design, rhs=wy):
        coefficients = np.linalg.lstsq(design, rhs, rcond=None)[0]
        return coefficients, np.sum((design[:len(x)] @ coefficients - wy) ** 2)

    fit, fp = least_squares(design)
    if n > 2 * k1 and fp < s and not abs(fp - s) < acc:  # curfit's smoothing spline
        _, fp0 = least_squares(w[:, None] * _interpolate.BSpline.design_matrix(
            x, np.r_[[xb] * k1, [xe] * k1], k).toarray())
        jumps = _curfit_jumps(t, k)
        rhs = np.concatenate([wy, np.zeros(len(jumps))])
        p = (n - k1) / np.sum(np.abs(np.diag(np.linalg.qr(design, mode="r"))))
        fit, fp = _smoothing_iteration(
            lambda p: least_squares(np.concatenate([design, jumps / p]), rhs),
            p, fp0, fp, s, acc, CURFIT_MAXIT)
    return fit, fp


def _smoothing_iteration(fit_at, p, fp0, fp, s, acc, maxit):
    """FITPACK's iteration on the smoothing parameter ``p`` (curfit's, regrid's) from ``p``:
    the fit ``fit_at(p)`` (its coefficients and residual) whose residual is ``s`` to ``acc``,
    from the residuals ``fp0`` of the polynomial (p = 0) and ``fp`` of the least-squares
    spline (p = ∞), step for step, its branches those of FITPACK."""
    p1, f1, p3, f3 = 0.0, fp0 - s, -1.0, fp - s
    ich1 = ich3 = False
    for iteration in range(1, maxit + 1):
        fit, fp = fit_at(p)
        fpms = fp - s
        if abs(fpms) < acc or iteration == maxit:
            break
        p2, f2 = p, fpms
        if not ich3:
            if not f2 - f3 > acc:  # the first p too large
                p3, f3, p = p2, f2, p * 0.04
                if p <= p1:
                    p = p1 * 0.9 + p2 * 0.1
                continue
            ich3 = f2 < 0
        if not ich1:
            if not f1 - f2 > acc:  # the first p too small
                p1, f1, p = p2, f2, p / 0.04
                if p3 < 0:
                    continue
                if p >= p3:
                    p = p2 * 0.1 + p3 * 0.9
                continue
            ich1 = f2 > 0
        if f2 >= f1 or f2 <= f3:  # FITPACK's ier=2: it stops
            break
        p, p1, f1, p3, f3 = _curfit_rational(p1, f1, p2, f2, p3, f3)
    return fit, fp


def _fitpack_numbers(y, scipy_class, given):
    """SciPy's spline ``scipy_class`` of the arguments ``given`` with ``y``: its knots and
    coefficients (FITPACK's), and the residual as a 0-d array."""
    spline = scipy_class(**dict(given, y=_plain(y)))  # (y traced where no replay records)
    t, c, _ = spline._eval_args
    return t, c, np.asarray(spline.get_residual(), float)


def _splrep_numbers(y, x, w, xb, xe, k, s, full_output, quiet):
    """SciPy's smoothing ``splrep`` of ``y`` (its warnings and errors too, as ``full_output``
    asks): its knots, coefficients, residual and ``ier``, the last two as 0-d arrays."""
    y = _plain(y)  # (traced where no replay records)
    if not full_output:
        _interpolate.splrep(x, y, w, xb, xe, k, 0, s, None, 0, 0, quiet)
    (t, c, _), fp, ier, _ = _interpolate.splrep(x, y, w, xb, xe, k, 0, s, None, 1, 0, quiet)
    return t, c, np.asarray(fp, float), np.asarray(ier)


def _fitted_spline(scipy_class):
    """The stand-in for FITPACK's spline class ``scipy_class``: SciPy's object from plain data,
    a :class:`_FittedSpline` from differentiated y: where the fit is linear in y, its linear
    map; a smoothing fit (UnivariateSpline with s > 0, or no s) on FITPACK's knots
    (``_smoothing_fit``)."""
    name = scipy_class.__name__
    signature = inspect.signature(scipy_class)

    def construct(*args, **kwargs):
        if not _traced((args, kwargs)):
            return scipy_class(*args, **kwargs)
        bound = signature.bind(*args, **kwargs)
        bound.apply_defaults()
        given = bound.arguments
        for argument, value in given.items():
            if argument != "y":
                _refuse_traced(name, f"the argument {argument}", value,
                               "The fit is differentiated in y alone: pass the others as "
                               "constants.")
        if np.ndim(given["y"]) != 1:
            raise ValueError("x and y should have a same length")  # (SciPy's own checks)

        def fitted(y):
            return scipy_class(**dict(given, y=y))

        # Its settings, which the data do not change (the degree, weights, interval, s and
        # extrapolation; knots placed by x alone where s = 0), from a fit of zeros: of y's
        # numbers, a replay would have to check every one
        if given.get("check_finite") and not np.all(np.isfinite(given["y"])):
            fitted(_plain(given["y"]))  # (SciPy's error)
        spline = fitted(np.zeros(np.shape(given["y"])))
        t, c, k = spline._eval_args
        _, _, w, xb, xe, _, s = spline._data[:7]
        if s > 0:  # a smoothing fit, on the knots FITPACK placed by the data
            # (SciPy's fit of y a step of its own, which a replay runs again: the knots, read
            # as numbers, are a decision on y it checks; the coefficients and residual, the
            # values the steps below differentiate, are those of its fit)
            t, c, fp = found_again(given["y"], _fitpack_numbers, scipy_class, given)
            c, fp = _smoothing_fit(name, given["x"], given["y"], w, xb, xe, k, s,
                                   np.asarray(t), c, fp)
            return _FittedSpline(name, np.asarray(t).copy(), c, k, spline.ext, fp)
        c = linear_map(lambda y: fitted(y)._eval_args[1], np.shape(given["y"])[0],
                       f"scipy.interpolate.{name}")(given["y"])
        return _FittedSpline(name, np.copy(t), c, k, spline.ext)

    construct.__signature__ = signature
    return _route(scipy_class)(construct)


# Smoothing splines: make_smoothing_spline with lam given is linear in y. Their smoothing fits
# otherwise (FITPACK's iterations on the smoothing condition s, a generalized cross-validation)
# are refused: mutad does not compute their derivative.

_univariate_spline = _fitted_spline(_interpolate.UnivariateSpline)
_interpolated_univariate_spline = _fitted_spline(_interpolate.InterpolatedUnivariateSpline)
_lsq_univariate_spline = _fitted_spline(_interpolate.LSQUnivariateSpline)


@_route(_interpolate.make_smoothing_spline)
def make_smoothing_spline(x: Any, y: Any, w: Any = None, lam: Any = None, *,
                          axis: int = 0) -> Any:
    """Linear in y where ``lam`` is given; with ``lam=None`` SciPy chooses it from y by
    generalized cross-validation, whose derivative mutad does not compute: refused."""
    if not _traced((x, y, w, lam)):
        return _interpolate.make_smoothing_spline(x, y, w, lam, axis=axis)
    if lam is None or _traced((x, w, lam)):
        raise UnsupportedOperationError(
            "scipy.interpolate.make_smoothing_spline is differentiated in y alone, with lam "
            "given and x, w and lam constant: with lam=None SciPy chooses lam from y by "
            "generalized cross-validation, which mutad does not differentiate. Pass lam (the "
            "value SciPy chose for the plain data, say), interpolate with make_interp_spline, "
            "or pass mutad.stop_gradient(y) where no gradient should flow.")
    spec = _SmoothingSpline(_plain_copy(x), None if w is None else _plain_copy(w), lam, axis)
    spec.value((np.zeros(np.shape(y)),), spec.x[:1], 0)  # SciPy's errors, on the settings
    return _TracedInterpolant("make_smoothing_spline", spec, (np.copy(y),), x=spec.x)


# splrep at s = 0 interpolates: FITPACK's knots are then those of x alone, and the coefficients
# are c = [B⁻¹ y, 0, ..., 0] (k + 1 zeros), B the B-spline design matrix at x. Its value is
# SciPy's own; a tangent maps by the same linear map (SciPy's splrep of the tangent), a
# cotangent by its transpose, c̄ ↦ B⁻ᵀ c̄[:n]. splev of (t, c, k) is linear in c, as BSpline
# is.

def _interpolating_coefficients(x, knots, k, options):
    """The map y ↦ c of splrep at s = 0 (SciPy's values) and its transpose, a pair of
    functions each of which differentiates to the other (to every order)."""
    design = _interpolate.BSpline.design_matrix(x, knots, k).toarray()
    n = design.shape[1]
    zeros = np.zeros(len(knots) - n)

    def coefficients(y):
        return _interpolate.splrep(x, y, k=k, **options)[1]

    def transposed(c):
        return np.linalg.solve(design.T, c[:n])

    forward, transpose = Adjoint(coefficients), Adjoint(transposed)
    forward.__name__ = forward.__qualname__ = "scipy.interpolate.splrep"
    transpose.__name__ = transpose.__qualname__ = "the transpose of scipy.interpolate.splrep"
    forward.rule(lambda y: (forward(y), lambda dc: (transpose(dc),)))
    forward.jvp_rule(lambda tangents, y: (
        forward(y), None if tangents[0] is None else forward(tangents[0])))
    transpose.rule(lambda c: (transpose(c), lambda dy: (
        np.concatenate([np.linalg.solve(design, dy), zeros]),)))
    transpose.jvp_rule(lambda tangents, c: (
        transpose(c), None if tangents[0] is None else transpose(tangents[0])))
    return forward


@_route(_interpolate.splrep)
def splrep(x: Any, y: Any, w: Any = None, xb: Any = None, xe: Any = None, k: int = 3,
           task: int = 0, s: Any = None, t: Any = None, full_output: int = 0, per: int = 0,
           quiet: int = 1) -> Any:
    arguments = (x, y, w, xb, xe, k, task, s, t, full_output, per, quiet)
    if not _traced(arguments):
        return _interpolate.splrep(*arguments)
    interpolating = s is None and w is None or s is not None and np.all(np.equal(s, 0))
    if _traced((x, w, xb, xe, k, s, t)) or task != 0 or t is not None or per \
            or np.ndim(y) != 1:
        raise UnsupportedOperationError(
            "scipy.interpolate.splrep is differentiated in y alone, with task=0, per=0 and no "
            "knots t, and x, w, xb, xe and s constant. Fit at knots you choose with "
            "make_lsq_spline, interpolate with make_interp_spline or CubicSpline "
            "(differentiated in x and y), or pass the data through mutad.stop_gradient where "
            "no gradient should flow.")
    x = _plain_copy(x)
    if not interpolating:  # a smoothing fit (s > 0), on the knots FITPACK placed by the data
        # (SciPy's fit of y a step of its own, which a replay runs again: the knots, read as
        # numbers, are a decision on y it checks, as UnivariateSpline's)
        knots, c, fp, ier = found_again(y, _splrep_numbers, x, w, xb, xe, k, s, full_output,
                                        quiet)
        m = len(x)
        c, fp = _smoothing_fit("splrep", x, y, np.ones(m) if w is None else w,
                               x[0] if xb is None else xb, x[-1] if xe is None else xe, k,
                               m - math.sqrt(2 * m) if s is None else s, np.asarray(knots), c,
                               fp)
        if not full_output:
            return knots, c, k
        messages = _fitpack_impl._iermess
        return (knots, c, k), fp, int(ier), messages.get(int(ier), messages["unknown"])[0]
    plain = _interpolate.splrep(x, _plain(y), w, xb, xe, k, task, s, t, full_output, per, quiet)
    knots, c, degree = plain[0] if full_output else plain
    options = {"w": w, "xb": xb, "xe": xe, "s": s, "quiet": quiet}
    c = _interpolating_coefficients(x, knots, degree, options)(y)
    return ((knots, c, degree), *plain[1:]) if full_output else (knots, c, degree)


@_route(_interpolate.splprep)
def splprep(x: Any, w: Any = None, u: Any = None, ub: Any = None, ue: Any = None, k: int = 3,
            task: int = 0, s: Any = None, t: Any = None, full_output: int = 0, nest: Any = None,
            per: int = 0, quiet: int = 1) -> Any:
    """Differentiated in the points ``x`` where it interpolates them (``s=0``): with the
    parameter values ``u`` given, whose knots FITPACK places by ``u`` alone, each coordinate's
    coefficients SciPy's, the fit of the identity columns mapping its points to them; with its
    own ``u`` (the chord lengths), u, the knots and the coefficients move with the points
    (``_splprep_by_chords``), and ``splev`` differentiates the curve in its knots too."""
    arguments = (x, w, u, ub, ue, k, task, s, t, full_output, nest, per, quiet)
    if not _traced(arguments):
        return _interpolate.splprep(*arguments)
    interpolating = s is not None and np.all(np.equal(s, 0))  # (its default s smooths)
    if not interpolating or task != 0 or t is not None or per or _traced((w, u, ub, ue, s, t)) \
            or u is None and (ub is not None or ue is not None):
        raise UnsupportedOperationError(
            "scipy.interpolate.splprep is differentiated in the points x where it interpolates "
            "them: s=0, task=0, per=0, no knots t; w, u, ub and ue "
            "constant (ub and ue left out with its own u). A smoothing fit's knots move with "
            "the points in a way mutad does not differentiate: interpolate the curve with "
            "make_interp_spline(u, points, axis=1) instead, differentiated in u and the points.")
    points = [array_argument(xi) for xi in x] if isinstance(x, (list, tuple)) else list(x)
    plain = [_plain(xi) for xi in points]
    if u is None:
        return _splprep_by_chords(points, plain, w, k, full_output, nest, quiet)
    settings = (w, u, ub, ue, k, task, s, t)
    result = _interpolate.splprep(plain, *settings, full_output, nest, per, quiet)
    (knots, _, degree), u_out = result[0] if full_output else result

    def coordinate(j):
        def fit(v):
            rows = [np.zeros_like(p) for p in plain]
            rows[j] = v
            return _interpolate.splprep(rows, *settings, 0, nest, per, quiet)[0][1][j]
        return linear_map(fit, np.size(plain[j]), "scipy.interpolate.splprep")(points[j])

    tck = [knots, [coordinate(j) for j in range(len(points))], degree]
    return ((tck, u_out), *result[1:]) if full_output else (tck, u_out)


# splprep's own parameter values u (the points' normalised cumulative chord lengths, FITPACK's)
# move with the points, and so do its interpolating knots (u's values, or midpoints of
# neighbours for an even degree): its B-splines are then differentiated in their knots too,
# through de Boor's recursion written with NumPy's operations (``_bspline_rows``), their
# values SciPy's (a composition that reproduces them).


def _bspline_rows(x, t, k, count):
    """The values at ``x`` (1-d) of the ``count`` B-splines of degree ``k`` on the knots ``t``
    (both may be traced), as rows: de Boor's recursion on the k + 1 splines nonzero at each
    point, its interval ``t[l] <= x < t[l + 1]`` decided on the plain values as FITPACK does
    (``k <= l < count``: the end intervals extended beyond the base interval)."""
    l = _bspline_intervals(t, x, k, count)
    h = [np.ones(np.shape(x))]
    for j in range(1, k + 1):
        previous, h = h, [np.zeros(np.shape(x))] * (j + 1)
        for n in range(1, j + 1):
            after, before = t[l + n], t[l + n - j]
            weight = previous[n - 1] / (after - before)
            h[n - 1] = h[n - 1] + weight * (after - x)
            h[n] = weight * (x - before)
    columns = np.arange(count)
    return sum(h[m][:, None] * (columns == (l - k + m)[:, None]) for m in range(k + 1))


_bspline_intervals = Value(
    lambda t, x, k, count: np.clip(np.searchsorted(t, x, side="right") - 1, k, count - 1),
    "scipy.interpolate B-splines' intervals")


def _spline_derivative(t, c, k):
    """The knots, coefficients and degree of a B-spline's derivative (splder's formula, in
    NumPy's operations: traced knots and coefficients alike), ``c`` its ``len(t) - k - 1``
    coefficients."""
    n = len(c)
    dc = k * (c[1:n] - c[:n - 1]) / (t[k + 1:k + n] - t[1:n])
    return t[1:len(t) - 1], dc, k - 1


_splev_value = Value(lambda x, t, c, k, der, ext: _interpolate.splev(x, (t, c, k), der, ext),
                     "scipy.interpolate.splev")


def _splev_in_its_knots(x, tck, der, ext):
    """SciPy's ``splev`` of traced knots (splprep's), with the derivatives of the B-splines'
    values in the knots, coefficients and points."""
    t, c, k = tck
    value = _splev_value(x, t, c, k, der, ext)
    if ext not in (0, 1) or der > k:
        raise UnsupportedOperationError(
            "scipy.interpolate.splev of a spline whose knots are differentiated (splprep's own "
            "u): mutad follows ext=0 and ext=1 and derivatives up to the degree. Evaluate "
            "inside the base interval with ext=0.")
    n = len(t) - k - 1
    knots, coefficients = t, c[:n]
    for _ in range(der):
        knots, coefficients, k = _spline_derivative(knots, coefficients, k)
        n -= 1
    points = np.reshape(x, -1) * 1.0
    composition = _bspline_rows(points, knots, k, n) @ coefficients
    if ext == 1:  # FITPACK's 0 outside the base interval
        inside = (points >= t[tck[2]]) & (points <= t[len(t) - tck[2] - 1])
        composition = np.where(inside, composition, 0.0)
    return _reproduced(value, np.reshape(composition, np.shape(value)), (
        "scipy.interpolate.splev of a spline whose knots are differentiated: de Boor's "
        "recursion did not reproduce SciPy's values here, so mutad cannot differentiate "
        "them. Pass the parameter values u to splprep (constants)."))


def _splprep_fields(w, k, nest, *points):
    (t, c, _), u = _interpolate.splprep(list(points), w, None, None, None, k, 0, 0.0, None, 0,
                                        nest, 0, 1)
    return np.concatenate([u, t, *c])


_splprep_value = Value(_splprep_fields, "scipy.interpolate.splprep")


def _splprep_by_chords(points, plain, w, k, full_output, nest, quiet):
    """``splprep(x, s=0)`` with its own u: SciPy's result, u, the knots and the coefficients
    differentiated in the points (u the normalised cumulative chord lengths, the knots u's
    values (odd k) or midpoints (even k), the coefficients the interpolating B-spline's)."""
    result = _interpolate.splprep(plain, w, None, None, None, k, 0, 0.0, None, full_output,
                                  nest, 0, quiet)
    m, n = len(plain[0]), len(result[0][0][0] if full_output else result[0][0])
    # SciPy's u, knots and coefficients, of the points a replay is given too
    values = _splprep_value(w, k, nest, *points)
    u_value, t_value = values[:m], values[m:m + n]
    c_values = [values[m + n + j * m:m + n + (j + 1) * m] for j in range(len(points))]
    chords = np.sqrt(np.sum(np.diff(np.stack(points), axis=1) ** 2, axis=0))
    v = np.concatenate([np.zeros(1), np.cumsum(chords)])
    u = v / v[-1]
    half = k // 2
    inner = u[(k + 1) // 2:m - (k + 1) // 2] if k % 2 else (
        u[half:m - half - 1] + u[half + 1:m - half]) / 2
    t = np.concatenate([np.repeat(u[:1], k + 1), inner, np.repeat(u[-1:], k + 1)])
    rows = _bspline_rows(u, t, k, m)
    c = [np.linalg.solve(rows, p) for p in points]
    if not (reproduces(u_value, u) and reproduces(t_value, t) and all(
            reproduces(value, ci) for value, ci in zip(c_values, c))):
        raise UnsupportedOperationError(
            "scipy.interpolate.splprep with its own u: the chord lengths, knots or "
            "interpolating coefficients mutad computes did not reproduce SciPy's here, so it "
            "cannot differentiate them. Pass the parameter values u (constants).")
    coefficients = [scipys_value(value, ci) for value, ci in zip(c_values, c)]
    tck = [scipys_value(t_value, t), coefficients, k]
    u = scipys_value(u_value, u)
    return ((tck, u), *result[1:]) if full_output else (tck, u)


class _Splev(_OneDimensional):
    """``splev(x, (t, c, k), der, ext)``: SciPy's values, linear in ``c`` as a B-spline."""

    def __init__(self, t, k, ext):
        self.t, self.k, self.ext = t, k, ext

    def value(self, data, points, nu):
        if nu > self.k:  # a query's derivative of the piecewise polynomial of degree k
            return np.zeros(np.shape(points))
        return _interpolate.splev(points, (self.t, data[0], self.k), nu, self.ext)

    def linear(self, i, data, width):
        return _SplevBasis(self.t, self.k, self.ext)


class _SplevBasis(_Splev):
    """The splines of the identity columns of coefficients, as splev evaluates them: 0 outside
    the base interval with ``ext=1``."""

    def value(self, data, points, nu):
        columns = _interpolate.BSpline(self.t, data[0], self.k, True)(points, nu)
        if self.ext == 1:
            outside = (points < self.t[self.k]) | (points > self.t[-self.k - 1])
            columns = np.where(np.expand_dims(outside, -1), 0.0, columns)
        return columns


@_route(_interpolate.splev)
def splev(x: Any, tck: Any, der: int = 0, ext: int = 0) -> Any:
    if not _traced((x, tck)) or isinstance(tck, _interpolate.BSpline):
        return _interpolate.splev(x, tck, der, ext)
    t, c, k = tck
    if isinstance(c, (list, tuple)) and all(np.ndim(ci) == 1 for ci in c):
        # a parametric curve's (splprep's): SciPy's splev of each coordinate's coefficients
        return [splev(x, (t, ci, k), der, ext) for ci in c]
    if _traced(t):
        return _splev_in_its_knots(x, (t, c, k), der, ext)
    if _traced(c) and (np.ndim(c) != 1 or isinstance(c, (list, tuple))):
        raise UnsupportedOperationError(
            "scipy.interpolate.splev of differentiated coefficients is differentiated for one "
            "curve (one array c); evaluate each curve of a parametric spline by itself.")
    if ext == 3:  # FITPACK's value of a query outside is that at the end of the base interval
        # it is past: the query clipped there (its derivative 0 outside); its derivatives
        # (der > 0) are extrapolated, as with ext=0
        x, ext = (np.clip(x, t[k], t[len(t) - k - 1]) if der == 0 else x), 0
    c = c if _traced(c) else _plain_copy(c)
    return _evaluate(c, x if _traced(x) else np.asarray(x), spec=_Splev(_plain_copy(t), k, ext),
                     nu=der)


def _of_coefficients(name, function, tck):
    """``function(t, c, k)`` of a FITPACK spline whose coefficients are traced, linear in them
    for constant knots (splint, splder, splantider): SciPy's ``function`` of the plain ones,
    differentiated by the matrix of its values at the identity columns."""
    t, c, k = tck
    _refuse_traced(name, "the knots t", t, "Pass the knots as constants.")
    t, shape = _plain_copy(t), np.shape(c)
    return linear_map(lambda v: function((t, np.reshape(v, shape), k)), int(np.prod(shape)),
                      f"scipy.interpolate.{name}")(np.reshape(c, -1))


def _splint_in_its_bounds(a, b, tck, full_output):
    """SciPy's integral from traced bounds, with the derivatives of F(b) - F(a), F the
    antiderivative (``splantider``), the bounds clipped to the base interval outside which
    FITPACK takes the spline as zero."""
    if full_output:
        _refuse_traced("splint(full_output=1)", "the bounds a and b", (a, b),
                       "Pass them as constants, or leave full_output out.")
    t, k = _plain_copy(tck[0]), tck[2]
    value = np.float64(_interpolate.splint(stop_gradient(a), stop_gradient(b),
                                           (t, np.asarray(stop_gradient(tck[1])), k)))
    antiderivative = splantider(tck)
    lo, hi = (np.clip(bound, t[k], t[len(t) - k - 1]) for bound in (a, b))
    return _reproduced(value, splev(hi, antiderivative) - splev(lo, antiderivative), (
        "scipy.interpolate.splint of traced bounds: the antiderivative's difference did not "
        "reproduce SciPy's integral here, so mutad cannot differentiate it. Pass the bounds "
        "as constants."))


@_route(_interpolate.splint)
def splint(a: Any, b: Any, tck: Any, full_output: int = 0) -> Any:
    if not _traced((a, b, tck)) or isinstance(tck, _interpolate.BSpline):
        return _interpolate.splint(a, b, tck, full_output)
    t, c, k = tck
    if isinstance(c, (list, tuple)) and all(np.ndim(ci) == 1 for ci in c):
        return [splint(a, b, (t, ci, k)) for ci in c]  # a parametric curve's, as SciPy's
    if _traced((a, b)):
        return _splint_in_its_bounds(a, b, tck, full_output)
    value = _of_coefficients("splint", lambda tck: _interpolate.splint(a, b, tck), tck)
    if full_output:  # the integrals of the B-splines, constants
        return value, _interpolate.splint(a, b, (_plain_copy(t), np.zeros(np.shape(c)), k), 1)[1]
    return value


@_route(_interpolate.sproot)
def sproot(tck: Any, mest: int = 10) -> Any:
    """SciPy's roots of a cubic spline of traced coefficients (its own call, on the plain
    ones), each differentiated by the implicit function theorem, ``dr = -ds(r) / s'(r)``, as
    the interpolants' ``roots()``. A root where the slope is zero is refused."""
    if not _traced(tck) or isinstance(tck, _interpolate.BSpline):
        return _interpolate.sproot(tck, mest)
    t, c, k = tck
    if isinstance(c, (list, tuple)) and all(np.ndim(ci) == 1 for ci in c):
        return [sproot((t, ci, k), mest) for ci in c]  # a parametric curve's, as SciPy's
    _refuse_traced("sproot", "the knots t", t, "Pass the knots as constants.")
    if np.ndim(c) != 1 or isinstance(c, (list, tuple)):
        raise UnsupportedOperationError(
            "scipy.interpolate.sproot of differentiated coefficients is differentiated for one "
            "curve (one array c); find the roots of each curve by itself.")
    t = _plain_copy(t)
    plain = np.asarray(stop_gradient(c))
    roots = _interpolate.sproot((t, plain, k), mest)
    if roots.size == 0:
        return roots
    slopes = _interpolate.splev(roots, (t, plain, k), 1)
    if not np.all(np.isfinite(slopes) & (slopes != 0.0)):
        _refuse_in_recording(c, message := (
            "scipy.interpolate.sproot of a spline of traced coefficients: a root where its "
            "slope is zero does not move smoothly with them. Find the roots of the plain "
            "spline (built outside the differentiated function) there."))
        raise UnsupportedOperationError(message)
    return scipys_value(roots, roots - splev(roots, (t, c, k)) / slopes)


def _coefficients_of(name, function):
    """``splder`` or ``splantider`` of traced coefficients: SciPy's knots and degree, the
    coefficients a linear function of the traced ones."""
    def stand_in(tck: Any, n: int = 1) -> Any:
        if not _traced(tck) or isinstance(tck, _interpolate.BSpline):
            return function(tck, n)
        t, c, k = tck
        _refuse_traced(name, "the knots t", t, "Pass the knots as constants.")
        t2, _, k2 = function((_plain_copy(t), np.zeros(np.shape(c)), k), n)
        return t2, _of_coefficients(name, lambda tck: function(tck, n)[1], tck), k2
    return _route(function)(stand_in)


splder = _coefficients_of("splder", _interpolate.splder)
splantider = _coefficients_of("splantider", _interpolate.splantider)


# ----------------------------------------------------------------------------------------------
# Scattered data: griddata, LinearNDInterpolator, NearestNDInterpolator and RBFInterpolator.
# Linear interpolation is Σ_k b_k(x) values[vertex_k] in the simplex (of SciPy's Delaunay
# triangulation) holding x, b the barycentric weights, affine in x; the nearest neighbour is
# values[i(x)]; both are written so, with the simplex and the neighbour decided on the plain
# queries, and take SciPy's values. RBFInterpolator is linear in its values at fixed queries:
# W d, W the values of the interpolants of the identity columns.


def _scattered_points(name, points, followed=False):
    """The data points as SciPy takes them, (n, ndim), a plain copy; where ``followed`` (a
    triangulation's, whose simplices are decided on the plain points and whose barycentric
    weights follow the points), the traced points too: ``(plain, traced or None)``."""
    if followed and _traced(points):
        _refuse_followed_knots(name, points)
        traced = _queries(points, np.shape(points)[-1]) if not isinstance(points, tuple) \
            else _queries(points, len(points))
        traced = traced if np.ndim(traced) == 2 else np.reshape(traced, (-1, 1))
        return _plain_copy(_plain(traced)), traced
    _refuse_traced(name, "the data points", points,
                   "Their triangulation (or kernel matrix) would move with them; interpolate "
                   "differentiated values at constant points, or write the interpolation with "
                   "NumPy.")
    points = _interpnd._ndim_coords_from_arrays(points)
    points = _plain_copy(points if np.ndim(points) == 2 else np.reshape(points, (-1, 1)))
    return (points, None) if followed else points


def _queries(xi, ndim):
    """SciPy's queries as one array (..., ndim): a tuple of coordinate arrays broadcast and
    stacked, as SciPy's ``_ndim_coords_from_arrays`` makes it."""
    if isinstance(xi, tuple) and _traced(xi):
        if len(xi) == 1:
            xi = xi[0]
        else:
            return np.stack(np.broadcast_arrays(*xi), axis=-1) * 1.0
    elif isinstance(xi, tuple):
        return _interpnd._ndim_coords_from_arrays(xi, ndim=ndim)
    if np.ndim(xi) == 0 or np.shape(xi)[-1] != ndim:
        raise ValueError("number of dimensions in xi does not match x")
    return xi if _traced(xi) else np.asarray(xi)


def _plain(value):
    return np.asarray(stop_gradient(value))


_scipy_call = Value(lambda interpolant, xi, options: interpolant(xi, **options),
                    "scipy.interpolate scattered interpolant")


def _in_simplices(interpolant, value, xi, points=None):
    """Where SciPy's triangulating ``interpolant`` (its ``value`` at the queries ``xi``) puts
    each query: whether inside, the simplex (0 outside), its vertices, and the query's
    barycentric weights there (traced as ``xi`` and ``points`` are), the simplex decided on the
    plain queries."""
    ndim = np.shape(interpolant.points)[1]
    flat = np.reshape(xi, (-1, ndim))
    scaled = flat if interpolant.scale is None else (flat - interpolant.offset) / interpolant.scale
    plain_scaled = _plain(scaled)
    simplex = interpolant.tri.find_simplex(plain_scaled)
    # A query SciPy's walk finds inside (within its broader tolerance) and this one not:
    # looked for again, by brute force, at that tolerance.
    fill = interpolant.fill_value
    plain_value = np.reshape(_plain(value), (len(simplex), -1))
    found = ~(np.isnan(plain_value) if np.isnan(fill) else plain_value == fill).all(axis=1)
    missed = np.flatnonzero(found & (simplex < 0))
    if missed.size:
        simplex[missed] = interpolant.tri.find_simplex(
            plain_scaled[missed], bruteforce=True, tol=np.sqrt(np.finfo(float).eps))
        if (simplex[missed] < 0).any():
            raise UnsupportedOperationError(
                "scipy.interpolate: a query on the boundary of the triangulation's hull, which "
                "SciPy counts inside and mutad finds in no simplex; move the query inside.")
    inside = simplex >= 0
    where = np.maximum(simplex, 0)
    vertices = interpolant.tri.simplices[where]  # (queries, ndim + 1)
    if points is None:
        transform = interpolant.tri.transform[where]  # (queries, ndim + 1, ndim)
        partial = np.einsum("qij,qj->qi", transform[:, :ndim, :], scaled - transform[:, ndim, :])
    else:  # Σ_k b_k (v_k - v_last) = x - v_last, k < ndim
        corners = points[vertices]  # (queries, ndim + 1, ndim)
        edges = np.swapaxes(corners[:, :ndim] - corners[:, ndim:], 1, 2)
        partial = np.linalg.solve(edges, (flat - corners[:, ndim])[..., None])[..., 0]
    weights = np.concatenate([partial, 1.0 - np.sum(partial, axis=1, keepdims=True)], axis=1)
    return inside, where, vertices, weights


def _linear_at(interpolant, values, xi, points=None):
    """``interpolant`` (SciPy's ``LinearNDInterpolator`` of the plain ``values``) at the queries
    ``xi`` (..., ndim): SciPy's values, differentiated in ``values`` and ``xi`` through the
    barycentric interpolation in the simplex SciPy's triangulation puts each query in, and in
    the data ``points`` where they are traced: the weights then solve the simplex's system
    in the points' own coordinates (barycentric weights are those of any affine image, so
    SciPy's ``rescale`` changes nothing of them)."""
    value = _scipy_call(interpolant, xi, {})
    batch = np.shape(xi)[:-1]
    inside, where, vertices, weights = _in_simplices(interpolant, value, xi, points)
    gathered = np.take(values, vertices, axis=0)  # (queries, ndim + 1, trailing...)
    trailing = np.ndim(values) - 1
    w = np.reshape(weights, np.shape(weights) + (1,) * trailing)
    mask = np.reshape(inside, (-1,) + (1,) * trailing)
    composition = np.where(mask, np.sum(w * gathered, axis=1), 0.0)
    return scipys_value(value, np.reshape(composition, batch + np.shape(values)[1:]))


def _nearest_at(interpolant, values, xi, options):
    """``interpolant`` (SciPy's ``NearestNDInterpolator``) at ``xi``: SciPy's values, each the
    value at SciPy's nearest data point (decided on the plain queries); its derivative in the
    queries 0."""
    value = _scipy_call(interpolant, xi, options)
    ndim = np.shape(interpolant.points)[1]
    flat = np.reshape(_plain(xi), (-1, ndim))
    distance, index = interpolant.tree.query(interpolant._scale_x(flat), **options)
    valid = np.isfinite(distance)
    trailing = np.ndim(values) - 1
    gathered = np.take(values, np.where(valid, index, 0), axis=0)
    composition = np.where(np.reshape(valid, (-1,) + (1,) * trailing), gathered, 0.0)
    return scipys_value(value, np.reshape(composition, np.shape(xi)[:-1] + np.shape(values)[1:]))


class _TracedScattered:
    """``LinearNDInterpolator`` or ``NearestNDInterpolator`` of traced values: called, its
    values are SciPy's (its own interpolant of the plain values), differentiated in the values
    and the queries."""

    def __init__(self, name, interpolant, values, points=None):
        self._name, self._interpolant, self._values = name, interpolant, values
        self._points = points
        self.points = interpolant.points if points is None else points

    def __call__(self, *args, **query_options):
        return _scattered_call(self._interpolant, self._values, args, query_options,
                               self._points)

    def __getattr__(self, name):
        return refused_attribute(
            name,
            f"scipy.interpolate.{self._name}(...).{name}: this interpolant was built from "
            "traced values, and mutad differentiates calling it only. Build it from plain "
            "values to use other attributes.")


def _scattered_call(interpolant, values, args, query_options, points=None):
    ndim = np.shape(interpolant.points)[1]
    xi = _queries(args[0] if len(args) == 1 else tuple(args), ndim)
    if isinstance(interpolant, _interpolate.NearestNDInterpolator):
        return _nearest_at(interpolant, values, xi, query_options)  # (0 in the points)
    return _linear_at(interpolant, values, xi, points)


def _plain_interpolant(cls, points, values, *settings):
    """SciPy's own interpolant of the plain values (a kept copy: the caller may write into the
    values afterwards)."""
    return cls(points, np.array(_plain(values), copy=True), *settings)


@_route(_interpolate.LinearNDInterpolator)
def LinearNDInterpolator(points: Any, values: Any, fill_value: Any = np.nan,
                         rescale: bool = False) -> Any:
    if not _traced((points, values)):
        return _interpolate.LinearNDInterpolator(points, values, fill_value, rescale)
    _refuse_traced("LinearNDInterpolator", "fill_value", fill_value, "Pass it as a constant.")
    points, traced = _scattered_points("LinearNDInterpolator", points, followed=True)
    interpolant = _plain_interpolant(_interpolate.LinearNDInterpolator, points, values,
                                     fill_value, rescale)
    return _TracedScattered("LinearNDInterpolator", interpolant, values, traced)


@_route(_interpolate.NearestNDInterpolator)
def NearestNDInterpolator(x: Any, y: Any, rescale: bool = False,
                          tree_options: Any = None) -> Any:
    if not _traced(y):
        return _interpolate.NearestNDInterpolator(x, y, rescale, tree_options)
    points = _scattered_points("NearestNDInterpolator", x)
    interpolant = _plain_interpolant(_interpolate.NearestNDInterpolator, points, y, rescale,
                                     tree_options)
    return _TracedScattered("NearestNDInterpolator", interpolant, y)


def _object_at_points(self, *args, **query_options):
    """SciPy's own ``LinearNDInterpolator`` or ``NearestNDInterpolator`` called at traced
    queries (``registry.defmethod``)."""
    values = np.reshape(self.values, (-1,) + tuple(self.values_shape))  # SciPy keeps (n, -1)
    return _scattered_call(self, values, args, query_options)


@_route(_interpolate.lagrange)
def lagrange(x: Any, w: Any) -> Any:
    """SciPy's steps (interpolate/_polyint.py): the sum over j of w[j] times the products of
    (t - x[k]) / (x[j] - x[k]), by convolutions, without ``poly1d``'s trimming of the leading
    zeros in between (of a w[j] that is 0: its terms add zeros either way). A leading
    coefficient the sum cancels to 0 SciPy trims, which a derivative cannot follow: refused."""
    if not _traced((x, w)):
        return _interpolate.lagrange(x, w)
    p = np.zeros(1)
    for j in range(len(x)):
        pt = np.atleast_1d(w[j])
        for k in range(len(x)):
            if k != j:
                factor = np.concatenate((np.ones(1), np.atleast_1d(-x[k])))  # [1.0, -x[k]]
                pt = np.convolve(pt, factor / (x[j] - x[k]))
        p = np.polyadd(p, pt)
    if np.shape(p)[0] > 1 and _plain(p)[0] == 0:
        raise UnsupportedOperationError(
            "scipy.interpolate.lagrange of differentiated values whose sum cancels the leading "
            "coefficient to exactly 0: SciPy's poly1d trims it, and the derivative of the "
            "shorter polynomial would miss that coefficient's (not 0). Interpolate with "
            "BarycentricInterpolator(x, w) or barycentric_interpolate (differentiated), or "
            "solve for the coefficients with np.linalg.solve(np.vander(x), w).")
    return np.poly1d(p)


# CloughTocher2DInterpolator of traced values: SciPy estimates the gradients at the vertices by
# Gauss-Seidel sweeps from zero, each linear in the values, until a sweep changes them by less
# than tol; the number of sweeps is a decision of the forward pass (as an argmax is), and for
# that number the interpolant is linear in the values: W v, W the values at the queries of the
# interpolants of the identity columns swept as often (tol < 0: none stops early).


def _clough_tocher_sweeps(interpolant, tol, maxiter):
    """The number of sweeps SciPy's gradient estimate took for ``interpolant`` (SciPy's own,
    of one column of real values): the fewest whose estimate is SciPy's bit for bit, one more
    where that estimate is a fixed point SciPy's test of that sweep did not stop at."""
    def estimate(sweeps, tol=tol):
        if sweeps == 0:
            return np.zeros_like(interpolant.grad)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", _interpnd.GradientEstimationWarning)
            return _interpnd.estimate_gradients_2d_global(interpolant.tri, interpolant.values,
                                                          maxiter=sweeps, tol=tol)
    scipys = interpolant.grad.tobytes()
    low, high = 1, maxiter
    while low < high:
        middle = (low + high) // 2
        low, high = (low, middle) if estimate(middle).tobytes() == scipys else (middle + 1, high)
    if low < maxiter:  # SciPy's test of sweep `low`: its largest change, relative above 1
        g, before = interpolant.grad, estimate(low - 1, -1.0)
        change = np.max(np.abs(before + -g), axis=-1) / np.maximum(1.0, np.max(np.abs(g), axis=-1))
        low += 0 if np.max(change) < tol else 1
    return low


class _TracedCloughTocher:
    """``CloughTocher2DInterpolator`` of traced values: called, SciPy's values, differentiated
    as the interpolant of SciPy's number of sweeps (see above)."""

    def __init__(self, points, values, fill_value, tol, maxiter, rescale):
        self.values = np.copy(values)  # (SciPy's interpolant holds its own)
        self._interpolant = _interpolate.CloughTocher2DInterpolator(
            points, _plain(values), fill_value, tol, maxiter, rescale)
        sweeps = _clough_tocher_sweeps(self._interpolant, tol, maxiter)
        self._of = functools.partial(self._swept, np.array(points, float), sweeps, rescale)

    @staticmethod
    def _swept(points, sweeps, rescale, values):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", _interpnd.GradientEstimationWarning)
            return _interpolate.CloughTocher2DInterpolator(points, values, 0.0, -1.0, sweeps,
                                                           rescale)

    def __call__(self, *args):
        _refuse_traced("CloughTocher2DInterpolator", "the query points", args,
                       "Pass them as constants, or use LinearNDInterpolator or RBFInterpolator, "
                       "which mutad differentiates in their queries.")
        value = self._interpolant(*args)
        xi = _interpnd._ndim_coords_from_arrays(args if len(args) > 1 else args[0], ndim=2)
        xi = np.reshape(np.asarray(xi, float), (-1, 2))
        composition = np.reshape(_rbf_apply(self.values, self._of, xi), np.shape(value))
        if not reproduces(value, composition):  # (a guard: never another estimate's derivative)
            raise UnsupportedOperationError(
                "scipy.interpolate.CloughTocher2DInterpolator of differentiated values: its "
                "gradient estimate of SciPy's number of sweeps did not reproduce SciPy's values "
                "here, so mutad cannot differentiate it. Use LinearNDInterpolator or "
                "RBFInterpolator (differentiated in their values).")
        return scipys_value(value, composition)

    def __getattr__(self, name):
        return refused_attribute(
            name, f"scipy.interpolate.CloughTocher2DInterpolator(...).{name}: this interpolant "
            "was built from traced values, and mutad differentiates calling it only. Build it "
            "from plain values to use other attributes.")


@_route(_interpolate.CloughTocher2DInterpolator)
def CloughTocher2DInterpolator(points: Any, values: Any, fill_value: Any = np.nan,
                               tol: float = 1e-6, maxiter: int = 400, rescale: bool = False
                               ) -> Any:
    if not _traced((points, values, fill_value)):
        return _interpolate.CloughTocher2DInterpolator(points, values, fill_value, tol, maxiter,
                                                       rescale)
    if _traced((points, fill_value)) or np.ndim(values) != 1 or np.iscomplexobj(values) \
            or isinstance(points, scipy.spatial.Delaunay):
        raise UnsupportedOperationError(
            "scipy.interpolate.CloughTocher2DInterpolator is differentiated in one column of "
            "real values (shape (npoints,)), with the points (an array) and fill_value "
            "constant: SciPy estimates the gradients of each column by its own number of "
            "sweeps. Interpolate each column by itself, or use LinearNDInterpolator or "
            "RBFInterpolator (differentiated in their values).")
    return _TracedCloughTocher(points, values, fill_value, tol, maxiter, rescale)


defmethod(_interpolate.LinearNDInterpolator, "__call__", _object_at_points)
defmethod(_interpolate.NearestNDInterpolator, "__call__", _object_at_points)


# CloughTocher2DInterpolator (of plain values) at traced queries: in the triangle SciPy puts a
# query in, its value is a cubic Bezier polynomial of the query's barycentric weights (on the
# sub-triangle the smallest weight names), with coefficients made of the values and SciPy's
# gradients at the vertices and the triangle's and its neighbours' geometry, none of which
# moves with the query: SciPy's steps (_clough_tocher_2d_single) on plain coefficients and
# traced weights


def _directional(df, edge):
    """The gradients ``df`` (queries, values, 2) along ``edge`` (queries, 2)."""
    return np.einsum("qvk,qk->qv", df, edge)


def _clough_tocher_at(interpolant, xi):
    """SciPy's ``CloughTocher2DInterpolator`` of real values at traced queries ``xi``."""
    value = _scipy_call(interpolant, xi, {})
    inside, where, vertices, b = _in_simplices(interpolant, value, xi)
    tri = interpolant.tri
    corners = tri.points[vertices]  # (queries, 3, 2): the scaled points SciPy triangulated
    f = np.moveaxis(interpolant.values[vertices], 1, 0)  # (3, queries, values)
    df = np.moveaxis(interpolant.grad[vertices], 1, 0)  # (3, queries, values, 2)
    e12, e23, e31 = (corners[:, 1] - corners[:, 0], corners[:, 2] - corners[:, 1],
                     corners[:, 0] - corners[:, 2])
    df12, df21 = _directional(df[0], e12), -_directional(df[1], e12)
    df23, df32 = _directional(df[1], e23), -_directional(df[2], e23)
    df31, df13 = _directional(df[2], e31), -_directional(df[0], e31)
    c3000, c0300, c0030 = f
    c2100, c2010 = (df12 + 3 * c3000) / 3, (df13 + 3 * c3000) / 3
    c1200, c0210 = (df21 + 3 * c0300) / 3, (df23 + 3 * c0300) / 3
    c1020, c0120 = (df31 + 3 * c0030) / 3, (df32 + 3 * c0030) / 3
    c2001 = (c2100 + c2010 + c3000) / 3
    c0201 = (c1200 + c0300 + c0210) / 3
    c0021 = (c1020 + c0120 + c0030) / 3
    # the direction of the derivative kept linear along each edge: towards the neighbour's
    # centroid, in this triangle's barycentric weights (the centroid's direction without one)
    g = np.full((3, len(where)), -0.5)
    transform = tri.transform[where]
    for k in range(3):
        neighbour = tri.neighbors[where, k]
        has = neighbour >= 0
        centroid = tri.points[tri.simplices[np.maximum(neighbour, 0)]].sum(axis=1) / 3
        c = np.einsum("qij,qj->qi", transform[:, :2], centroid - transform[:, 2])
        c = np.stack([c[:, 0], c[:, 1], 1 - c[:, 0] - c[:, 1]])
        i, j = ((2, 1), (0, 2), (1, 0))[k]
        with np.errstate(divide="ignore", invalid="ignore"):
            g[k] = np.where(has, (2 * c[i] + c[j] - 1) / (2 - 3 * c[i] - 3 * c[j]), -0.5)
    g = g[:, :, None]
    c0111 = (g[0] * (-c0300 + 3 * c0210 - 3 * c0120 + c0030)
             + (-c0300 + 2 * c0210 - c0120 + c0021 + c0201)) / 2
    c1011 = (g[1] * (-c0030 + 3 * c1020 - 3 * c2010 + c3000)
             + (-c0030 + 2 * c1020 - c2010 + c2001 + c0021)) / 2
    c1101 = (g[2] * (-c3000 + 3 * c2100 - 3 * c1200 + c0300)
             + (-c3000 + 2 * c2100 - c1200 + c2001 + c0201)) / 2
    c1002 = (c1101 + c1011 + c2001) / 3
    c0102 = (c1101 + c0111 + c0201) / 3
    c0012 = (c1011 + c0111 + c0021) / 3
    c0003 = (c1002 + c0102 + c0012) / 3
    # the extended weights: the smallest weight (a decision on the plain ones) moved to b4
    smallest = np.argmin(_plain(b), axis=1)
    minval = np.take_along_axis(b, smallest[:, None], axis=1)[:, 0]
    b1, b2, b3 = ((b[:, k] - minval)[:, None] for k in range(3))
    b4 = (3 * minval)[:, None]
    w = (b1**3*c3000 + 3*b1**2*b2*c2100 + 3*b1**2*b3*c2010 + 3*b1**2*b4*c2001
         + 3*b1*b2**2*c1200 + 6*b1*b2*b4*c1101 + 3*b1*b3**2*c1020 + 6*b1*b3*b4*c1011
         + 3*b1*b4**2*c1002 + b2**3*c0300 + 3*b2**2*b3*c0210 + 3*b2**2*b4*c0201
         + 3*b2*b3**2*c0120 + 6*b2*b3*b4*c0111 + 3*b2*b4**2*c0102 + b3**3*c0030
         + 3*b3**2*b4*c0021 + 3*b3*b4**2*c0012 + b4**3*c0003)
    composition = np.reshape(np.where(inside[:, None], w, interpolant.fill_value),
                             np.shape(value))
    if not reproduces(value, composition):  # (a guard: never another polynomial's derivative)
        raise UnsupportedOperationError(
            "scipy.interpolate.CloughTocher2DInterpolator at differentiated points: mutad's "
            "steps of SciPy's interpolant did not reproduce its values here, so mutad cannot "
            "differentiate it. Use LinearNDInterpolator or RBFInterpolator, which mutad "
            "differentiates in their queries.")
    return scipys_value(value, composition)


def _clough_tocher_call(self, *args, **kwargs):
    """SciPy's own ``CloughTocher2DInterpolator`` called at traced queries
    (``registry.defmethod``)."""
    if kwargs or np.iscomplexobj(self.values):
        raise UnsupportedOperationError(
            "scipy.interpolate.CloughTocher2DInterpolator called at differentiated points "
            + ("with options" if kwargs else "of complex values")
            + ": mutad differentiates the interpolant of real values at its queries. "
            "Interpolate the real and imaginary parts by themselves.")
    return _clough_tocher_at(self, _queries(args[0] if len(args) == 1 else tuple(args), 2))


defmethod(_interpolate.CloughTocher2DInterpolator, "__call__", _clough_tocher_call)


# RBFInterpolator: linear in its values, a pair of transposed operations


def _rbf_apply_plain(d, interpolant_of, x):
    """The RBF interpolant of the values ``d`` at the constant queries ``x``."""
    return interpolant_of(d)(x)


def _rbf_transpose_plain(dy, interpolant_of, x, n):
    """Wᵀ dy, W the values at ``x`` of the interpolants of the identity columns (computed by
    SciPy, a block of columns at a time)."""
    queries = np.shape(x)[0]
    dy = np.reshape(dy, (queries, -1))
    step = max(1, _BLOCK // max(queries, 1))
    blocks = [np.reshape(interpolant_of(np.eye(n)[:, start:min(start + step, n)])(x),
                         (queries, -1)).T @ dy for start in range(0, n, step)]
    return np.concatenate(blocks)


_rbf_apply = ScipyAdjoint(_rbf_apply_plain)
_rbf_transpose = ScipyAdjoint(_rbf_transpose_plain)


@_rbf_apply.rule
def _rbf_apply_rule(d, interpolant_of, x):
    shape = np.shape(d)
    return _rbf_apply(d, interpolant_of, x), lambda dy: (
        np.reshape(_rbf_transpose(dy, interpolant_of, x, shape[0]), shape), None, None)


@_rbf_apply.jvp_rule
def _rbf_apply_jvp(tangents, d, interpolant_of, x):
    return _rbf_apply(d, interpolant_of, x), _rbf_apply(tangents[0], interpolant_of, x)


@_rbf_transpose.rule
def _rbf_transpose_rule(dy, interpolant_of, x, n):
    shape = np.shape(dy)
    return _rbf_transpose(dy, interpolant_of, x, n), lambda dz: (
        np.reshape(_rbf_apply(np.reshape(dz, (n,) + shape[1:]), interpolant_of, x), shape),
        None, None, None)


@_rbf_transpose.jvp_rule
def _rbf_transpose_jvp(tangents, dy, interpolant_of, x, n):
    return (_rbf_transpose(dy, interpolant_of, x, n),
            _rbf_transpose(tangents[0], interpolant_of, x, n))


def _squared_distances(a, b):
    """‖a_i - b_j‖² for the rows of ``a`` and ``b``."""
    difference = a[:, None, :] - b[None, :, :]
    return np.sum(difference * difference, axis=-1)


def _rbf_kernel(name, r2):
    """SciPy's radial function ``name`` of the distances whose squares are ``r2``. The kernels
    smooth in r² are written in r² (their derivatives hold at a zero distance, of every order);
    those of r (``linear``, ``thin_plate_spline``, ``cubic``, ``quintic``) take their value at
    a zero distance with the derivative 0 there (theirs, but for ``linear``'s kink, where 0 is
    one of its one-sided slopes' mean, and the unbounded second derivative of the thin-plate
    spline), not the NaN of the square root's."""
    smooth = {"multiquadric": lambda: -np.sqrt(r2 + 1.0),
              "inverse_multiquadric": lambda: 1.0 / np.sqrt(r2 + 1.0),
              "inverse_quadratic": lambda: 1.0 / (r2 + 1.0),
              "gaussian": lambda: np.exp(-r2)}
    if name in smooth:
        return smooth[name]()
    apart = _plain(r2) > 0  # which pairs are apart: decided on the plain values
    r2_safe = np.where(apart, r2, 1.0)
    r = np.sqrt(r2_safe)
    values = {"linear": lambda: -r, "thin_plate_spline": lambda: r2_safe * np.log(r),
              "cubic": lambda: r2_safe * r, "quintic": lambda: -(r2_safe * r2_safe * r)}[name]()
    return np.where(apart, values, 0.0)


def _monomials(x, powers):
    """Each monomial of ``powers`` (rows of integer exponents) at the rows of ``x``, as products
    of the coordinates that appear (a zero exponent contributes 1, with no derivative)."""
    columns = []
    for exponents in powers:
        column = np.ones(np.shape(x)[:1])
        for k, power in enumerate(exponents):
            if power:
                column = column * x[:, k] ** int(power)
        columns.append(column)
    return np.stack(columns, axis=1) if columns else np.zeros((np.shape(x)[0], 0))


def _rbf_composition(y, d, x, interpolant, epsilon=None, smoothing=None):
    """SciPy's RBF interpolant of ``d`` at the data points ``y``, at the queries ``x``, written
    with functions mutad differentiates (SciPy's vectorized steps): the polynomial domain
    shifted and scaled by the data's bounds, the kernel and monomial system solved, its
    coefficients applied to the kernels and monomials at the queries. ``interpolant`` is
    SciPy's own of the plain values: its kernel, shape parameter, smoothing and exponents;
    ``epsilon`` and ``smoothing``, where given, the traced shape parameter and smoothing."""
    powers = interpolant.powers
    epsilon = interpolant.epsilon if epsilon is None else epsilon
    count, terms = np.shape(y)[0], np.shape(powers)[0]
    smoothing = interpolant.smoothing if smoothing is None else np.zeros(count) + smoothing
    values = np.reshape(d, (count, -1))
    mins, maxs = np.min(y, axis=0), np.max(y, axis=0)
    shift, scale = (maxs + mins) / 2, (maxs - mins) / 2
    scale = np.where(_plain(scale) == 0.0, 1.0, scale)
    kernels = _rbf_kernel(interpolant.kernel, _squared_distances(y * epsilon, y * epsilon))
    monomials = _monomials((y - shift) / scale, powers)
    lhs = np.concatenate([np.concatenate((kernels, monomials), axis=1),
                          np.concatenate((monomials.T, np.zeros((terms, terms))), axis=1)],
                         axis=0) + np.diag(np.concatenate([smoothing, np.zeros(terms)]))
    rhs = np.concatenate([values, np.zeros((terms, np.shape(values)[1]))], axis=0)
    coefficients = np.linalg.solve(lhs, rhs)
    at_queries = np.concatenate(
        [_rbf_kernel(interpolant.kernel, _squared_distances(x * epsilon, y * epsilon)),
         _monomials((x - shift) / scale, powers)], axis=1)
    return np.reshape(at_queries @ coefficients, np.shape(x)[:1] + np.shape(d)[1:])


_rbf_value = Value(lambda y, d, x, settings: _interpolate.RBFInterpolator(y, d, **settings)(x),
                   "scipy.interpolate.RBFInterpolator")
_rbf_object_value = Value(lambda interpolant, x: interpolant(x),
                          "scipy.interpolate.RBFInterpolator")


class _TracedRBF:
    """``RBFInterpolator`` of traced values ``d`` or data points ``y``: called, SciPy's values,
    differentiated in ``d`` (and the queries) with local ``neighbors``, in ``d``, ``y`` and the
    queries without."""

    def __init__(self, y, d, settings, shape=None):
        self.y, self.d = (v if _traced(v) else _plain_copy(np.asarray(v, dtype=float))
                          for v in (y, d))
        self._settings = settings
        self._shape = shape or {}  # the traced epsilon and smoothing
        self._interpolant = _interpolate.RBFInterpolator(_plain(y), _plain(d), **settings)

    def _interpolant_of(self, d):
        return _interpolate.RBFInterpolator(_plain(self.y), d, **self._settings)

    def __call__(self, x):
        if self._settings["neighbors"] is not None:
            _refuse_traced("RBFInterpolator", "the query points or the data points of an "
                           "interpolant with neighbors", (x, self.y),
                           "Leave neighbors=None (the global interpolant is differentiated "
                           "in them), or pass them as constants.")
            return _rbf_apply(self.d, self._interpolant_of, _plain_copy(_plain(x)))
        x = x if _traced(x) else np.asarray(x, dtype=float)
        composition = _rbf_composition(self.y, self.d, x, self._interpolant, **self._shape)
        return scipys_value(_rbf_value(self.y, self.d, x, self._settings), composition)

    def __getattr__(self, name):
        return refused_attribute(
            name,
            f"scipy.interpolate.RBFInterpolator(...).{name}: this interpolant was built from "
            "traced values, and mutad differentiates calling it only. Build it from plain "
            "values to use other attributes.")


def _rbf_at_points(self, x):
    """SciPy's own ``RBFInterpolator`` called at traced queries (``registry.defmethod``)."""
    if self.neighbors is not None:
        raise UnsupportedOperationError(
            "scipy.interpolate.RBFInterpolator with neighbors called at differentiated points: "
            "mutad differentiates the global interpolant (neighbors=None) in its queries.")
    d = np.reshape(self.d, np.shape(self.d)[:1] + tuple(self.d_shape))
    return scipys_value(_rbf_object_value(self, x), _rbf_composition(self.y, d, x, self))


defmethod(_interpolate.RBFInterpolator, "__call__", _rbf_at_points)


@_route(_interpolate.RBFInterpolator)
def RBFInterpolator(y: Any, d: Any, neighbors: Any = None, smoothing: Any = 0.0,
                    kernel: str = "thin_plate_spline", epsilon: Any = None,
                    degree: Any = None) -> Any:
    settings = dict(neighbors=neighbors, smoothing=smoothing, kernel=kernel, epsilon=epsilon,
                    degree=degree)
    # a traced shape parameter or smoothing: SciPy's interpolant of their numbers, the
    # composition differentiated in them too
    shape = {k: v for k, v in (("epsilon", epsilon), ("smoothing", smoothing)) if _traced(v)}
    if not _traced((y, d)) and not shape:
        return _interpolate.RBFInterpolator(y, d, **settings)
    if neighbors is not None:
        _refuse_traced("RBFInterpolator", "the data points, smoothing or epsilon of an "
                       "interpolant with neighbors", (y, smoothing, epsilon),
                       "Leave neighbors=None, or pass them as constants.")
    settings.update({k: _plain(v) for k, v in shape.items()})
    return _TracedRBF(y, d, settings, shape)


class _TracedRbf(scipy.interpolate.Rbf):
    """SciPy's legacy ``Rbf`` fitted to the plain values: its own object, its ``nodes``
    (``A⁻¹ d``, by SciPy's solve) SciPy's numbers with the derivatives of that solve of the
    traced values ``d``; a call's value ``Φ(x) · nodes`` is then SciPy's too."""

    def __call__(self, *args: Any) -> Any:
        _refuse_traced("Rbf", "the query points", args, "Pass them as constants, or use "
                       "RBFInterpolator, which mutad differentiates in its query points.")
        return super().__call__(*args)


@_route(_interpolate.Rbf)
def Rbf(*args: Any, **kwargs: Any) -> Any:
    if not _traced((args, kwargs)):
        return _interpolate.Rbf(*args, **kwargs)
    _refuse_traced("Rbf", "the data points, epsilon or smooth", (args[:-1], kwargs),
                   "Pass them as constants, or use RBFInterpolator, which mutad "
                   "differentiates in its data points too.")
    d = args[-1]
    rbf = _TracedRbf(*args[:-1], _plain_copy(stop_gradient(d)), **kwargs)
    A = rbf.A
    if rbf._target_dim > 1:  # SciPy's: one LU factorisation, a solve of each column
        factors = scipy.linalg.lu_factor(A)
        composition = np.stack([scipy.linalg.lu_solve(factors, d[:, i])
                                for i in range(rbf._target_dim)], axis=1)
    else:
        composition = scipy.linalg.solve(A, np.reshape(d, -1) if rbf.mode == "1-D" else d)
    if not reproduces(rbf.nodes, composition):  # (a guard: never another solve's derivative)
        raise UnsupportedOperationError(
            "scipy.interpolate.Rbf of differentiated values: the solve for its nodes did not "
            "reproduce SciPy's here, so mutad cannot differentiate it. Use RBFInterpolator.")
    rbf.di = np.copy(np.reshape(d, -1) if rbf.mode == "1-D" else d)  # (SciPy's own copy)
    rbf.nodes = scipys_value(rbf.nodes, composition)
    return rbf


@_route(_interpolate.griddata)
def griddata(points: Any, values: Any, xi: Any, method: str = "linear",
             fill_value: Any = np.nan, rescale: bool = False) -> Any:
    if not _traced((points, values, xi, fill_value)):
        return _interpolate.griddata(points, values, xi, method, fill_value, rescale)
    _refuse_traced("griddata", "fill_value", fill_value, "Pass it as a constant.")
    given, traced = _scattered_points("griddata", points, followed=True) \
        if method == "linear" else (_scattered_points("griddata", points), None)
    ndim = np.shape(given)[1]
    if ndim == 1 and method in ("nearest", "linear", "cubic"):
        # SciPy's steps: interp1d of the sorted points (mutad's, of traced values or queries,
        # and of traced points for the linear method)
        flat = given.ravel()
        if isinstance(xi, tuple):
            if len(xi) != 1:
                raise ValueError("invalid number of dimensions in xi")
            xi, = xi
        idx = np.argsort(flat)
        knots = flat[idx] if traced is None else np.ravel(traced)[idx]
        return interp1d(knots, values[idx], kind=method, axis=0, bounds_error=False,
                        fill_value="extrapolate" if method == "nearest" else fill_value)(xi)
    if method == "nearest":
        return _scattered_call(_plain_interpolant(_interpolate.NearestNDInterpolator, given,
                                                  values, rescale), values, (xi,), {})
    if method == "linear":
        return _scattered_call(_plain_interpolant(_interpolate.LinearNDInterpolator, given,
                                                  values, fill_value, rescale), values, (xi,),
                               {}, traced)
    if method == "cubic" and ndim == 2:  # SciPy's steps
        return CloughTocher2DInterpolator(given, values, fill_value=fill_value,
                                          rescale=rescale)(xi)
    raise ValueError(f"Unknown interpolation method {method!r} for {ndim} dimensional data")


# ----------------------------------------------------------------------------------------------
# RectBivariateSpline of traced values z on a constant grid: the interpolating spline (s=0),
# whose knots FITPACK places by the grid alone, so that its values are linear in z:
# values = Gx z Gyᵀ, G = B(queries) B(grid)⁻¹ along each axis (B the B-spline basis, its
# derivative of order dx, dy, at the queries clamped to the knots' interval as FITPACK clamps)


class _RectBivariate:
    """The constant part of a ``RectBivariateSpline``: SciPy's grid, settings and knots."""

    def __init__(self, x, y, bbox, kx, ky, s, maxit):
        self.x, self.y = _plain_copy(x), _plain_copy(y)
        self.bbox, self.kx, self.ky, self.s, self.maxit = list(bbox), kx, ky, s, maxit
        probe = self.spline(np.zeros((self.x.size, self.y.size)))  # SciPy's checks
        self.tx, self.ty = probe.get_knots()
        self.inverse = {}

    def spline(self, z):
        return _interpolate.RectBivariateSpline(self.x, self.y, z, self.bbox, self.kx, self.ky,
                                                self.s, self.maxit)

    def checked(self, z):
        spline = self.spline(z)
        tx, ty = spline.get_knots()
        if not (np.array_equal(tx, self.tx) and np.array_equal(ty, self.ty)):
            raise UnsupportedOperationError(
                "scipy.interpolate.RectBivariateSpline: FITPACK placed the knots by the values "
                "z, so the spline is not linear in them and mutad has no derivative of it.")
        return spline

    def basis(self, axis, points, nu):
        """``G`` along ``axis`` at ``points`` (derivative order ``nu``)."""
        t, k, grid = (self.tx, self.kx, self.x) if axis == 0 else (self.ty, self.ky, self.y)
        n = len(t) - k - 1
        if axis not in self.inverse:
            self.inverse[axis] = np.linalg.inv(_interpolate.BSpline(t, np.eye(n), k)(grid))
        points = np.clip(np.ravel(np.asarray(points, float)), t[k], t[n])
        return _interpolate.BSpline(t, np.eye(n), k)(points, nu=nu) @ self.inverse[axis]


def _rect_value(z, spec, query):
    xq, yq, dx, dy, grid = query
    spline = spec.checked(np.asarray(z))
    if grid == "ev":
        return spline.ev(xq, yq, dx, dy)
    return spline(xq, yq, dx=dx, dy=dy, grid=grid)


_rect_evaluate = Adjoint(_rect_value)
_rect_evaluate.complex_values = None


def _rect_bases(spec, query):
    xq, yq, dx, dy, grid = query
    return spec.basis(0, xq, dx), spec.basis(1, yq, dy)


@_rect_evaluate.rule
def _rect_rule(z, spec, query):
    y = _rect_evaluate(z, spec=spec, query=query)  # (an enclosing differentiation: see below)
    gx, gy = _rect_bases(spec, query)
    grid = query[-1]

    def back(dy):
        if grid is True:
            return (gx.T @ np.reshape(dy, (gx.shape[0], gy.shape[0])) @ gy,)
        return (gx.T @ (np.reshape(dy, (-1, 1)) * gy),)

    return y, back


@_rect_evaluate.jvp_rule
def _rect_jvp(tangents, z, spec, query):
    # (the values again through the Adjoint, and the tangent by products, so that an enclosing
    # differentiation following z and its tangent, a Hessian's, follows them too: the spline
    # is linear in z, its rules every order's)
    y = _rect_evaluate(z, spec=spec, query=query)
    if tangents[0] is None:
        return y, None
    gx, gy = _rect_bases(spec, query)
    dz = tangents[0]
    if query[-1] is True:
        return y, np.reshape(gx @ dz @ gy.T, np.shape(y))
    return y, np.reshape(np.einsum("ki,ij,kj->k", gx, dz, gy), np.shape(y))


def _constant_value(v):
    """The plain value of a constant (an array the function made from none of its arguments,
    or the caller's), a copy: the caller may write into it afterwards."""
    if isinstance(v, (list, tuple)):
        return type(v)(_constant_value(item) for item in v)
    if isinstance(v, Tracer):
        v = v.plain_value()
    return np.array(v, copy=True) if isinstance(v, np.ndarray) else v


class _TracedRectBivariate:
    """A ``RectBivariateSpline`` of traced values: called (``grid=True`` or ``False``) and
    ``ev``, its values are SciPy's, differentiated in ``z``."""

    def __init__(self, spec, z):
        self._spec, self._z = spec, z

    def _evaluate(self, xq, yq, dx, dy, grid):
        _refuse_traced("RectBivariateSpline", "the query points", (xq, yq),
                       "Evaluate at constant points, or interpolate with "
                       "RegularGridInterpolator(method='cubic'), which mutad differentiates in "
                       "its points.")
        xq, yq = _constant_value(xq), _constant_value(yq)
        return _rect_evaluate(self._z, spec=self._spec, query=(xq, yq, dx, dy, grid))

    def __call__(self, x, y, dx=0, dy=0, grid=True):
        return self._evaluate(x, y, dx, dy, bool(grid))

    def ev(self, xi, yi, dx=0, dy=0):
        return self._evaluate(xi, yi, dx, dy, "ev")

    def get_knots(self):
        return self._spec.tx.copy(), self._spec.ty.copy()

    def integral(self, xa, xb, ya, yb):
        """SciPy's integral, linear in z as uᵀ z v (the spline's coefficients Bx⁻¹ z By⁻ᵀ
        integrated along each axis): u and v from SciPy's integrals of the splines of
        z = e_i 1ᵀ (u_i Σv), 1 e_jᵀ (Σu v_j) and 1 1ᵀ (Σu Σv)."""
        _refuse_traced("RectBivariateSpline.integral", "the bounds", (xa, xb, ya, yb),
                       "Pass them as constants.")
        spec, bounds = self._spec, (xa, xb, ya, yb)
        nx, ny = spec.x.size, spec.y.size
        total = spec.spline(np.ones((nx, ny))).integral(*bounds)
        u = np.array([spec.spline(np.outer(e, np.ones(ny))).integral(*bounds)
                      for e in np.eye(nx)])
        v = np.array([spec.spline(np.outer(np.ones(nx), e)).integral(*bounds)
                      for e in np.eye(ny)])
        weights = np.outer(u, v) / total if total != 0 else np.zeros((nx, ny))
        value = np.float64(spec.checked(_plain(self._z)).integral(*bounds))
        composition = np.sum(weights * self._z)
        if not reproduces(value, composition):  # (a guard: never another fit's derivative)
            raise UnsupportedOperationError(
                "scipy.interpolate.RectBivariateSpline(...).integral of traced values: its "
                "integral as a sum of the values did not reproduce SciPy's here, so mutad cannot "
                "differentiate it. Integrate the spline's values at constant points instead.")
        return scipys_value(value, composition)

    def __getattr__(self, name):
        return refused_attribute(
            name,
            f"scipy.interpolate.RectBivariateSpline(...).{name}: this spline was built from "
            "traced values, and mutad differentiates its values and partial derivatives "
            "(calling it, .ev) and integral only. Build it from plain values to use other "
            "attributes.")


# RectBivariateSpline at s > 0 (FITPACK's regrid) places its knots by the values, a decision of
# the forward pass, and fits on them as curfit does: the least-squares spline, or the smoothing
# spline of the p its iteration (curfit's, from p = 1) finds, whose coefficients C are the
# least-squares solution of [Sx; Bx/p] C [Sy; By/p]ᵀ = [[Z, 0], [0, 0]] (fpgrre: Sx, Sy the
# B-splines at the grid, Bx, By the jumps of their derivatives at the interior knots). Computed
# again in traced steps, the values SciPy's, refused where they do not reproduce SciPy's
# coefficients (to CURFIT_RTOL).


def _regrid_fit(spline, x, y, z, s, maxit):
    """SciPy's coefficients (nx - kx - 1, ny - ky - 1) of ``spline``, the fit of the traced
    ``z`` at ``s > 0``, differentiated as regrid's fit on its knots (see above)."""
    (tx, ty), (kx, ky) = spline.get_knots(), spline.degrees
    design = [_interpolate.BSpline.design_matrix(v, t, k).toarray()
              for v, t, k in ((x, tx, kx), (y, ty, ky))]
    polynomial = [_interpolate.BSpline.design_matrix(v, np.r_[[t[0]] * (k + 1), [t[-1]] * (
        k + 1)], k).toarray() for v, t, k in ((x, tx, kx), (y, ty, ky))]  # (bbox's ends)

    def least_squares(sx, sy, jumps=None):
        """The coefficients and residual of [sx; jx] C [sy; jy]ᵀ = [[z, 0], [0, 0]]."""
        ax, ay = sx, sy
        if jumps is not None:
            ax, ay = np.concatenate([sx, jumps[0]]), np.concatenate([sy, jumps[1]])
        rows = np.concatenate([z, np.zeros((len(ax) - len(sx), z.shape[1]))])
        half = np.linalg.lstsq(ax, rows, rcond=None)[0]  # (nx - kx - 1, my)
        columns = np.concatenate([half.T, np.zeros((len(ay) - len(sy), half.shape[0]))])
        c = np.linalg.lstsq(ay, columns, rcond=None)[0].T
        return c, np.sum((sx @ c @ sy.T - z) ** 2)

    refusal = UnsupportedOperationError(
        "scipy.interpolate.RectBivariateSpline of differentiated data at s > 0: mutad's steps "
        "of FITPACK's smoothing fit on its knots did not reproduce SciPy's coefficients here "
        "(an ill-conditioned fit, or a decision of the iteration on p taken within rounding), "
        "so mutad cannot differentiate it. Fit with s=0, or pass the data through "
        "mutad.stop_gradient where no gradient should flow.")
    try:
        fit, fp = least_squares(*design)
        acc = CURFIT_TOL * s
        smoothing = len(tx) > 2 * (kx + 1) or len(ty) > 2 * (ky + 1)  # (else the polynomial)
        if smoothing and fp < s and not abs(fp - s) < acc:
            jumps = [_curfit_jumps(t, k) for t, k in ((tx, kx), (ty, ky))]
            fp0 = least_squares(*polynomial)[1]
            fit, fp = _smoothing_iteration(
                lambda p: least_squares(*design, jumps=(jumps[0] / p, jumps[1] / p)),
                1.0, fp0, fp, s, acc, maxit)
    except np.linalg.LinAlgError:
        raise refusal from None
    value = np.reshape(spline.get_coeffs(), (len(tx) - kx - 1, len(ty) - ky - 1))
    if not np.max(np.abs(stop_gradient(fit) - value)) <= CURFIT_RTOL * np.max(np.abs(value)):
        raise refusal
    return scipys_value(value, fit)


class _SmoothRectBivariate:
    """A ``RectBivariateSpline`` of traced values at ``s > 0``: SciPy's spline of their plain
    values, called (``grid=True`` or ``False``) and ``ev``, differentiated through its
    coefficients (:func:`_regrid_fit`), which ``get_coeffs`` gives."""

    def __init__(self, spline, coefficients):
        self._spline, self._c = spline, coefficients

    def _basis(self, axis, points, nu):
        t, k = self._spline.get_knots()[axis], self._spline.degrees[axis]
        n = len(t) - k - 1
        points = np.clip(np.ravel(np.asarray(points, float)), t[k], t[n])
        return _interpolate.BSpline(t, np.eye(n), k)(points, nu=nu)

    def _evaluate(self, xq, yq, dx, dy, grid):
        _refuse_traced("RectBivariateSpline", "the query points", (xq, yq),
                       "Evaluate at constant points.")
        xq, yq = _constant_value(xq), _constant_value(yq)
        value = self._spline.ev(xq, yq, dx, dy) if grid == "ev" else self._spline(
            xq, yq, dx=dx, dy=dy, grid=grid)
        gx, gy = self._basis(0, xq, dx), self._basis(1, yq, dy)
        composition = gx @ self._c @ gy.T if grid is True else np.sum((gx @ self._c) * gy,
                                                                       axis=1)
        return scipys_value(value, np.reshape(composition, np.shape(value)))

    def __call__(self, x, y, dx=0, dy=0, grid=True):
        return self._evaluate(x, y, dx, dy, bool(grid))

    def ev(self, xi, yi, dx=0, dy=0):
        return self._evaluate(xi, yi, dx, dy, "ev")

    def get_knots(self):
        return self._spline.get_knots()

    def get_coeffs(self):
        return np.reshape(self._c, (-1,))

    def __getattr__(self, name):
        return refused_attribute(
            name,
            f"scipy.interpolate.RectBivariateSpline(...).{name}: this smoothing spline was "
            "built from traced values, and mutad differentiates its values and partial "
            "derivatives (calling it, .ev), knots and coefficients only. Build it from plain "
            "values to use other attributes.")


@_route(_interpolate.RectBivariateSpline)
def RectBivariateSpline(x: Any, y: Any, z: Any, bbox: Any = (None, None, None, None),
                        kx: int = 3, ky: int = 3, s: float = 0, maxit: int = 20) -> Any:
    if not _traced((x, y, z, bbox, s)):
        return _interpolate.RectBivariateSpline(
            stop_gradient(x), stop_gradient(y), stop_gradient(z), list(bbox), kx, ky, s, maxit)
    _refuse_traced("RectBivariateSpline", "the grid x, y or bbox", (x, y, bbox),
                   "Interpolate on a constant grid (map the queries onto it).")
    _refuse_traced("RectBivariateSpline", "the smoothing s", s, "Pass it as a constant.")
    if s != 0:
        x, y, bbox = _constant_value(x), _constant_value(y), _constant_value(bbox)
        spline = _interpolate.RectBivariateSpline(x, y, _plain(z), bbox, kx, ky, s, maxit)
        return _SmoothRectBivariate(spline, _regrid_fit(spline, x, y, z, s, maxit))
    spec = _RectBivariate(_constant_value(x), _constant_value(y), _constant_value(bbox), kx, ky,
                          s, maxit)
    return _TracedRectBivariate(spec, np.copy(z))


def _refused_surface_fit(scipy_class):
    """The stand-in for FITPACK's scattered surface fit ``scipy_class`` (surfit, sphere):
    SciPy's own of plain data, a clear refusal of differentiated data."""
    name = scipy_class.__name__

    def construct(*args, **kwargs):
        if _traced((args, kwargs)):
            raise UnsupportedOperationError(
                f"scipy.interpolate.{name} of differentiated data: mutad has no derivative of "
                "FITPACK's scattered surface fits (surfit ranks its system, and places a "
                "smoothing fit's knots, by the values). For data on a grid use "
                "RectBivariateSpline(x, y, z) (s=0), which mutad differentiates in z; for "
                "scattered data RBFInterpolator, CloughTocher2DInterpolator or griddata.")
        return scipy_class(*args, **kwargs)

    construct.__signature__ = inspect.signature(scipy_class)
    return _route(scipy_class)(construct)


for _scattered_fit in (_interpolate.SmoothBivariateSpline, _interpolate.LSQBivariateSpline,
                       _interpolate.SmoothSphereBivariateSpline,
                       _interpolate.LSQSphereBivariateSpline):
    _refused_surface_fit(_scattered_fit)
del _scattered_fit  # (a routed class left bound: the mode would switch the module's class)


@_route(_interpolate.bisplrep)
def bisplrep(x: Any, y: Any, z: Any, *args: Any, **kwargs: Any) -> Any:
    if not _traced((x, y, z, args, kwargs)):
        return _interpolate.bisplrep(x, y, z, *args, **kwargs)
    raise UnsupportedOperationError(
        "scipy.interpolate.bisplrep of differentiated values: mutad has no derivative of "
        "FITPACK's scattered surface fit (surfit places its knots, and ranks its system, by the "
        "values). For data on a grid use RectBivariateSpline(x, y, z) (s=0), which mutad "
        "differentiates in z; for scattered data RBFInterpolator, or griddata.")
