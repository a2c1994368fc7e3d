"""Shape functions: one table of cases, each checked against finite differences in both
policies; views that NumPy returns are mutated afterwards, and results are written into traced
buffers, slices and the functions' own inputs."""

import numpy as np
import pytest

import mutad
from cases import (COMPLEX, Case, arguments, case_id, check_complex, complex_normal, curved, normal,
                   numpys_bits_in_every_mode, replays_as_traced, under_alternating_policies)
from mutad.core.registry import RULES
from rule_checks import (WHERE, V4, X3, XF, Const, V, X, check_forward_rule, normal_array,
                         rule_case)

POLICIES = ("restore", "checkpoint")


def squared(func):
    """``func(...) ** 2``: a nonlinear use of the result, so a view's gradient is not constant."""

    def program(*args, **kwargs):
        return func(*args, **kwargs) ** 2

    program.__name__ = func.__name__
    return program


def of_transposed(func):
    """``func`` of ``x.T``: a non-contiguous input, so view functions must copy."""

    def program(x, *args, **kwargs):
        return func(x.T, *args, **kwargs)

    program.__name__ = f"{func.__name__}_of_transposed"
    return program


def piece(split, index):
    """One piece of a split, used nonlinearly."""

    def program(x, *args, **kwargs):
        return split(x, *args, **kwargs)[index] ** 2

    program.__name__ = f"{split.__name__}_piece_{index}"
    return program


def first_and_second(pair_function):
    def program(*arrays, **kwargs):
        first, second = pair_function(*arrays, **kwargs)[:2]
        return first * second

    program.__name__ = pair_function.__name__
    return program


# Programs that mutate views and write results into traced buffers ----------------------------


def mutate_transposed_view(x):
    columns = x.T
    columns[0] += 1.0
    return (x * x).sum()


def mutate_reshaped_view(x):
    wide = x.reshape(2, 6)
    wide[:, 0] *= wide[:, 1]
    return np.sin(x)


def mutate_permuted_view(x):
    permuted = np.transpose(x, (2, 0, 1))
    permuted[1] *= permuted[0]
    return x * x


def mutate_moved_and_swapped_views(x):
    np.moveaxis(x, 0, -1)[..., 0] *= 2.0
    np.swapaxes(x, 1, 2)[0, 0] += x[1, 1, 0]
    return x ** 3


def mutate_squeezed_and_expanded_views(x):
    column = np.squeeze(x[:, :1])
    column *= 3.0
    np.expand_dims(x, 0)[0, 1] -= column[0]
    return x * x


def mutate_flipped_view(x):
    flipped = np.flip(x)
    flipped[0] -= x[0] * 0.5
    return x * x


def mutate_split_pieces(x):
    top, bottom = np.split(x, 2)
    top *= bottom
    return np.exp(x)


def mutate_atleast_and_real_views(x):
    tail = x[1:]  # a view, so its buffer is x's, not itself
    np.atleast_1d(tail)[0] *= 2.0
    np.atleast_2d(x)[0, 0] *= 3.0
    real = np.real(tail)
    real += x[:-1]
    return x * x


def flip_into_slice(a, b):
    a[1:] = np.flip(b)[1:]
    return a * b


def concatenate_into_out(x, y):
    z = np.zeros_like(x, shape=(6, 4))
    z += x.sum()
    np.concatenate([x, y], out=z)
    return z ** 2


def stack_into_out(x, y):
    z = np.empty_like(x, shape=(3, 2, 4))
    np.stack([x, y], axis=1, out=z)
    return z ** 2


def where_into_a_column(x, y):
    x[:, 0] = np.where(x[:, 1] > 0, x[:, 2], y[:, 0])
    return x * y


def clip_over_own_input(x):
    np.clip(x, -0.5, 0.5, out=x)
    return x * x


def clip_over_own_input_where(x):
    """Only where the mask is true: the other elements keep x's own values."""
    np.clip(x, -0.5, 0.5, out=x, where=np.array([True, False, False, True]))
    return x * x


def roll_over_own_input(x):
    x[...] = np.roll(x, 1, axis=0)
    return x * np.arange(4.0)


def tile_into_a_fresh_buffer(x):
    z = np.zeros_like(x, shape=(3, 8))
    z[...] = np.tile(x, 2)
    z[:, 0] *= z[:, 1]
    return z


def pad_into_a_slice(x, y):
    y[1:, 1:] = np.pad(x, ((0, 0), (1, 0)), mode="edge")[:2, :3]
    return y * y


def broadcast_then_accumulate(x, v):
    same, stretched = np.broadcast_arrays(x, v)
    same += stretched * stretched
    return x * x


def triangle_of_an_updated_matrix(x):
    x += np.tril(x, -1).T
    return np.triu(x) ** 2


def diagonal_written_back(x):
    diagonal = np.diagonal(x) * 2.0
    x[:, :3] = np.diag(diagonal)
    return x ** 2


