"""``scipy.fft``'s transforms, by SciPy's names too: SciPy computes the values, and the
pullbacks are the adjoints ``mutad.rules.fft`` builds for NumPy's transforms of the same names
from the same stages (SciPy takes NumPy's arguments, then ``overwrite_x``, ``workers`` and
``plan``, which change no value). The real-to-real transforms (``dct``, ``idct``, ``dst``,
``idst`` and their n-d forms) are real matrices along each axis: their pullbacks are the
transposes, which are transforms of SciPy's too. The fast Hankel transforms ``fht`` and
``ifht`` (of constant ``dln``, ``mu``, ``offset`` and ``bias``) are SciPy's own steps, its
real transforms among them.

>>> import numpy as np, mutad
>>> from mutad.scipy import fft
>>> power = lambda x: (np.abs(fft.rfft(x)) ** 2).sum()
>>> mutad.gradient(power, np.array([1.0, 2.0, 0.0, -1.0]))[0].tolist()
[6.0, 10.0, 2.0, -2.0]
"""

import functools
import inspect

import numpy as np
import scipy.fft as _fft
from scipy.fft import _fftlog_backend

from ..core.errors import UnsupportedOperationError
from ..core.registry import CONVENTION, defroute
from ..rules.fft import HERMITIAN_ND, STAGES, adjoint
from ..core.levels import carries_derivative
from ._adjoints import StandIn, following_scipys_code, scipy_adjoint

__all__ = ["fft", "ifft", "rfft", "irfft", "hfft", "ihfft", "fftn", "ifftn", "rfftn", "irfftn",
           "fft2", "ifft2", "rfft2", "irfft2", "hfftn", "ihfftn", "hfft2", "ihfft2",
           "fftshift", "ifftshift", "dct", "idct", "dst", "idst", "dctn", "idctn", "dstn",
           "idstn", "fht", "ifht"]

_STAGES = {**STAGES, **HERMITIAN_ND}


def _transform(name):
    """The wrapper of ``scipy.fft``'s transform ``name``, made of its stages."""
    stages = _STAGES[name]
    wrapper = scipy_adjoint(getattr(_fft, name))
    wrapper.complex_values = CONVENTION  # the adjoint, in mutad's convention

    # The wrapper, not SciPy's own, so that an enclosing differentiation (x traced by it)
    # records the call; overwrite_x=False, as x must stay as it is.
    @wrapper.rule
    def rule(x, size, axis, norm, overwrite_x=False, workers=None, **kwargs):
        y = wrapper(x, size, axis, norm, False, workers, **kwargs)
        return y, adjoint(stages(x, size, axis, norm), np.shape(x))

    @wrapper.jvp_rule
    def jvp(tangents, x, size, axis, norm, overwrite_x=False, workers=None, **kwargs):
        # linear over the reals: the transform of the tangent
        y = wrapper(x, size, axis, norm, False, workers, **kwargs)
        return y, wrapper(tangents[0], size, axis, norm, False, workers, **kwargs)

    return wrapper


# One name each (not globals().update), so that type checkers and readers see every transform.
fft = _transform("fft")
ifft = _transform("ifft")
rfft = _transform("rfft")
irfft = _transform("irfft")
hfft = _transform("hfft")
ihfft = _transform("ihfft")
fftn = _transform("fftn")
ifftn = _transform("ifftn")
rfftn = _transform("rfftn")
irfftn = _transform("irfftn")
fft2 = _transform("fft2")
ifft2 = _transform("ifft2")
rfft2 = _transform("rfft2")
irfft2 = _transform("irfft2")
hfftn = _transform("hfftn")
ihfftn = _transform("ihfftn")
hfft2 = _transform("hfft2")
ihfft2 = _transform("ihfft2")

# The shifts are rolls, NumPy's the same values: NumPy's functions stand in for them.
fftshift = defroute(_fft.fftshift, np.fft.fftshift)
ifftshift = defroute(_fft.ifftshift, np.fft.ifftshift)


# ----------------------------------------------------------------------------------------------
# The real-to-real transforms

_INVERSE_TYPE = {1: 1, 2: 3, 3: 2, 4: 4}
_DUAL_NORM = {None: "forward", "backward": "forward", "forward": "backward", "ortho": "ortho"}


