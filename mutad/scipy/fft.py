"""``scipy.fft``'s transforms, by SciPy's names too: SciPy computes the values, and the
pullbacks are the adjoints ``mutad.rules.fft`` builds for NumPy's transforms of the same names
from the same stages (SciPy takes NumPy's arguments, then ``overwrite_x``, ``workers`` and
``plan``, which change no value).

>>> import numpy as np, mutad
>>> from mutad.scipy import fft
>>> power = lambda x: (np.abs(fft.rfft(x)) ** 2).sum()
>>> mutad.gradient(power, np.array([1.0, 2.0, 0.0, -1.0]))[0].tolist()
[6.0, 10.0, 2.0, -2.0]
"""

import numpy as np
import scipy.fft as _fft

from ..registry import CONVENTION, ROUTES
from ..rules.fft import HERMITIAN_ND, STAGES, adjoint
from ._adjoints import scipy_adjoint

__all__ = ["fft", "ifft", "rfft", "irfft", "hfft", "ihfft", "fftn", "ifftn", "rfftn", "irfftn",
           "fft2", "ifft2", "rfft2", "irfft2", "hfftn", "ihfftn", "hfft2", "ihfft2",
           "fftshift", "ifftshift"]

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
fftshift = ROUTES[_fft.fftshift] = np.fft.fftshift
ifftshift = ROUTES[_fft.ifftshift] = np.fft.ifftshift