# fmt: off
CASES = [
    # reshaping views, used nonlinearly; on a transposed input so NumPy copies
    Case(squared(np.reshape), args=((4, 3),)),
    Case(squared(np.reshape), args=((2, 6),), kwargs=dict(order="F")),
    Case(of_transposed(squared(np.reshape)), args=(12,)),
    Case(of_transposed(squared(np.reshape)), args=((2, 6),), kwargs=dict(order="A")),
    Case(squared(np.ravel)),
    Case(of_transposed(squared(np.ravel))),
    Case(of_transposed(squared(np.ravel)), kwargs=dict(order="K")),
    Case(lambda x: np.ravel(np.transpose(x[::-1, ::2], (1, 0)), order="K") ** 2, name="ravel_K_of_strided"),
    Case(of_transposed(squared(np.ravel)), kwargs=dict(order="F")),
    Case(squared(np.squeeze), shapes=((3, 1, 4),)),
    Case(squared(np.squeeze), shapes=((3, 1, 1),), kwargs=dict(axis=-1)),
    Case(squared(np.expand_dims), kwargs=dict(axis=(0, 2))),
    Case(squared(np.transpose)),
    Case(squared(np.transpose), shapes=((2, 3, 4),), args=((2, 0, -2),)),
    Case(squared(np.matrix_transpose), shapes=((2, 3, 4),)),
    Case(squared(np.linalg.matrix_transpose), shapes=((2, 3, 4),)),
    Case(squared(np.swapaxes), shapes=((2, 3, 4),), args=(0, -1)),
    Case(squared(np.moveaxis), shapes=((2, 3, 4),), args=((0, 1), (-1, 0))),
    Case(squared(np.rollaxis), shapes=((2, 3, 4),), args=(2,)),
    Case(lambda x: (x.T ** 2).T + x.mT.T + x.reshape(4, 3).T.ravel().reshape(3, 4), name="methods"),
    Case(squared(np.reshape), args=((4, 3),), dtype=np.float32),
    # flips and rotations
    Case(squared(np.flip)),
    Case(squared(np.flip), shapes=((2, 3, 4),), kwargs=dict(axis=(0, 2))),
    Case(squared(np.fliplr)),
    Case(squared(np.flipud)),
    Case(squared(np.rot90)),
    Case(squared(np.rot90), shapes=((2, 3, 4),), kwargs=dict(k=3, axes=(2, 0))),
    Case(np.roll, args=(5,)),
    Case(np.roll, args=((1, -2), (0, 1))),
    Case(np.roll, args=(-1,), kwargs=dict(axis=1), dtype=np.float32),
    # joining
    Case(lambda x, y: np.concatenate([x, y, x]), shapes=((2, 4), (3, 4)), name="concatenate"),
    Case(lambda x, y: np.concatenate((x, y), axis=-1), shapes=((3, 2), (3, 4)), name="concatenate"),
    Case(lambda x, y: np.concatenate((x, y), None), shapes=((3, 2), (5,)), name="concatenate"),
    Case(lambda x, y: np.concat([x, 2.0 * y], axis=1), shapes=((3, 4), (3, 4)), name="concat"),
    Case(lambda x, y: np.stack([x, y], axis=-1), shapes=((3, 4), (3, 4)), name="stack"),
    Case(lambda x, y: np.stack((x, y, x), 1), shapes=((3, 4), (3, 4)), name="stack"),
    Case(lambda x, y: np.hstack([x, y]), shapes=((3, 2), (3, 4)), name="hstack"),
    Case(lambda x, y: np.hstack((x, y, np.ones(2))), shapes=((3,), (4,)), name="hstack"),
    Case(lambda x, y: np.vstack([x, y]), shapes=((3, 4), (4,)), name="vstack"),
    Case(lambda x, y: np.dstack([x, y]), shapes=((3, 4), (3, 4)), name="dstack"),
    Case(lambda x, y: np.dstack([x, y]), shapes=((4,), (4,)), name="dstack"),
    Case(lambda x, y: np.column_stack([x, y]), shapes=((3,), (3, 2)), name="column_stack"),
    Case(lambda x, y: np.append(x, y, axis=0), shapes=((3, 4), (2, 4)), name="append"),
    Case(lambda x, y: np.append(x, y), shapes=((3, 4), (5,)), name="append"),
    Case(lambda x, y: np.concatenate([x, y]), shapes=((2, 4), (3, 4)), dtype=np.float32, name="concatenate"),
    # splitting: the pieces are views
    Case(piece(np.split, 1), args=(2,), kwargs=dict(axis=1)),
    Case(piece(np.split, 0), args=([1, 3],)),
    Case(piece(np.array_split, 1), shapes=((5, 2),), args=(2,)),
    Case(piece(np.hsplit, 1), args=([1],)),
    Case(piece(np.vsplit, 2), args=(3,)),
    Case(piece(np.dsplit, 0), shapes=((2, 3, 4),), args=(2,)),
    Case(piece(np.unstack, 2), kwargs=dict(axis=1)),
    Case(of_transposed(piece(np.split, 1)), args=(2,), kwargs=dict(axis=0)),
    Case(lambda x: sum(p.sum() * p for p in np.split(x, 4, axis=1)), name="split"),
    # broadcasting
    Case(squared(np.broadcast_to), shapes=((4,),), args=((3, 4),)),
    Case(squared(np.broadcast_to), shapes=((3, 1),), args=((2, 3, 4),)),
    Case(first_and_second(np.broadcast_arrays), shapes=((3, 4), (4,))),
    Case(first_and_second(np.broadcast_arrays), shapes=((3, 1), (1, 4))),
    # copying and padding
    Case(np.tile, shapes=((4,),), args=((2, 1, 3),)),
    Case(np.tile, args=(2,)),
    Case(np.tile, shapes=((2, 3, 1),), args=((2, 2),)),
    Case(np.repeat, args=(2,), kwargs=dict(axis=0)),
    Case(np.repeat, args=(3,)),
    Case(np.repeat, args=([0, 2, 1, 3],), kwargs=dict(axis=1)),
    Case(np.repeat, args=(2,), kwargs=dict(axis=-1), dtype=np.float32),
    Case(np.delete, args=([0, 2],), kwargs=dict(axis=1)),
    Case(np.delete, args=(slice(None, None, 3),)),
    Case(np.pad, args=(1,)),
    Case(np.pad, args=(((1, 2), (0, 3)),), kwargs=dict(constant_values=5.0)),
    Case(np.pad, args=(2,), kwargs=dict(mode="edge")),
    Case(np.pad, args=(((2, 1), (3, 3)), "reflect")),
    Case(np.pad, args=(2,), kwargs=dict(mode="symmetric")),
    Case(np.pad, args=(5,), kwargs=dict(mode="wrap")),
    Case(np.pad, shapes=((5,),), args=((1, 7),), kwargs=dict(mode="reflect"), dtype=np.float32),
    # padding computed from the array: ramps, statistics, odd reflection
    Case(np.pad, args=(((2, 1), (0, 3)), "linear_ramp")),
    Case(np.pad, shapes=((4,),), args=((3, 9), "linear_ramp"), kwargs=dict(end_values=(1.5, -2))),
    Case(np.pad, args=(2, "mean")),
    Case(np.pad, args=(((1, 3), (2, 0)), "mean"), kwargs=dict(stat_length=((1, 2), (3, 2)))),
    Case(np.pad, args=(((1, 2), (2, 1)), "maximum"), kwargs=dict(stat_length=2)),
    Case(np.pad, args=(2, "minimum")),
    Case(np.pad, args=(((2, 1), (1, 2)), "median"), kwargs=dict(stat_length=(2, 3))),
    Case(np.pad, args=(((2, 1), (3, 8)), "reflect"), kwargs=dict(reflect_type="odd")),
    Case(np.pad, args=(((5, 1), (1, 7)), "symmetric"), kwargs=dict(reflect_type="odd")),
    Case(np.pad, shapes=((1, 4),), args=(2, "reflect"), kwargs=dict(reflect_type="odd")),
    # triangles and diagonals
    Case(np.triu),
    Case(np.triu, args=(1,)),
    Case(np.tril, kwargs=dict(k=-1)),
    Case(np.tril, shapes=((2, 3, 3),)),
    Case(np.diag, shapes=((4,),)),
    Case(np.diag, shapes=((4,),), args=(-2,)),
    Case(squared(np.diag)),
    Case(squared(np.diag), args=(2,)),
    Case(squared(np.diag), args=(-1,)),
    Case(squared(np.diagonal)),
    Case(squared(np.diagonal), shapes=((2, 3, 4),), args=(1, 1, 2)),
    Case(squared(np.linalg.diagonal), shapes=((2, 3, 4),), kwargs=dict(offset=-1)),
    Case(squared(np.diagonal), shapes=((2, 3, 4),), kwargs=dict(offset=-1, axis1=2, axis2=0)),
    Case(lambda x: x.diagonal(1) ** 2, name="diagonal"),
    # selection
    Case(lambda x, y: np.where(x > 0, x, y), shapes=((3, 4), (3, 4)), name="where"),
    Case(lambda x, y: np.where(x > 0, y, 2.0), shapes=((3, 4), (4,)), name="where"),
    Case(lambda c, x, y: np.where(c > 0, x * x, y), shapes=((3, 1), (1, 4), (3, 4)), name="where"),
    Case(lambda x: x[np.where(x > 0)] ** 2, name="where"),
    Case(np.clip, args=(-0.5, 0.5)),
    Case(np.clip, args=(None, 0.3)),
    Case(np.clip, kwargs=dict(min=-0.2)),
    Case(np.clip, kwargs=dict(a_min=-0.2, a_max=0.1)),
    Case(lambda x, lower, upper: np.clip(x, lower, upper + 1.0), shapes=((3, 4), (3, 1), (4,)), name="clip"),
    Case(lambda x, lower: x.clip(lower, 0.5), shapes=((3, 4), (4,)), name="clip"),
    Case(lambda x, lower: np.clip(x, lower, lower - 1.0), shapes=((3, 4), (4,)), name="clip_inverted_bounds"),
    Case(np.clip, args=(-0.5, 0.5), dtype=np.float32),
    # where=: written into out only where the mask is true, out keeping its values elsewhere
    Case(lambda x, y: np.clip(x, -0.5, 0.5, out=y * 1.0, where=x > 0), shapes=((3, 4), (3, 4)), name="clip_where_into_out"),
    Case(lambda x, lower, y: x.clip(lower, None, y * 2.0, where=[[True], [False], [True]]), shapes=((3, 4), (4,), (3, 4)), name="clip_where_into_out"),
    # no-copy functions
    Case(squared(np.atleast_1d), shapes=((),)),
    Case(squared(np.atleast_2d), shapes=((4,),)),
    Case(squared(np.atleast_3d), shapes=((3, 4),)),
    Case(squared(np.atleast_1d)),
    Case(lambda x, y: np.atleast_2d(x, y)[0] * np.atleast_2d(x, y)[1], shapes=((4,), (1, 4)), name="atleast_2d"),
    Case(lambda x, y: np.atleast_3d(x, y)[1] ** 2, shapes=((4,), (3, 4)), name="atleast_3d"),
    Case(squared(np.real)),
    # views mutated after they were made, results written into traced buffers
    Case(mutate_transposed_view),
    Case(mutate_reshaped_view),
    Case(mutate_permuted_view, shapes=((2, 3, 4),)),
    Case(mutate_moved_and_swapped_views, shapes=((2, 3, 4),)),
    Case(mutate_squeezed_and_expanded_views),
    Case(mutate_flipped_view),
    Case(mutate_split_pieces, shapes=((4, 3),)),
    Case(mutate_atleast_and_real_views, shapes=((4,),)),
    Case(flip_into_slice, shapes=((5,), (5,))),
    Case(flip_into_slice, shapes=((3, 4), (3, 4))),
    Case(concatenate_into_out, shapes=((2, 4), (4, 4))),
    Case(stack_into_out, shapes=((3, 4), (3, 4))),
    Case(where_into_a_column, shapes=((3, 4), (3, 4))),
    Case(clip_over_own_input),
    Case(clip_over_own_input_where),
    Case(roll_over_own_input),
    Case(tile_into_a_fresh_buffer),
    Case(pad_into_a_slice, shapes=((2, 3), (3, 4))),
    Case(broadcast_then_accumulate, shapes=((3, 4), (4,))),
    Case(triangle_of_an_updated_matrix, shapes=((3, 3),)),
    Case(diagonal_written_back, shapes=((3, 4),)),
    Case(mutate_transposed_view, dtype=np.float32),
    Case(flip_into_slice, shapes=((3, 4), (3, 4)), dtype=np.float32),
]
# fmt: on


