"""The products of ``@`` compiled into a replay's blocks: their cotangents written as lines
(``contractions._matrix_matrix_back.lines`` and its kin), the traced pullback's bits on inputs
that flip each decision of those lines (a finite product taken as it is, a non-finite one
through ``product_times``)."""

import functools

import numpy as np
import pytest

import mutad
from test_replay import POLICIES, blocks, replayed_like_traced, same

CONSTANT = np.arange(12.0).reshape(3, 4) / 7.0
"""A matrix the program reads as a constant operand of its products."""


def products(A, B, x):
    """Matrix times matrix (of two arguments, and with a constant on either side), a vector
    times a matrix and a matrix times a vector, and a batch (the rule's general pullback)."""
    P = A @ B
    Q = (P * 0.5) @ CONSTANT
    R = CONSTANT.T @ P
    v = x @ Q
    w = Q @ v
    S = np.stack([A, A * 2.0]) @ B
    return np.sum(P * P) + np.sum(w * x) + np.sum(v) + np.sum(R * R) + np.sum(S)


def calls(dtype=np.float64):
    rng = np.random.default_rng(28)
    made = []
    for i in range(7):
        A, B, x = (rng.standard_normal(s).astype(dtype) for s in ((3, 4), (4, 3), (3,)))
        if dtype == np.complex128:
            A = A + 1j * rng.standard_normal((3, 4))
        if i == 3:  # an infinity beside zeros: NaN terms the lines leave to product_times
            A[1, 2], B[2, :] = np.inf, 0.0
        if i == 4:  # a NaN of an operand, and a zero cotangent of what it reaches
            B[0, 1], x[1] = np.nan, 0.0
        if i == 5:  # products past the floats
            A[0, :] = 1e300
        made.append((A, B, x))
    return made


@pytest.mark.parametrize("policy", POLICIES)
def test_the_products_of_matrices_are_lines_of_the_block(policy):
    from mutad.engines.replay import Function
    from mutad.engines.products import product_times
    from mutad.rules import contractions
    with np.errstate(all="ignore"):  # (the same events on every call: every call replays)
        replaying = replayed_like_traced(products, calls(), policy, argnums=(0, 1, 2),
                                         traced_once=True)
    compiled = blocks(replaying)
    written = (contractions._matrix_matrix_back, contractions._vector_matrix_back,
               contractions._matrix_vector_back)
    assert {member.special[1] for block in compiled for member in block.steps
            if type(member) is Function and member.special is not None} >= set(written)
    constants = [c for block in compiled for c in block.constants if callable(c)]
    assert not any(c in written for c in constants)
    assert product_times in constants  # where a product is not finite
    # the products with the module's matrix on either side take the lines too, the matrix
    # bound into the block as recorded
    held = [member for block in compiled for member in block.steps if type(member) is Function
            and any(a is CONSTANT or a.base is CONSTANT for a in member.args
                    if type(a) is np.ndarray)]
    assert len(held) == 2 and all(member.special is not None for member in held)


def real_part(A, B, x):
    return np.real(products(A, B, x))


def test_complex_products_replay_as_traced():
    """Complex operands take the rule's own pullback (no lines: ``Function.emit_back``)."""
    with np.errstate(all="ignore"):
        replayed_like_traced(real_part, calls(np.complex128), argnums=(0, 1, 2),
                             traced_once=True)


ROW = np.linspace(-1.0, 2.0, 4)
"""A vector the program reads as a constant operand of its products."""


def row_products(A, x):
    return np.sum((A @ ROW).T * x)


def test_a_constant_reshaped_in_place_between_calls_is_guarded():
    """The lines of a product with a module's array were chosen for its dimensions as
    recorded: ``ROW.shape = (4, 1)`` between calls (a column now: products of other shapes, the
    arguments' the same) leaves the block, and the call gives the traced gradient."""
    rng = np.random.default_rng(5)
    made = [(rng.standard_normal((3, 4)), rng.standard_normal(3)) for _ in range(3)]
    replaying = mutad.value_and_grad(row_products, argnums=(0, 1), replay=True)
    try:
        for i, (A, x) in enumerate(made + made):
            if i == 3:
                ROW.shape = (4, 1)
            got = replaying(A, x)
            expected = mutad.value_and_grad(row_products, argnums=(0, 1))(A, x)
            assert same(got[0], expected[0]) and same(got[1], expected[1])
    finally:
        ROW.shape = (4,)


def rearranged(M, x):
    """Views of traced values by linear maps (their value NumPy's function's alone: no back
    of the rule is recorded), among the products, one a flip along an axis the values
    choose (the replay's guards see it move)."""
    for _ in range(3):
        A = M @ M.T
        d = np.diag(A)
        flipped = np.flip(A, axis=int(x[0] > 0))
        x = A @ x + d
        M = M + np.swapaxes(flipped, 0, 1)[:, :M.shape[1]] * 0.1
    return np.sum(x * x) + np.sum(np.moveaxis(M, 0, 1)[0])


@pytest.mark.parametrize("policy", POLICIES)
def test_views_by_linear_maps_replay_as_numpys_function(policy):
    """A replay computes a linear map's view by NumPy's function itself (``rule.plain``,
    ``replay._first_of``), not by the rule, whose back it would throw away: bit for bit the
    traced gradient, on values that flip the flip's axis and reach infinities and NaNs."""
    from mutad.core import registry
    from mutad.engines.replay import Call, _first_of
    rng = np.random.default_rng(11)
    made = []
    for i in range(6):
        M, x = rng.standard_normal((3, 3)), rng.standard_normal(3)
        x[0] = abs(x[0]) if i != 4 else -abs(x[0])  # the fifth call flips the other axis
        if i == 2:
            M[1, 1] = np.inf
        if i == 3:
            M[0, 2], x[2] = np.nan, -0.0
        made.append((M, x))
    with np.errstate(all="ignore"):
        replaying = replayed_like_traced(rearranged, made, policy, argnums=(0, 1))
    called = {step.function for program in replaying.programs.values()
              if type(program) is not str for member in program.steps
              for step in getattr(member, "steps", (member,)) if type(step) is Call}
    assert {np.transpose, np.diag, np.flip, np.swapaxes, np.moveaxis} <= called
    # a rule under a wrapper of its own may not give the plain function's value: called
    rule = registry.RULES[np.transpose].reverse
    assert _first_of(rule) is np.transpose
    wrapped = functools.wraps(rule)(lambda *args, **kwargs: rule(*args, **kwargs))
    assert _first_of(wrapped) is not np.transpose


def test_where_a_view_lies_is_read_from_its_owner():
    """The layout a replay's guard compares (``replay._layout``): of a view of the array that
    owns its memory (read without ``owner``'s search), of a view of a view, of an array that
    is no view, of a 0-d one and of NumPy's scalar, from the owner's first element."""
    from mutad.core.views import address, owner
    from mutad.engines.replay import _layout
    whole = np.arange(24.0).reshape(4, 6)
    for view in (whole, whole.T, whole[1:, ::2], whole[1:][:, 2:], whole.T[::-1],
                 whole.ravel()[3:], np.lib.stride_tricks.as_strided(whole, (2, 2), (8, 8)),
                 np.zeros(()), np.float64(2.0)):
        base = owner(view)
        assert _layout(view) == (view.strides, address(view) - address(base),
                                 base is view and view.ndim > 0)
