"""The discrete Fourier transforms of ``np.fft``, and the stages their adjoints are made of.

Every transform is linear over the reals (the real ones map real arrays to complex ones and
back), so its forward rule is the transform of the tangent (``deflinear``). Its pullback, in
mutad's convention for complex values (docs/guide.md, "Complex numbers and the FFT"), is its
adjoint, built from the one-dimensional transforms it is made of, taken in reverse order:

* ``fft`` with norm ``m`` has the adjoint ``ifft`` with the dual norm (``DUAL``: the scale
  moves to the other direction), and the other way round;
* ``rfft`` keeps the first ``N // 2 + 1`` outputs of an ``fft`` of a real array, so its
  adjoint is the real part of the adjoint of ``fft`` on the cotangent padded with zeros, which
  is ``irfft`` of the cotangent with its doubled terms halved (``irfft`` counts each term of the
  half-spectrum twice, but the first and the Nyquist term once);
* ``irfft`` is the real part of ``ifft`` of the Hermitian extension of its input, so its
  adjoint is ``rfft`` with those terms doubled;
* a length ``n`` that pads or truncates the input is undone on the cotangent (``_fit``).

The pullbacks call ``np.fft`` on the cotangents, so nested differentiation records them. The
primal is always the library's own call, so the values are NumPy's bits.
"""

import numpy as np

from ..core.debug import from_user_line
from ..core.devices import beside
from ..core.views import memory
from ..core.registry import complex_aware, defcomposite, deflinear, defrule
from ._helpers import along

DUAL = {None: "forward", "backward": "forward", "ortho": "ortho", "forward": "backward"}
"""The norm of the adjoint transform: the scale factor moves to the other direction."""


def _fit(g, length, axis):
    """The cotangent ``g`` of an input padded or truncated along ``axis`` to ``g``'s length,
    brought back to the input's ``length``: cut where the input was padded with zeros, padded
    with zeros where it was truncated."""
    size = g.shape[axis]
    if size > length:
        return g[along(g.ndim, axis, slice(0, length))]
    if size < length:
        widths = [(0, 0)] * g.ndim
        widths[axis] = (0, length - size)
        return np.pad(g, widths)
    return g