@pytest.mark.parametrize("policy", POLICIES)
@pytest.mark.parametrize("case", CASES, ids=case_id)
def test_shape_gradient(case, policy, rng):
    mutad.check_grads(case, *case.sample(rng), policy=policy)


@pytest.mark.parametrize(("case", "policy"), under_alternating_policies(CASES, POLICIES))
def test_shape_second_derivatives(case, policy, rng):
    # Nested reverse mode: the pullbacks build their cotangents from traced ones (gathers with
    # np.add.at into traced zeros, diagonals written into traced zeros).
    mutad.check_grads(curved(case), *case.sample(rng), policy=policy, order=2)


# Complex arrays: every shape function declared complex-capable, its views mutated, its results
# written into traced complex buffers, and views of the real and imaginary parts --------------


def mutate_parts_and_complex_views(x):
    tail = x[1:]
    np.atleast_1d(tail)[0] *= 2.0 - 1.0j
    np.real(tail)[...] += x.imag[:-1]
    x.imag[0] = np.abs(x[-1])
    np.imag(np.flip(x))[0] *= 3.0
    return x * x


def where_on_real_parts(x, y):
    x[:, 0] = np.where(x[:, 1].real > 0, x[:, 2], y[:, 0])
    return x * y


def real_and_complex_joined(x, r):
    z = np.concatenate([x, r])
    z[1:] *= np.stack([x.real, x.imag], axis=0).reshape(-1)[: z.size - 1]
    return z