def _transposed(kind, kind_type, norm, g):
    """The transpose of SciPy's ``kind`` (``"dct"`` or ``"dst"``) of ``kind_type`` with
    ``norm``, not orthogonalized, along the last axis, applied to ``g``: the unnormalized
    transform's transpose (another type's, with its first or last element weighted), times the
    factor ``norm`` puts on the unnormalized one."""
    transform = getattr(_fft, kind)
    m = np.shape(g)[-1]
    weights = np.ones(m)
    end = 0 if kind == "dct" else -1  # the element the transforms of types 1 to 3 weight
    if kind_type == 1 and kind == "dct":  # symmetric once the end elements are weighted
        weights[1:-1] = 2.0
        y = weights * transform(g / weights, 1)
    elif kind_type == 2:  # the transpose of type 2 is type 3 of g with its end doubled
        weights[end] = 2.0
        y = transform(g * weights, 3)
    elif kind_type == 3:
        weights[end] = 0.5
        y = weights * transform(g, 2)
    else:  # dct's type 4, dst's types 1 and 4: symmetric
        y = transform(g, kind_type)
    length = 2 * (m - 1 if (kind, kind_type) == ("dct", 1) else
                  m + 1 if (kind, kind_type) == ("dst", 1) else m)
    if norm == "forward":
        return y / length
    if norm == "ortho":
        return y / np.sqrt(length)
    return y


def _transpose_along(kind, kind_type, size, axis, norm, orthogonalize, g, length):
    """The pullback of ``kind`` along ``axis`` of an input of ``length`` there, to ``size``:
    the transform's transpose, then the transpose of SciPy's truncation or zero padding."""
    g = np.moveaxis(g, axis, -1)
    if orthogonalize:  # an orthogonal matrix: its inverse
        g = getattr(_fft, "i" + kind)(g, kind_type, norm="ortho", orthogonalize=True)
    else:
        g = _transposed(kind, kind_type, norm, g)
    if size > length:
        g = g[..., :length]
    elif size < length:
        g = np.concatenate([g, np.zeros((*g.shape[:-1], length - size), g.dtype)], axis=-1)
    return np.moveaxis(g, -1, axis)


def _real_transform(name, kind, inverse, n_dimensional):
    """The wrapper of ``scipy.fft.<name>``: ``kind`` (``"dct"``, ``"dst"``) or its inverse,
    along one axis or several. An inverse of a type and norm is SciPy's transform of the
    inverse type and the dual norm."""
    wrapper = scipy_adjoint(getattr(_fft, name))
    wrapper.complex_values = CONVENTION  # a real matrix: its transpose takes complex values

    def stages(x, kind_type, size, axis, norm, orthogonalize):
        """``(kind_type, size, axis, norm, orthogonalize, length)`` per axis transformed."""
        if orthogonalize is None:
            orthogonalize = norm == "ortho"
        if orthogonalize != (norm == "ortho"):
            raise UnsupportedOperationError(
                f"scipy.fft.{name}: orthogonalize={orthogonalize} with norm={norm!r} is not "
                "differentiated; use norm='ortho' (orthogonalized) or another norm without it.")
        if inverse:
            kind_type, norm = _INVERSE_TYPE[kind_type], _DUAL_NORM[norm]
        shape = np.shape(x)
        if not n_dimensional:
            length = shape[axis]
            return [(kind_type, length if size is None else size, axis, norm, orthogonalize,
                     length)]
        axes = axis
        if axes is None:
            axes = range(len(shape)) if size is None else range(-np.size(size), 0)
        axes = [axes] if np.ndim(axes) == 0 else list(axes)
        sizes = [shape[a] for a in axes] if size is None else (
            [size] * len(axes) if np.ndim(size) == 0 else list(size))
        return [(kind_type, s, a, norm, orthogonalize, shape[a]) for s, a in zip(sizes, axes)]

    @wrapper.rule
    def rule(x, kind_type=2, size=None, axis=None if n_dimensional else -1, norm=None,
             overwrite_x=False, workers=None, orthogonalize=None):
        along = stages(x, kind_type, size, axis, norm, orthogonalize)
        y = wrapper(x, kind_type, size, axis, norm, False, workers, orthogonalize=orthogonalize)

        def back(dy):
            g = dy
            for t, s, a, nrm, orth, length in along:
                g = _transpose_along(kind, t, s, a, nrm, orth, g, length)
            return (g,)

        return y, back

    @wrapper.jvp_rule
    def jvp(tangents, x, kind_type=2, size=None, axis=None if n_dimensional else -1, norm=None,
            overwrite_x=False, workers=None, orthogonalize=None):
        stages(x, kind_type, size, axis, norm, orthogonalize)  # (what is refused)
        # linear over the reals: the transform of the tangent
        y = wrapper(x, kind_type, size, axis, norm, False, workers, orthogonalize=orthogonalize)
        return y, wrapper(tangents[0], kind_type, size, axis, norm, False, workers,
                          orthogonalize=orthogonalize)

    return wrapper


dct = _real_transform("dct", "dct", False, False)
idct = _real_transform("idct", "dct", True, False)
dst = _real_transform("dst", "dst", False, False)
idst = _real_transform("idst", "dst", True, False)
dctn = _real_transform("dctn", "dct", False, True)
idctn = _real_transform("idctn", "dct", True, True)
dstn = _real_transform("dstn", "dst", False, True)
idstn = _real_transform("idstn", "dst", True, True)