def _doubled(size, axis, ndim):
    """Per term of a half-spectrum of a real signal of ``size`` samples, how many terms of the
    full spectrum it stands for: 1 for the first and (``size`` even) the Nyquist term, else 2."""
    count = np.full(size // 2 + 1, 2.0)
    count[0] = 1.0
    if size % 2 == 0:
        count[-1] = 1.0
    return np.reshape(count, tuple(-1 if i == axis % ndim else 1 for i in range(ndim)))


# One stage: (kind, n, axis, norm). ``adjoint_of_stage`` takes the cotangent of its output and
# the input's length along the axis.

def adjoint_of_stage(stage, g, length):
    kind, n, axis, norm = stage
    if kind == "conj":
        return np.conjugate(g)
    if kind == "fft":
        return _fit(np.fft.ifft(g, None, axis, DUAL[norm]), length, axis)
    if kind == "ifft":
        return _fit(np.fft.fft(g, None, axis, DUAL[norm]), length, axis)
    size = length if n is None else n  # the real signal's length
    if kind == "rfft":
        halved = g / beside(memory(g), _doubled(size, axis, g.ndim))
        return _fit(np.fft.irfft(halved, size, axis, DUAL[norm]), length, axis)
    # irfft: its output has ``size`` samples, n or 2 (length - 1)
    size = 2 * (length - 1) if n is None else n
    return _fit(np.fft.rfft(g, size, axis, DUAL[norm])
                * beside(memory(g), _doubled(size, axis, g.ndim)), length, axis)


def output_length(stage, length):
    """The length along the stage's axis of its output, from its input's ``length``."""
    kind, n, _, _ = stage
    if kind in ("fft", "ifft"):
        return length if n is None else n
    if kind == "rfft":
        return (length if n is None else n) // 2 + 1
    return 2 * (length - 1) if n is None else n


def adjoint(stages, shape):
    """The pullback of the transform made of ``stages`` (applied in order) of an input of
    ``shape``: the stages' adjoints in reverse order."""
    lengths, shape = [], list(shape)
    for stage in stages:
        if stage[0] != "conj":
            axis = stage[2]
            lengths.append(shape[axis])
            shape[axis] = output_length(stage, shape[axis])
        else:
            lengths.append(None)

    def back(dy):
        g = dy
        for stage, length in zip(reversed(stages), reversed(lengths), strict=True):
            g = adjoint_of_stage(stage, g, length)
        return (g,)

    return back


def shape_and_axes(a, s, axes, inverse_real=False):
    """The lengths and axes of a transform over several axes, as NumPy reads ``s`` and ``axes``
    (``s`` None: the input's lengths, for an inverse real transform 2 (m - 1) on the last axis;
    a length of -1: the input's), and as SciPy reads them too: a single integer for either is
    a sequence of one."""
    shape = np.shape(a)
    given = s is not None
    s = [s] if given and np.ndim(s) == 0 else s
    if axes is None:
        axes = list(range(-len(s), 0)) if given else list(range(-len(shape), 0))
    axes = [axes] if np.ndim(axes) == 0 else list(axes)
    s = list(s) if given else [shape[axis] for axis in axes]
    if len(s) != len(axes):
        raise ValueError("Shape and axes have different lengths.")
    if inverse_real and not given:
        s[-1] = 2 * (shape[axes[-1]] - 1)
    return [shape[axis] if n == -1 else n for n, axis in zip(s, axes, strict=True)], axes


# The stages of each transform, as the library computes it: (a, shape-or-length, axis-or-axes,
# norm) -> stages.

def one_dimensional(kind):
    return lambda a, n=None, axis=-1, norm=None: [(kind, n, axis, norm)]


def hermitian(a, n=None, axis=-1, norm=None):
    """``hfft``: ``irfft`` of the conjugate, with the dual norm."""
    return [("conj", None, None, None), ("irfft", n, axis, DUAL[norm])]


def inverse_hermitian(a, n=None, axis=-1, norm=None):
    """``ihfft``: the conjugate of ``rfft``, with the dual norm."""
    return [("rfft", n, axis, DUAL[norm]), ("conj", None, None, None)]


def complex_nd(kind):
    def stages(a, s=None, axes=None, norm=None):
        s, axes = shape_and_axes(a, s, axes)
        return [(kind, n, axis, norm) for n, axis in reversed(list(zip(s, axes)))]

    return stages


def real_nd(a, s=None, axes=None, norm=None):
    """``rfftn``: ``rfft`` along the last axis, then ``fft`` along the others, last first."""
    s, axes = shape_and_axes(a, s, axes)
    return [("rfft", s[-1], axes[-1], norm),
            *(("fft", n, axis, norm) for n, axis in reversed(list(zip(s[:-1], axes[:-1]))))]


def inverse_real_nd(a, s=None, axes=None, norm=None):
    """``irfftn``: ``ifft`` along every axis but the last, then ``irfft`` along it."""
    s, axes = shape_and_axes(a, s, axes, inverse_real=True)
    return [*(("ifft", n, axis, norm) for n, axis in zip(s[:-1], axes[:-1])),
            ("irfft", s[-1], axes[-1], norm)]


def two_dimensional(stages):
    return lambda a, s=None, axes=(-2, -1), norm=None: stages(a, s, axes, norm)


def hermitian_nd(a, s=None, axes=None, norm=None):
    """``scipy.fft.hfftn``: ``irfftn`` of the conjugate, with the dual norm."""
    return [("conj", None, None, None), *inverse_real_nd(a, s, axes, DUAL[norm])]


def inverse_hermitian_nd(a, s=None, axes=None, norm=None):
    """``scipy.fft.ihfftn``: the conjugate of ``rfftn``, with the dual norm."""
    return [*real_nd(a, s, axes, DUAL[norm]), ("conj", None, None, None)]


STAGES = {
    "fft": one_dimensional("fft"), "ifft": one_dimensional("ifft"),
    "rfft": one_dimensional("rfft"), "irfft": one_dimensional("irfft"),
    "hfft": hermitian, "ihfft": inverse_hermitian,
    "fftn": complex_nd("fft"), "ifftn": complex_nd("ifft"),
    "rfftn": real_nd, "irfftn": inverse_real_nd,
    "fft2": two_dimensional(complex_nd("fft")), "ifft2": two_dimensional(complex_nd("ifft")),
    "rfft2": two_dimensional(real_nd), "irfft2": two_dimensional(inverse_real_nd),
}
"""By name, the stages of each transform of ``np.fft`` (and ``scipy.fft``, which has the same
names and arguments before its own)."""

HERMITIAN_ND = {
    "hfftn": hermitian_nd, "ihfftn": inverse_hermitian_nd,
    "hfft2": two_dimensional(hermitian_nd), "ihfft2": two_dimensional(inverse_hermitian_nd),
}
"""The transforms ``scipy.fft`` has beside NumPy's."""


def transform_rule(func, stages):
    """The pure rule of ``func``: NumPy's call, and the adjoint of its stages."""

    def rule(a, *settings, **kwargs):
        y = from_user_line(func, a, *settings, **kwargs)  # (its DeprecationWarning there)
        return y, adjoint(stages(a, *settings, **kwargs), np.shape(a))

    rule.__name__ = rule.__qualname__ = func.__name__
    return rule


for _name, _stages in STAGES.items():
    _func = getattr(np.fft, _name)
    defrule(_func, leading=1)(transform_rule(_func, _stages))
    deflinear(_func)  # linear over the reals: the transform of the tangent
    complex_aware(_func)
del _name, _stages, _func


def _shifted(sign):
    """``fftshift`` (``sign`` 1) or ``ifftshift`` (-1): a roll by half of each length."""

    def shift(x, axes=None):
        shape = np.shape(x)
        if axes is None:
            axes = tuple(range(len(shape)))
        by = sign * (shape[axes] // 2) if np.ndim(axes) == 0 else [
            sign * (shape[axis] // 2) for axis in axes]
        return np.roll(x, by, axes)

    return shift


defcomposite(np.fft.fftshift)(_shifted(1))
defcomposite(np.fft.ifftshift)(_shifted(-1))
complex_aware(np.fft.fftshift, np.fft.ifftshift)