C = COMPLEX
# fmt: off
COMPLEX_CASES = [
    Case(squared(np.reshape), args=((4, 3),), **C),
    Case(of_transposed(squared(np.reshape)), args=((2, 6),), kwargs=dict(order="A"), **C),
    Case(squared(np.ravel), **C),
    Case(of_transposed(squared(np.ravel)), kwargs=dict(order="K"), **C),
    Case(squared(np.squeeze), shapes=((3, 1, 4),), **C),
    Case(squared(np.expand_dims), kwargs=dict(axis=(0, 2)), **C),
    Case(squared(np.transpose), shapes=((2, 3, 4),), args=((2, 0, -2),), **C),
    Case(squared(np.matrix_transpose), shapes=((2, 3, 4),), **C),
    Case(squared(np.linalg.matrix_transpose), shapes=((2, 3, 4),), **C),
    Case(squared(np.swapaxes), shapes=((2, 3, 4),), args=(0, -1), **C),
    Case(squared(np.moveaxis), shapes=((2, 3, 4),), args=((0, 1), (-1, 0)), **C),
    Case(squared(np.rollaxis), shapes=((2, 3, 4),), args=(2,), **C),
    Case(lambda x: (x.T ** 2).T + x.mT.T + x.reshape(4, 3).T.ravel().reshape(3, 4), name="methods", **C),
    Case(squared(np.flip), shapes=((2, 3, 4),), kwargs=dict(axis=(0, 2)), **C),
    Case(squared(np.fliplr), **C),
    Case(squared(np.flipud), **C),
    Case(squared(np.rot90), **C),
    Case(np.roll, args=((1, -2), (0, 1)), **C),
    Case(lambda x, y: np.concatenate([x, y, x]), shapes=((2, 4), (3, 4)), name="concatenate", **C),
    Case(lambda x, y: np.stack((x, y, x), 1), shapes=((3, 4), (3, 4)), name="stack", **C),
    Case(lambda x, y: np.hstack([x, y]), shapes=((3, 2), (3, 4)), name="hstack", **C),
    Case(lambda x, y: np.vstack([x, y]), shapes=((3, 4), (4,)), name="vstack", **C),
    Case(lambda x, y: np.dstack([x, y]), shapes=((3, 4), (3, 4)), name="dstack", **C),
    Case(lambda x, y: np.column_stack([x, y]), shapes=((3,), (3, 2)), name="column_stack", **C),
    Case(lambda x, y: np.append(x, y, axis=0), shapes=((3, 4), (2, 4)), name="append", **C),
    Case.named("real_and_complex_joined", real_and_complex_joined,
               arguments(complex_normal(4), normal(3))),
    Case(piece(np.split, 1), args=(2,), kwargs=dict(axis=1), **C),
    Case(piece(np.array_split, 1), shapes=((5, 2),), args=(2,), **C),
    Case(piece(np.hsplit, 1), args=([1],), **C),
    Case(piece(np.vsplit, 2), args=(3,), **C),
    Case(piece(np.dsplit, 0), shapes=((2, 3, 4),), args=(2,), **C),
    Case(piece(np.unstack, 2), kwargs=dict(axis=1), **C),
    Case(squared(np.broadcast_to), shapes=((3, 1),), args=((2, 3, 4),), **C),
    Case(first_and_second(np.broadcast_arrays), shapes=((3, 1), (1, 4)), **C),
    Case(np.tile, shapes=((2, 3, 1),), args=((2, 2),), **C),
    Case(np.repeat, args=([0, 2, 1, 3],), kwargs=dict(axis=1), **C),
    Case(np.delete, args=([0, 2],), kwargs=dict(axis=1), **C),
    Case(np.pad, args=(((1, 2), (0, 3)),), kwargs=dict(constant_values=5.0 - 1.0j), **C),
    Case(np.pad, args=(2,), kwargs=dict(mode="edge"), **C),
    Case(np.pad, args=(((2, 1), (3, 3)), "reflect"), **C),
    Case(np.pad, args=(2,), kwargs=dict(mode="symmetric"), **C),
    Case(np.pad, args=(5,), kwargs=dict(mode="wrap"), **C),
    Case(np.pad, args=(((2, 1), (0, 3)), "linear_ramp"), kwargs=dict(end_values=1j), **C),
    Case(np.pad, args=(((1, 3), (2, 0)), "mean"), kwargs=dict(stat_length=2), **C),
    Case(np.pad, args=(((2, 1), (3, 8)), "symmetric"), kwargs=dict(reflect_type="odd"), **C),
    Case(np.triu, args=(1,), **C),
    Case(np.tril, shapes=((2, 3, 3),), **C),
    Case(np.diag, shapes=((4,),), args=(-2,), **C),
    Case(squared(np.diag), args=(2,), **C),
    Case(squared(np.diagonal), shapes=((2, 3, 4),), kwargs=dict(offset=-1, axis1=2, axis2=0), **C),
    Case(squared(np.linalg.diagonal), shapes=((2, 3, 4),), kwargs=dict(offset=1), **C),
    Case(lambda x, y: np.where(x.real > 0, x, y), shapes=((3, 4), (3, 4)), name="where", **C),
    Case(lambda x: x[np.where(x.imag > 0)] ** 2, name="where", **C),
    Case(squared(np.atleast_1d), shapes=((),), **C),
    Case(squared(np.atleast_2d), shapes=((4,),), **C),
    Case(squared(np.atleast_3d), shapes=((3, 4),), **C),
    Case(squared(np.real), **C),
    Case(squared(np.imag), **C),
    Case(lambda x: x.real * x.imag + x.T.imag.T, name="parts", **C),
    Case(mutate_transposed_view, **C),
    Case(mutate_reshaped_view, **C),
    Case(mutate_permuted_view, shapes=((2, 3, 4),), **C),
    Case(mutate_moved_and_swapped_views, shapes=((2, 3, 4),), **C),
    Case(mutate_squeezed_and_expanded_views, **C),
    Case(mutate_flipped_view, **C),
    Case(mutate_split_pieces, shapes=((4, 3),), **C),
    Case(mutate_parts_and_complex_views, shapes=((4,),), **C),
    Case(flip_into_slice, shapes=((3, 4), (3, 4)), **C),
    Case(concatenate_into_out, shapes=((2, 4), (4, 4)), **C),
    Case(stack_into_out, shapes=((3, 4), (3, 4)), **C),
    Case(where_on_real_parts, shapes=((3, 4), (3, 4)), **C),
    Case(roll_over_own_input, **C),
    Case(tile_into_a_fresh_buffer, **C),
    Case(pad_into_a_slice, shapes=((2, 3), (3, 4)), **C),
    Case(broadcast_then_accumulate, shapes=((3, 4), (4,)), **C),
    Case(triangle_of_an_updated_matrix, shapes=((3, 3),), **C),
    Case(diagonal_written_back, shapes=((3, 4),), **C),
]
# fmt: on