# The fast Hankel transforms: SciPy's steps (a scaling, rfft, a product with constant
# coefficients, irfft, a flip), which its backend module reaches by the names it binds
def _hankel(code):
    signature = inspect.signature(code)

    def transform(*args, **kwargs):
        arguments = signature.bind(*args, **kwargs)
        arguments.apply_defaults()
        if any(map(carries_derivative, list(arguments.arguments.values())[1:])):
            raise UnsupportedOperationError(
                f"scipy.fft.{code.__name__} of a differentiated dln, mu, offset or bias: mutad "
                "differentiates the transform in the array alone (SciPy's coefficients are "
                "complex log-gamma values). Pass them as constants.")
        return following_scipys_code(code, args, kwargs)

    transform.__signature__ = signature
    return transform


fht = StandIn(_fft.fht, _hankel(_fftlog_backend.fht))
ifht = StandIn(_fft.ifht, _hankel(_fftlog_backend.ifht))


# ----------------------------------------------------------------------------------------------
# scipy.fftpack, SciPy's legacy interface: Python wrappers of the same pocketfft transforms as
# scipy.fft's, by other arguments (no norm for the complex transforms; idct and idst the
# unnormalized transforms of the inverse type; rfft's output real, packed as Re y0, Re y1,
# Im y1, Re y2, ..., and irfft's input so): the transforms above stand in for them, their
# values bit for bit.

import scipy.fftpack as _fftpack  # noqa: E402
from ._adjoints import stands_in_for  # noqa: E402


def _fftpack_real(name, transform, inverse):
    @stands_in_for(getattr(_fftpack, name))
    def stand_in(x, type=2, n=None, axis=-1, norm=None, overwrite_x=False):
        return transform(x, _INVERSE_TYPE[type] if inverse else type, n, axis, norm)
    return stand_in


def _fftpack_real_nd(name, transform, inverse):
    @stands_in_for(getattr(_fftpack, name))
    def stand_in(x, type=2, shape=None, axes=None, norm=None, overwrite_x=False):
        shape = _fftpack._helper._good_shape(x, shape, axes)
        return transform(x, _INVERSE_TYPE[type] if inverse else type, shape, axes, norm)
    return stand_in


def _fftpack_complex(name, transform):
    @stands_in_for(getattr(_fftpack, name))
    def stand_in(x, n=None, axis=-1, overwrite_x=False):
        return transform(x, n, axis)
    return stand_in


def _fftpack_complex_nd(name, transform, axes=None):
    @stands_in_for(getattr(_fftpack, name))
    def stand_in(x, shape=None, axes=axes, overwrite_x=False):
        return transform(x, _fftpack._helper._good_shape(x, shape, axes), axes)
    return stand_in


for _name, _transform, _inverse in (("dct", dct, False), ("idct", dct, True),
                                    ("dst", dst, False), ("idst", dst, True)):
    _fftpack_real(_name, _transform, _inverse)
    _fftpack_real_nd(_name + "n", dctn if _transform is dct else dstn, _inverse)
for _name, _transform in (("fft", fft), ("ifft", ifft)):
    _fftpack_complex(_name, _transform)
    _fftpack_complex_nd(_name + "n", fftn if _transform is fft else ifftn)
    _fftpack_complex_nd(_name + "2", fftn if _transform is fft else ifftn, (-2, -1))


@stands_in_for(_fftpack.rfft)
def _fftpack_rfft(x, n=None, axis=-1, overwrite_x=False):
    """The real and imaginary parts of ``rfft``'s values, interleaved (the imaginary parts of
    the zero frequency and of an even length's last, zero, left out)."""
    size = np.shape(x)[axis] if n is None else n
    y = np.moveaxis(rfft(x, n, axis), axis, -1)
    pairs = np.stack([y[..., 1:].real, y[..., 1:].imag], axis=-1)
    packed = np.concatenate([y[..., :1].real, np.reshape(pairs, (*y.shape[:-1], -1))], axis=-1)
    return np.moveaxis(packed[..., :size], -1, axis)


@stands_in_for(_fftpack.irfft)
def _fftpack_irfft(x, n=None, axis=-1, overwrite_x=False):
    """``irfft`` of the values that ``rfft``'s packed form holds, zero padded or truncated to
    ``n`` as fftpack does."""
    x = np.moveaxis(x, axis, -1)
    size = x.shape[-1] if n is None else n
    if size > x.shape[-1]:
        x = np.concatenate([x, np.zeros((*x.shape[:-1], size - x.shape[-1]))], axis=-1)
    x = x[..., :size]
    zero = np.zeros((*x.shape[:-1], 1))
    real = np.concatenate([x[..., :1], x[..., 1::2]], axis=-1)
    imaginary = np.concatenate([zero, x[..., 2::2]] + [zero] * (size % 2 == 0), axis=-1)
    return np.moveaxis(irfft(real + 1j * imaginary, size, -1), -1, axis)


