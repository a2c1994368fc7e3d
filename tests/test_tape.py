"""The tape with a toy value type: it must work without knowing anything about arrays."""

import ast
from pathlib import Path

import pytest

import mutad
from mutad.core.tape import Record, Tape, Write


class Cell:
    """A mutable scalar: the smallest thing that can be overwritten in place."""

    def __init__(self, value):
        self.value = value


class Program:
    """Records toy in-place operations on cells, with shadows in a dict keyed by identity."""

    def __init__(self, policy):
        self.tape = Tape(policy)
        self.log = []

    def add_(self, a, b):
        """a += b: invertible unless a and b are the same cell."""
        undo = self.tape.undo_for(lambda: self._sub(a, b), lambda: a is not b,
                                  lambda: self._checkpoint(a))
        self.tape.before_write(id(a))
        a.value += b.value

        def pullback(record, shadows, _):
            self.log.append(("add", a.value))
            shadows[id(b)] = shadows.get(id(b), 0.0) + shadows.get(id(a), 0.0)

        self.tape.record(Write("add", [id(a), id(b)], None, None, None, pullback, id(a), undo,
                               None))

    def scale_(self, a, s):
        """a *= s, s a constant: the inverse divides, unsafe for s == 0."""
        undo = self.tape.undo_for(lambda: self._div(a, s), lambda: s != 0,
                                  lambda: self._checkpoint(a))
        self.tape.before_write(id(a))
        a.value *= s

        def pullback(record, shadows, _):
            self.log.append(("scale", a.value))
            shadows[id(a)] = shadows.get(id(a), 0.0) * s

        self.tape.record(Write("scale", [id(a), s], None, None, None, pullback, id(a), undo,
                               None))

    def _sub(self, a, b):
        a.value -= b.value
        self.log.append(("restored", a.value))

    def _div(self, a, s):
        a.value /= s
        self.log.append(("restored", a.value))

    def _checkpoint(self, a):
        saved = a.value
        self.log.append(("checkpointed", saved))

        def copy_back():
            a.value = saved

        return copy_back


def run(policy):
    a, b = Cell(2.0), Cell(3.0)
    program = Program(policy)
    program.add_(a, b)      # a = 5
    program.scale_(a, 4.0)  # a = 20
    program.scale_(a, 0.0)  # a = 0: not invertible
    program.add_(a, b)      # a = 3
    shadows = {id(a): 1.0}
    program.tape.replay(shadows)
    return a, b, shadows, program


def test_replay_runs_newest_first_and_restores_each_record():
    a, b, shadows, program = run("restore")
    pullbacks = [entry for entry in program.log if entry[0] in ("add", "scale")]
    # Each pullback sees the value its record read: 0 (before the last add), 20, 5, 2.
    assert pullbacks == [("add", 0.0), ("scale", 20.0), ("scale", 5.0), ("add", 2.0)]
    assert (a.value, b.value) == (2.0, 3.0)
    assert program.tape.records == []


def test_restore_policy_inverts_where_safe_and_checkpoints_elsewhere():
    *_, program = run("restore")
    kinds = [entry[0] for entry in program.log if entry[0] in ("restored", "checkpointed")]
    assert kinds.count("checkpointed") == 1  # only a *= 0 could not be inverted
    assert kinds.count("restored") == 3


def test_checkpoint_policy_never_inverts_and_gives_the_same_gradient():
    a1, b1, restore_shadows, _ = run("restore")
    a2, b2, checkpoint_shadows, program = run("checkpoint")
    assert not any(entry[0] == "restored" for entry in program.log)
    # d a_final / d b = 1 (the last add; the scale by 0 cuts everything before it)
    assert restore_shadows[id(b1)] == checkpoint_shadows[id(b2)] == 1.0


def test_guard_runs_once_before_the_first_write():
    saved = []
    tape = Tape()
    tape.guard("x", lambda: saved.append("x"))
    tape.before_write("y")
    assert saved == []
    tape.before_write("x")
    tape.before_write("x")
    assert saved == ["x"]


def test_unknown_policy_is_a_mutad_error():
    # The API checks the policy; the tape takes the one it is given.
    with pytest.raises(mutad.errors.PolicyError, match="policy"):
        mutad.gradient(lambda x: x * 2.0, 1.0, policy="fast")


def test_tape_module_imports_no_numpy_and_nothing_of_mutad():
    tree = ast.parse(Path(mutad.core.tape.__file__).read_text())
    imported = {alias.name.split(".")[0] for node in ast.walk(tree)
                if isinstance(node, ast.Import) for alias in node.names}
    imported |= {"." if node.level else node.module.split(".")[0] for node in ast.walk(tree)
                 if isinstance(node, ast.ImportFrom)}
    assert not imported & {"numpy", "mutad", "."}


@pytest.mark.slow
def test_a_million_records_replay_without_recursion():
    tape = Tape()
    count = []
    for _ in range(10**6):
        tape.record(Record("count", [], None, (), None, None,
                           lambda record, shadows, dy: count.append(1)))
    tape.replay({})
    assert len(count) == 10**6


def test_consecutive_inversions_checkpoint_once_their_error_growth_is_too_large():
    tape = Tape("restore")
    chosen = []
    for _ in range(10):
        undo = tape.undo_for(lambda: None, None, lambda: (lambda: "copied back"), key="u",
                             growth=10.0, whole=True)
        chosen.append("checkpoint" if undo() == "copied back" else "inverse")
    # 10 ** 4 is the most error growth allowed between exact restorations: the inverses of
    # writes 2-5 are amplified by the growths of the writes before them (undone after), up to
    # 10 ** 4; the last inverse's growth acts on exact bytes and never counts.
    assert chosen == ["inverse"] * 5 + ["checkpoint"] + ["inverse"] * 4


def test_growth_of_one_never_forces_a_checkpoint():
    tape = Tape("restore")
    assert all(tape.undo_for(lambda: "inverse", None, lambda: None, key="u")() == "inverse"
               for _ in range(1000))