@pytest.mark.parametrize("policy", POLICIES)
@pytest.mark.parametrize("case", COMPLEX_CASES, ids=case_id)
def test_complex_shape_gradient(case, policy, rng):
    check_complex(case, case.sample(rng), policy)


@pytest.mark.parametrize(("case", "policy"), under_alternating_policies(COMPLEX_CASES, POLICIES))
def test_complex_shape_second_derivatives(case, policy, rng):
    check_complex(case, case.sample(rng), policy, order=2)


# Each linear rule's pullback is its transpose: <dy, f(x)> = <back(dy), x>. This also checks the
# pullbacks of functions that always return views, which the gradient checks never run.
# fmt: off
LINEAR_CASES = [
    (np.reshape, (3, 4), ((2, 6),), {}),
    (np.reshape, (3, 4), ((2, 6),), dict(order="F")),
    (np.ravel, (3, 4), (), dict(order="F")),
    (np.squeeze, (3, 1, 4), (), {}),
    (np.expand_dims, (3, 4), (1,), {}),
    (np.transpose, (2, 3, 4), ((1, -1, 0),), {}),
    (np.matrix_transpose, (2, 3, 4), (), {}),
    (np.linalg.matrix_transpose, (2, 3, 4), (), {}),
    (np.swapaxes, (2, 3, 4), (0, 2), {}),
    (np.moveaxis, (2, 3, 4), ((0, 1), (2, 0)), {}),
    (np.rollaxis, (2, 3, 4), (2, 1), {}),
    (np.flip, (2, 3, 4), (), dict(axis=1)),
    (np.fliplr, (3, 4), (), {}),
    (np.flipud, (3, 4), (), {}),
    (np.rot90, (2, 3, 4), (3, (1, 2)), {}),
    (np.rot90, (3, 4), (), {}),
    (np.roll, (3, 4), ((2, -1), (0, 1)), {}),
    (np.broadcast_to, (3, 1), ((2, 3, 5),), {}),
    (np.tile, (2, 3), ((2, 1, 2),), {}),
    (np.repeat, (3, 4), ([1, 0, 2],), dict(axis=0)),
    (np.delete, (3, 4), (1,), dict(axis=1)),
    (np.pad, (3, 4), (((1, 2), (3, 0)),), dict(mode="symmetric")),
    (np.triu, (4, 3), (-1,), {}),
    (np.tril, (4, 3), (), {}),
    (np.diagonal, (3, 4, 5), (-1, 2, 0), {}),
    (np.linalg.diagonal, (3, 4, 5), (), dict(offset=2)),
    (np.diag, (3, 5), (2,), {}),
    (np.diag, (4,), (-1,), {}),
    (np.real, (3, 4), (), {}),
]
# fmt: on


@pytest.mark.parametrize("func, shape, args, kwargs", LINEAR_CASES,
                         ids=[f"{case[0].__name__}-{case[1]}" for case in LINEAR_CASES])
def test_linear_pullback_is_the_transpose(func, shape, args, kwargs, rng):
    x = rng.standard_normal(shape)
    y, back = RULES[func].reverse(x, *args, **kwargs)
    dy = rng.standard_normal(np.shape(y))
    cotangents = back(dy)
    assert len(cotangents) == 1 + len(args)
    np.testing.assert_allclose(np.vdot(cotangents[0], x), np.vdot(dy, y), rtol=1e-12)


