"""The replay's differential test: random programs whose control flow and writes depend on the
data (``replay_programs``), each replayed on inputs that flip its decisions and compared with a
fresh traced call, bit for bit, with the caller's arrays intact. ``python -m tests.soak
--replay`` runs many more."""

import warnings

import pytest

import replay_programs

PROGRAMS = 80


@pytest.mark.parametrize("policy", ("restore", "checkpoint"))
@pytest.mark.parametrize("seed", range(0, PROGRAMS, 2))
def test_replayed_calls_are_traced_calls(seed, policy):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # divisions by zero, on purpose
        replay_programs.check(seed + (policy == "checkpoint"), policy=policy)


def test_the_programs_replay():
    """Not all traced: most signatures of these programs are replayed (the test would pass
    trivially if every call were traced)."""
    replayed = 0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        for seed in range(40):
            replaying = replay_programs.check(seed)
            replayed += any(type(p) is not str for p in replaying.programs.values())
    assert replayed >= 20
