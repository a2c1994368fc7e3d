"""``scipy.linalg`` functions mutad differentiates: import them from here instead of SciPy, as
with ``jax.scipy.linalg`` and ``autograd.scipy.linalg``.

>>> import numpy as np, mutad
>>> from mutad.scipy import linalg
>>> def energy(a, b):
...     x = linalg.cho_solve(linalg.cho_factor(a), b)
...     return b @ x
>>> a, b = np.array([[2.0, 0.5], [0.5, 1.0]]), np.array([1.0, -1.0])
>>> mutad.gradient(energy, a, b)[1].round(4)
array([ 1.7143, -2.8571])

Called with plain arrays each function is SciPy's own, flags and all. Called with traced arrays
it runs its rule, which never lets SciPy overwrite a traced buffer (the reverse pass still reads
its value); where ``overwrite_a`` / ``overwrite_b`` would have SciPy overwrite the array (its
memory's order and dtype fit LAPACK's, which SciPy is asked on a copy) and SciPy's result is
that memory (``lu_factor``'s ``lu``, ``cho_factor``'s ``c``, ``inv``'s inverse, a solve's
``x`` in ``b``), the result is written into the array, which then stands for it, as in NumPy;
where SciPy leaves its workspace there (``solve``'s ``a``, ``qr``'s, ``solve_banded``'s
``ab``), SciPy's bytes are written there without a derivative: a gradient that reads them is
refused, and so is forward mode. For memory-saving work in place use mutad.linalg's in-place
routines (``cholesky_``, ``ldiv_``), which restore what they overwrite.

Symmetric-matrix inputs (``cholesky``, ``cho_factor``, ``solve`` and ``inv`` with
``assume_a="sym"``/``"her"``/``"pos"``) get the symmetric gradient, the derivative along
symmetric perturbations, as in PyTorch and JAX; to check one with finite differences wrap it as
``lambda m: cholesky((m + m.T) / 2)`` (or pass ``symmetric=`` to mutad.testing's checks).
``cholesky`` and ``cho_factor`` refuse a matrix that is not symmetric beyond rounding.

The rules follow Giles, "An extended collection of matrix derivative results for forward and
reverse mode algorithmic differentiation" (2008) for solves and inverses, Murray,
"Differentiation of the Cholesky decomposition" (arXiv:1602.07527, 2016) for Cholesky, and
Al-Mohy & Higham, "Computing the Fréchet derivative of the matrix exponential" (SIAM J. Matrix
Anal. Appl., 2009) for expm, and Higham, "Functions of Matrices" (2008), §3.2, for expm's and
logm's Fréchet derivatives as corners of block triangular matrices.

``eigh``, ``eigvalsh``, ``svd``, ``svdvals``, ``det``, ``norm`` and ``qr`` are NumPy's
decompositions and functions by SciPy's names, with SciPy's defaults and settings (eigh's
``lower=``,
``eigvals_only=``, ``driver=``; svd's ``full_matrices``, ``compute_uv``, ``lapack_driver``; qr's
``mode=`` and ``pivoting=``; norm's ``ord``, ``axis``, ``keepdims``): their values are SciPy's
own, their derivatives np.linalg's rules applied to SciPy's factors. What has no derivative is
refused by name: the generalized eigenproblem (``b=``), a subset of eigenpairs, the extra
singular vectors of ``full_matrices=True`` and Q's extra columns in ``mode='full'`` for a
non-square matrix, ``mode='raw'``, and complex values.

``lu`` (``permute_l=``, ``p_indices=``) differentiates the factors of ``lu_factor``, unpacked;
both take rectangular matrices too (their factors' rules with L and U made square, as JAX's).
``pinv`` and ``lstsq`` have np.linalg's rules (Golub & Pereyra 1973, for a rank that does not
change nearby) at SciPy's cutoff of the singular values; ``lstsq`` refuses a matrix whose rank
at its ``cond`` is not pinv's. ``eig`` and ``eigvals`` (the standard problem, of a real or a
complex matrix) have np.linalg's formulas on SciPy's eigenpairs, whose eigenvalues are complex
even where they are real; a real matrix's left eigenvectors (``left=True``) those of the right
eigenvectors of its transpose; a real generalized problem's eigenvalues (``eigvals(a, b)``,
``eig(a, b, right=False)``) those of ``solve(b, a)``, matched to SciPy's (refused where b is
singular or the match is not clear).

``polar`` (``side="right"`` of a square or tall matrix, ``"left"`` of a square or wide one, of
full rank) has a rule of its own on SciPy's thin SVD, whose only divisors are the sums of two
singular values and the singular values themselves: repeated singular values (an orthogonal
matrix) are differentiated too, at first order; its second derivatives go through the SVD's rule.
The other side of a non-square matrix, whose unitary factor is not determined, is refused.

``solve_banded``, ``solveh_banded`` and ``solve_toeplitz`` differentiate their compact storage:
each stored band entry, or entry of Toeplitz's ``c`` and ``r``, gets the sum of the gradients
of the matrix entries it stands for (``solveh_banded``'s off-diagonal entries stand for two;
``r[0]``, which SciPy does not read, gets none; a lone ``c`` is ``r`` too); so does
``cho_solve_banded`` of the banded Cholesky factor ``cholesky_banded`` gives. The banded rules
compute in band storage; the Toeplitz rule forms the n × n outer product b̄ xᵀ. ``solve_banded``
takes complex values (x = A⁻¹ b is complex-differentiable).

The structured matrices ``toeplitz``, ``hankel``, ``circulant``, ``block_diag``, ``companion``,
``fiedler``, ``fiedler_companion``, ``leslie`` and ``convolution_matrix`` are SciPy's steps on the
differentiated functions: each entry is a copy of an input's, or of a value SciPy computes from
them (companion's first row), gathered by index, so their values are SciPy's bit for bit and
every mode and order follows. ``fiedler``'s ``|a_i - a_j|`` takes the derivative 0 where two
entries are equal (its diagonal). ``hankel`` of an array of two or more dimensions, which SciPy
ravels with a warning that it will change, is refused.

``matrix_balance`` is SciPy's ``B = T⁻¹ A T``, with ``T`` (a permutation and powers of 2)
LAPACK's choice on the plain values, a constant: the derivative ``T⁻¹ dA T``.

``expm`` takes complex matrices (its rule, with transposes, is declared holomorphic); ``cosm``,
``sinm``, ``tanm``, ``coshm``, ``sinhm`` and ``tanhm`` are SciPy's own steps on ``expm`` and
``solve`` (``tanm`` and ``tanhm`` of a complex matrix: SciPy's value with np.linalg.solve's
derivatives), so their values are SciPy's and every mode and order follows.
``expm_frechet`` is SciPy's value with the derivatives of the corners of ``expm([[A, E], [0,
A]])`` (in both matrices, every order); ``orthogonal_procrustes`` and ``subspace_angles`` are
SciPy's steps on ``svd``, ``orth`` and ``svdvals`` (its values bit for bit).

``fractional_matrix_power`` has logm's rule, the Fréchet derivative as the corner of the power of
a block triangular matrix, for real and complex matrices (a traced power ``t``, and a non-integer
power of a matrix with an eigenvalue on the closed negative real axis, the branch cut, are
refused).
``orth`` and ``null_space`` differentiate the columns of SciPy's SVD that its rank decision keeps
(Townsend 2016), the dropped singular values being zero: kept singular values repeated within
rounding, and a null space of more than one dimension, whose basis vectors are not determined,
are refused; complex matrices are differentiated to first order (their second derivatives would
go through svd's rule, which takes real ones), a loss that reads the arbitrary phases of their
columns being refused, as svd's. ``pinvh`` is pinv's rule for a symmetric (or complex
Hermitian) matrix, with the symmetric (Hermitian) gradient. ``hessenberg`` (``H``, and ``Q``
with ``calc_q=True``, real or complex) has SciPy's values and the derivatives of the same
Householder reflectors (LAPACK's conventions) computed by differentiated steps, checked against
SciPy's form; a column already zero below the subdiagonal (for a complex matrix, the last
subdiagonal entry real) is refused: LAPACK skips its reflector there and takes one nearby, so
the reduction is discontinuous.

``eig_banded``, ``eigvals_banded``, ``eigh_tridiagonal`` and ``eigvalsh_tridiagonal`` (real band
storage; every eigenpair, or those ``select='i'`` or ``'v'`` picks, each with the derivative
it has among all of them), ``cholesky_banded`` (real band storage) and ``rq``
(a real square matrix, or a wide one with ``mode='economic'`` or ``'r'``) are differentiated by
SciPy's names: their values are SciPy's own, their derivatives those of np.linalg's eigh,
cholesky and qr of the dense matrix the storage stands for (RQ: the QR factorisation of the
reversed transpose), each eigenvector and RQ factor turned to SciPy's signs; each stored
off-diagonal entry gets the gradients of both entries it stands for. A composition that does not
reproduce SciPy's factors (eigenvectors of repeated eigenvalues, a rank-deficient RQ) is
refused.

Each function also has a forward rule (``@f.jvp_rule``) from the same results, agreeing with its
reverse rule (<ẏ, w> = <ẋ, vjp(w)>: symmetric inputs take the symmetric part of their tangent,
structured ones the part on the entries SciPy reads). A tuple argument such as ``cho_solve``'s
``(c, lower)`` has a list of tangents, one per item.

Both kinds of rule compute with these wrappers and NumPy, never with SciPy's own functions:
under nested differentiation (``mutad.hvp``, a gradient of a gradient) their arguments and
cotangents are arrays an outer differentiation traces, and the wrappers hand those to the
outer level's rules, while plain arrays go straight to SciPy.
"""