@pytest.mark.parametrize("func, shape, args, kwargs", LINEAR_CASES,
                         ids=[f"{case[0].__name__}-{case[1]}" for case in LINEAR_CASES])
def test_linear_pullback_runs_on_traced_cotangents(func, shape, args, kwargs, rng):
    # Under nested reverse mode a pullback receives a cotangent an outer gradient traces: the
    # gradient of <back(dy), x> with respect to dy is then y = f(x), the transpose's transpose.
    x = rng.standard_normal(shape)
    y, back = RULES[func].reverse(x, *args, **kwargs)
    dy = rng.standard_normal(np.shape(y))
    (through_back,) = mutad.gradient(lambda d: (back(d)[0] * x).sum(), dy)
    np.testing.assert_allclose(through_back, y, rtol=1e-12)


def test_where_with_one_argument_has_no_gradient():
    def f(x):
        rows, columns = np.where(x > 0)
        assert isinstance(rows, np.ndarray) and rows.dtype.kind == "i"
        return (x[rows, columns] ** 2).sum()

    x = np.array([[1.0, -2.0], [3.0, 0.0]])
    np.testing.assert_array_equal(mutad.gradient(f, x)[0], [[2.0, 0.0], [6.0, 0.0]])


def test_clip_at_a_bound_passes_the_gradient_to_the_clipped_array():
    x = np.array([-1.0, 0.0, 0.5, 1.0, 2.0])
    np.testing.assert_array_equal(mutad.gradient(lambda x: np.clip(x, 0.0, 1.0).sum(), x)[0],
                                  [0.0, 1.0, 1.0, 1.0, 0.0])


def test_views_share_memory_as_numpy_returns_them():
    def f(x):
        assert np.shares_memory(np.real(x).value, x.value)
        assert np.shares_memory(np.atleast_1d(x).value, x.value)
        assert np.shares_memory(np.broadcast_arrays(x, x[0])[0].value, x.value)
        return x.sum()

    mutad.gradient(f, np.ones((2, 3)))


PAD_MODES_THAT_COMPUTE = [
    dict(mode="linear_ramp"), dict(mode="linear_ramp", end_values=((1, -2), (0.5, 3))),
    dict(mode="mean"), dict(mode="mean", stat_length=((1, 3), (2, 1))),
    dict(mode="maximum", stat_length=2), dict(mode="minimum"), dict(mode="median"),
    dict(mode="median", stat_length=(2, 3)), dict(mode="reflect", reflect_type="odd"),
    dict(mode="symmetric", reflect_type="odd")]


@pytest.mark.parametrize("kwargs", PAD_MODES_THAT_COMPUTE, ids=str)
def test_pad_modes_that_compute_values_give_numpys_bits_in_every_mode(kwargs, rng):
    # float32 ramps: np.linspace's rounding depends on how the end value is typed (NumPy's
    # np.int64(0), not Python's 0); widths past the array's length reflect several times
    x = rng.standard_normal((3, 4)).astype(np.float32)
    numpys_bits_in_every_mode(lambda x: np.pad(x, ((2, 7), (9, 1)), **kwargs), x)
    w = rng.standard_normal(np.pad(x, ((2, 7), (9, 1)), **kwargs).shape)

    def loss(x):
        return (np.pad(x, ((2, 7), (9, 1)), **kwargs) * w).sum()

    x = x.astype(np.float64)
    mutad.check_grads(loss, x, modes=("rev", "fwd"))
    replays_as_traced(loss, [(x,), (rng.standard_normal((3, 4)),)])


def test_linear_ramps_to_traced_end_values(rng):
    """end_values differentiated, of a traced array or of one made in the function (which
    NumPy's protocols do not reach: mutad's composition runs for it too)."""
    def ramps(x):
        made = np.pad(np.ones((2, 3)), ((1, 2), (3, 1)), "linear_ramp", end_values=x[0])
        traced = np.pad(x[1:] * 2.0, (2, 5), "linear_ramp", end_values=(x[0], x[1]))
        return (np.sin(made)).sum() + (np.cos(traced) * np.arange(traced.size)).sum()

    x = rng.standard_normal(5)
    before = x.tobytes()
    assert np.asarray(mutad.value_and_grad(ramps)(x)[0]).tobytes() == np.asarray(
        ramps(x.copy())).tobytes()
    mutad.check_grads(ramps, x, modes=("rev", "fwd"))
    replays_as_traced(ramps, [(x,), (rng.standard_normal(5),)])
    assert x.tobytes() == before


@pytest.mark.parametrize("widths", [{1: 2}, {0: (1, 3)}, {-1: (2, 0), 0: 1}], ids=str)
def test_pad_widths_by_axis_for_modes_that_compute(widths, rng):
    weights = rng.standard_normal(np.pad(np.zeros((3, 4)), widths).shape)

    def f(x):
        return (np.pad(x, widths, "median") * weights).sum()

    x = rng.standard_normal((3, 4))
    assert np.asarray(mutad.value_and_grad(f)(x)[0]).tobytes() == np.asarray(f(x.copy())).tobytes()
    mutad.check_grads(f, x, modes=("rev", "fwd"))


def _padded_with(vector, pad_width, axis, kwargs):
    """A padding function as NumPy's documentation writes one: it fills the ends of each line
    in place, here from the line's own first and last values."""
    vector[:pad_width[0]] = kwargs.get("scale", 2.0) * vector[pad_width[0]]
    if pad_width[1]:
        vector[-pad_width[1]:] = vector[-pad_width[1] - 1] ** 2


@pytest.mark.parametrize("widths", [2, ((1, 0), (2, 3))], ids=str)
def test_pad_with_a_function_runs_it_on_each_line_as_numpy_does(widths, rng):
    # a callable mode was a ValueError on traced arrays
    weights = rng.standard_normal(np.pad(np.zeros((3, 4)), widths).shape)

    def f(x):
        return (np.pad(x, widths, _padded_with, scale=1.5) * weights).sum()

    x = rng.standard_normal((3, 4))
    before = x.tobytes()
    assert np.asarray(mutad.value_and_grad(f)(x)[0]).tobytes() == np.asarray(f(x.copy())).tobytes()
    mutad.check_grads(f, x, modes=("rev", "fwd"))
    replays_as_traced(f, [(x,), (rng.standard_normal((3, 4)),)])
    assert x.tobytes() == before