# scipy.fftpack's pseudo-differential operators (diff, tilbert, hilbert, ihilbert, cs_diff, ...,
# shift) are Python around two compiled routines of scipy.fftpack.convolve, which mutad follows:
# x's forward real transform in fftpack's packed order, a product per frequency by the constant
# kernel (convolve: a diagonal, or each (Re, Im) pair swapped and scaled; convolve_z: a 2×2
# block per pair), and the unnormalised backward transform. Linear in x. The backward transform
# is the forward one's transpose scaled per frequency (2 for each pair, 1 at zero and Nyquist),
# which commutes with the pair blocks: the transpose of the routine is the routine with each
# block transposed, i.e. its off-diagonal kernel entries exchanged within their pair.

from scipy.fftpack import convolve as _convolve_module  # noqa: E402
from ..core.allocation import plain_allocation  # noqa: E402
from ..custom import Adjoint  # noqa: E402


def _pairs_exchanged(omega):
    """``omega`` with the entries of each (Re, Im) pair of fftpack's packed order exchanged."""
    omega = np.array(omega, np.float64)
    pairs = (len(omega) - 1) // 2
    exchanged = omega.copy()
    exchanged[1:2 * pairs:2], exchanged[2:2 * pairs + 1:2] = omega[2:2 * pairs + 1:2], \
        omega[1:2 * pairs:2]
    return exchanged


def _kernel_product(routine, transposed_kernel):
    """``routine(x, *kernel)`` of a constant kernel, differentiated in ``x``: its transpose is
    the routine of ``transposed_kernel(*kernel)``, its tangent the routine of the tangent."""
    # (copies of the kernel arrays: the compiled routine takes writable memory, and a rule's
    # arguments are read-only views)
    product = Adjoint(lambda x, *kernel: routine(x, *[
        np.array(k) if isinstance(k, np.ndarray) else k for k in kernel]))
    product.__name__ = product.__qualname__ = f"scipy.fftpack.convolve.{routine.__name__}"

    @product.rule
    def rule(x, *kernel):
        return product(x, *kernel), lambda dy: (
            product(dy, *transposed_kernel(*kernel)), *[None] * len(kernel))

    @product.jvp_rule
    def jvp(tangents, x, *kernel):
        return product(x, *kernel), None if tangents[0] is None else product(tangents[0], *kernel)

    return product


_convolve = _kernel_product(
    _convolve_module.convolve,
    lambda omega, swap: (_pairs_exchanged(omega) if swap else omega, swap))
_convolve_z = _kernel_product(
    _convolve_module.convolve_z,
    lambda omega_real, omega_imag: (omega_real, _pairs_exchanged(omega_imag)))


def _in_place(inout, y, overwrite_x):
    """SciPy's result: with ``overwrite_x``, ``y`` written into ``inout`` (which SciPy transforms
    in place, converting it without a copy) and ``inout`` returned."""
    if not overwrite_x:
        return y
    inout[...] = y
    return inout


def _constant_kernel(name, *kernel):
    if any(map(carries_derivative, kernel)):
        raise UnsupportedOperationError(
            f"scipy.fftpack.convolve.{name} of a differentiated kernel: mutad differentiates it "
            "in the signal alone. Pass the kernel as a constant, or multiply the transform by "
            "it with scipy.fftpack.rfft and irfft, which mutad differentiates.")


@stands_in_for(_convolve_module.convolve)
def _fftpack_convolve(inout, omega, swap_real_imag=False, overwrite_x=False):
    _constant_kernel("convolve", omega)
    return _in_place(inout, _convolve(inout, omega, bool(swap_real_imag)), overwrite_x)


@stands_in_for(_convolve_module.convolve_z)
def _fftpack_convolve_z(inout, omega_real, omega_imag, overwrite_x=False):
    _constant_kernel("convolve_z", omega_real, omega_imag)
    return _in_place(inout, _convolve_z(inout, omega_real, omega_imag), overwrite_x)


class _PlainlyAllocating:
    """Stands in for a compiled routine that computes no derivative but allocates its result
    with NumPy's ``empty``, which must be plain where the allocation mode follows SciPy's code:
    fftpack's ``init_convolution_kernel``, whose kernel is made of the Python numbers its
    callback returns (a traced one is refused where compiled code converts it)."""

    def __init__(self, original):
        functools.update_wrapper(self, original)
        self.original = original  # an attribute: the mode swaps routed names, not attributes
        defroute(original, self)

    def __call__(self, *args, **kwargs):
        with plain_allocation():
            return self.original(*args, **kwargs)


_PlainlyAllocating(_convolve_module.init_convolution_kernel)