# The rules live in mutad.linalg's families, beside np.linalg's of the same functions.
from ..linalg.dense import det, inv, lstsq, pinv, solve
from ..linalg.equations import (solve_continuous_are, solve_continuous_lyapunov,
                                solve_discrete_are, solve_discrete_lyapunov, solve_sylvester)
from ..linalg.factorizations import (cho_factor, cho_solve, cholesky, lu, lu_factor, lu_solve,
                                     qr, solve_triangular)
from ..linalg.functions import (cosm, coshm, expm, expm_frechet, fractional_matrix_power, logm,
                                signm, sinhm, sinm, sqrtm, tanhm, tanm)
from ..linalg.norms import norm
from ..linalg.spectral import (eig, eigh, eigvals, eigvalsh, hessenberg, matrix_balance,
                               null_space, orth, orthogonal_procrustes, pinvh, polar, subspace_angles, svd, svdvals)
from ..linalg.structured import (block_diag, circulant, companion, convolution_matrix, fiedler,
                                 fiedler_companion, hankel, khatri_rao, leslie, solve_banded, solveh_banded,
                                 solve_toeplitz, toeplitz)

__all__ = ["block_diag", "cho_factor", "cho_solve", "cholesky", "circulant", "companion",
           "convolution_matrix", "cosm", "coshm", "det", "eig", "eigh", "eigvals", "eigvalsh",
           "expm", "expm_frechet", "fiedler", "fiedler_companion", "fractional_matrix_power", "hankel", "hessenberg", "inv",
           "khatri_rao", "leslie", "logm", "lstsq", "lu", "lu_factor", "lu_solve", "matrix_balance", "norm", "null_space", "orth", "orthogonal_procrustes",
           "pinv", "pinvh", "polar",
           "qr", "signm", "sinhm", "sinm", "solve", "solve_banded",
           "solve_continuous_are", "solve_continuous_lyapunov", "solve_discrete_are",
           "solve_discrete_lyapunov",
           "solve_sylvester", "solve_toeplitz", "solve_triangular", "solveh_banded", "sqrtm",
           "subspace_angles", "svd", "svdvals", "tanhm", "tanm", "toeplitz"]