def test_pad_refuses_as_numpy_does():
    with pytest.raises(ValueError, match="stat_length of 0"):
        mutad.gradient(lambda x: np.pad(x, 1, "maximum", stat_length=0).sum(), np.ones(3))
    with pytest.raises(ValueError, match="empty axis"):
        mutad.gradient(lambda x: np.pad(x, 1, "mean").sum(), np.ones((0, 2)))


# Decisions: where clip took a bound is decided when it runs ----------------------------------

from decisions import check_decision_kept, then_disturbed  # noqa: E402

AT_BOUNDS = np.array([0.7, 0.2, 0.4, -0.3, 0.8])
"""0.7 comes back from inverting ``decisions.disturb`` a little below, 0.2 a little above."""


@pytest.mark.parametrize(("operation", "differentiable"), [
    (lambda x: np.clip(x, 0.7, 1.0), False),           # at the lower bound
    (lambda x: np.clip(x, -1.0, 0.2), False),          # at the upper bound
    (lambda x: np.clip(x, 0.2, 0.7), False),           # at both
    (lambda x: x.clip(0.25, 0.75), True),
    (lambda x: np.clip(x[:4], x[1], x[0]), False),     # traced bounds equal to elements
    (lambda x: np.clip(x, 0.7, None), False),
    (lambda x: np.clip(x, None, 0.2), False),
], ids=["lower", "upper", "both", "inside", "traced-bounds", "lower-only", "upper-only"])
def test_clip_decisions_survive_restoration_by_inversion(operation, differentiable):
    check_decision_kept(then_disturbed(operation), AT_BOUNDS, differentiable=differentiable)

# ----------------------------------------------------------------------------------------------
# Forward rules, called directly: the tangent against finite differences, and the transpose of
# the reverse rule (rule_checks.check_forward_rule)

COLUMN = normal_array(3, 1, 4)
X4 = normal_array(4, 4)
BELOW, ABOVE = -0.5 + 0.1 * normal_array(3, 4), 0.5 + 0.1 * normal_array(3, 4)
CROSSED = np.where(WHERE, ABOVE, -ABOVE)
# Values kept 0.01 away from the bounds, so the finite differences see no kink.
CLIPPED = np.where(np.abs(np.abs(X) - 0.5) < 0.01, 0.3, X)

SHAPE = [
    rule_case(np.reshape, X, (4, 3)),
    rule_case(np.reshape, X, (2, 6), order="F"),
    rule_case(np.reshape, XF, (12,), order="A"),
    rule_case(np.squeeze, COLUMN),
    rule_case(np.squeeze, COLUMN, axis=1),
    rule_case(np.expand_dims, X, 1),
    rule_case(np.transpose, X3),
    rule_case(np.transpose, X3, (1, 0, 2)),
    rule_case(np.matrix_transpose, X3),
    rule_case(np.linalg.matrix_transpose, X3),
    rule_case(np.swapaxes, X3, 0, 2),
    rule_case(np.moveaxis, X3, 0, -1),
    rule_case(np.rollaxis, X3, 2),
    rule_case(np.flip, X),
    rule_case(np.flip, X3, 1),
    rule_case(np.fliplr, X),
    rule_case(np.flipud, X),
    rule_case(np.rot90, X),
    rule_case(np.rot90, X3, 3, (1, 2)),
    rule_case(np.roll, X, 2),
    rule_case(np.roll, X, -1, 1),
    rule_case(np.broadcast_to, V4, (3, 4)),
    rule_case(np.tile, V, (2, 2)),
    rule_case(np.repeat, X, 2),
    rule_case(np.repeat, X, [1, 2, 0], axis=0),
    rule_case(np.delete, X, 1, 1),
    rule_case(np.delete, X, [0, 2]),
    rule_case(np.triu, X),
    rule_case(np.tril, X3, -1),
    rule_case(np.diagonal, X3, 1, 1, 2),
    rule_case(np.linalg.diagonal, X3),
    rule_case(np.diag, V),
    rule_case(np.diag, X, 1),
    rule_case(np.real, X),
    rule_case(np.ravel, X),
    rule_case(np.ravel, X, "F"),
    rule_case(np.ravel, XF, order="K"),
    rule_case(np.ravel, XF, order="A"),
    rule_case(np.ravel, X3.transpose(2, 0, 1), order="K"),
    rule_case(np.pad, X, 2),
    rule_case(np.pad, X, ((1, 0), (2, 1)), constant_values=2.5),
    rule_case(np.pad, X, 1, "edge"),
    rule_case(np.pad, X, (2, 1), "reflect"),
    rule_case(np.pad, X, 2, "symmetric"),
    rule_case(np.pad, V, 3, "wrap"),
    rule_case(np.concatenate, [X, normal_array(2, 4)]),
    rule_case(np.concatenate, [X, Const(normal_array(3, 2))], 1),
    rule_case(np.concatenate, (X, V4), axis=None),
    rule_case(np.stack, [V4, V4 + 1]),
    rule_case(np.stack, [X, Const(X)], axis=2),
    rule_case(np.hstack, [X, Const(normal_array(3, 1))]),
    rule_case(np.hstack, [V, V4]),
    rule_case(np.vstack, [X, V4]),
    rule_case(np.dstack, [X, X]),
    rule_case(np.column_stack, [V4, X.T]),
    rule_case(np.append, X, V4),
    rule_case(np.append, X, X, axis=0),
    rule_case(np.append, X, 5.0),
    rule_case(np.append, Const(X), V4),
    rule_case(np.split, X, 2, 1),
    rule_case(np.split, V, [1, 4]),
    rule_case(np.array_split, V, 3),
    rule_case(np.hsplit, X, 2),
    rule_case(np.vsplit, X4, [1]),
    rule_case(np.dsplit, X3, 2),
    rule_case(np.atleast_1d, np.array(1.5)),
    rule_case(np.atleast_1d, np.array(1.5), V, Const(X)),
    rule_case(np.atleast_2d, V),
    rule_case(np.atleast_3d, X),
    rule_case(np.atleast_3d, X3, V),
    rule_case(np.broadcast_arrays, V4, X),
    rule_case(np.broadcast_arrays, X, X.copy()),
    rule_case(np.broadcast_arrays, Const(V4), X3),
    rule_case(np.where, WHERE, X, normal_array(3, 4)),
    rule_case(np.where, WHERE, X, 2.0),
    rule_case(np.where, WHERE, Const(normal_array(3, 4)), V4),
    rule_case(np.clip, CLIPPED, -0.5, 0.5),
    rule_case(np.clip, CLIPPED, -0.5, None),
    rule_case(np.clip, CLIPPED, None, 0.5),
    rule_case(np.clip, X, BELOW, ABOVE),
    rule_case(np.clip, X, Const(BELOW), ABOVE),
    rule_case(np.clip, X, CROSSED, BELOW),
    rule_case(np.clip, CLIPPED, min=-0.5, max=0.5),
    rule_case(np.clip, np.array([-1.0, -0.5, 0.0, 0.5, 1.0]), -0.5, 0.5, fd=False),  # at the bounds
]
if hasattr(np, "unstack"):
    SHAPE.append(rule_case(np.unstack, X3, axis=1))


@pytest.mark.filterwarnings("ignore::RuntimeWarning")  # NaN arguments are cases here
@pytest.mark.parametrize("case", SHAPE, ids=case_id)
def test_forward_rule_shape(case, rng):
    check_forward_rule(case, rng)


def test_views_have_views_of_the_tangent_as_tangents():
    """Where NumPy returns a view of the argument, the tangent is the same view of its tangent."""
    t = np.empty_like(XF)
    for key, settings in [(np.reshape, ((12,), "A")), (np.ravel, ("K",)), (np.transpose, ()),
                          (np.real, ()), (np.squeeze, ())]:
        y, dy = RULES[key].forward((t,), XF, *settings)
        assert np.shares_memory(y, XF) and np.shares_memory(dy, t)
        assert dy.strides == y.strides
    y, dy = RULES[np.split].forward((t,), XF, 2, 1)
    assert all(np.shares_memory(d, t) for d in dy)
    ys, dys = RULES[np.broadcast_arrays].forward((t, t), XF, XF)
    assert ys[0] is XF and dys[0] is t


def test_clip_at_a_bound_passes_the_argument_tangent():
    a = np.array([-1.0, -0.5, 0.0, 0.5, 1.0])
    t, lower, upper = np.ones(5), np.full(5, 10.0), np.full(5, 100.0)
    _, dy = RULES[np.clip].forward((t, lower, upper), a, -0.5, 0.5)
    np.testing.assert_array_equal(dy, [10.0, 1.0, 1.0, 1.0, 100.0])


def test_constant_padding_and_constant_operands_have_zero_tangents():
    t = np.ones(2)
    _, dy = RULES[np.pad].forward((t, None), np.zeros(2), 1, constant_values=7.0)
    np.testing.assert_array_equal(dy, [0.0, 1.0, 1.0, 0.0])
    _, dy = RULES[np.concatenate].forward(([t, None],), [np.zeros(2), np.full(2, 3.0)])
    np.testing.assert_array_equal(dy, [1.0, 1.0, 0.0, 0.0])


def test_forward_rule_of_pad_modes_that_compute_values_is_refused():
    from mutad.errors import UnsupportedOperationError

    with pytest.raises(UnsupportedOperationError, match="mean"):
        RULES[np.pad].forward((np.ones(3), None), np.ones(3), 1, "mean")


JOINED_INTO_AN_INPUT = {
    "rotate": lambda x: np.concatenate([x[1:], x[:1]], out=x),
    "axis 1": lambda x: np.concatenate([x.reshape(2, 3)[:, 1:], x.reshape(2, 3)[:, :1]],
                                       axis=1, out=x.reshape(2, 3)),
    "stack rows": lambda x: np.stack([x.reshape(2, 3)[1], x.reshape(2, 3)[0]],
                                     out=x.reshape(2, 3)),
    "stack axis 1": lambda x: np.stack([x[3:], x[:3]], axis=1, out=x.reshape(3, 2)),
}


def test_flattening_join_into_an_input_is_refused():
    """axis=None: NumPy copies each array element by element as it flattens it into out, so
    an array overlapping out reads what the copy wrote (a reversed view comes out mirrored)."""
    def f(x):
        np.concatenate([x.reshape(2, 3)[::-1]], axis=None, out=x)
        return x.sum()

    with pytest.raises(mutad.errors.UnsupportedOperationError, match="axis=None"):
        mutad.gradient(f, np.arange(6.0))


@pytest.mark.parametrize("name", JOINED_INTO_AN_INPUT)
def test_joining_into_an_input_copies_in_order_as_numpy(name):
    """NumPy copies the arrays into out one after another: a later one reads what an earlier
    copy wrote. Values bit for bit, gradients in both modes, replayed."""
    join = JOINED_INTO_AN_INPUT[name]

    def f(x):
        join(x)
        return (x * np.arange(1.0, 7.0)).sum() + (x * x).sum()

    x = np.linspace(0.5, 3.0, 6)
    assert mutad.value_and_grad(f)(x)[0] == f(x.copy())
    mutad.check_grads(f, x, order=2)
    replaying = mutad.grad(f, replay=True)
    for scale in (1.0, 2.0, -1.0):
        assert replaying(x * scale).tobytes() == mutad.grad(f)(x * scale).tobytes()
