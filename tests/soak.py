"""Soak the random programs: fresh seeds for as long as asked, every failure shrunk and printed
as a standalone reproducer, and counts of programs run and failures by class.

    python -m tests.soak --minutes 30                      # every feature class, both policies
    python -m tests.soak --minutes 30 --policy checkpoint  # one policy alone
    python -m tests.soak --minutes 10 --features decisions,ties --second-order 1
    python -m tests.soak --minutes 10 --ci                 # only the classes CI runs
    python -m tests.soak --minutes 10 --real               # every class but complex
    python -m tests.soak --minutes 10 --features classic,complex --avoid-known-bugs
    python -m tests.soak --minutes 10 --replay            # the replay class alone

``--replay`` runs the replay class instead: programs of ``replay_programs`` whose control flow
and writes depend on the data, each replayed on inputs that flip its decisions and compared
call by call with tracing, under both policies, every other program under a memory budget
(``memory=0``) too, every third with its arguments in other layouts (negative and wide
strides, views into larger arrays); every failure's source is printed.

Each batch draws ``--batch`` programs from a fresh seed and judges each with
``random_programs.check`` (values against NumPy, the caller's bytes, restore against
checkpoint, finite differences, forward against reverse mode, replay against tracing, and
for one program in
``--second-order`` the Hessian-vector products). The first failure of each class (its oracle
and the feature classes of the program) is shrunk by hypothesis and printed; later ones are
counted. The exit status is 1 if anything failed. Statements that show bugs still open
(``random_programs.KNOWN_BUGS``) are drawn unless ``--avoid-known-bugs`` (or ``--ci``).
"""

import argparse
import collections
import os
import random
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from hypothesis import HealthCheck, given, seed, settings  # noqa: E402

import random_programs as rp  # noqa: E402
import replay_programs  # noqa: E402
from mutad.engines import recompute, replay  # noqa: E402

replay.STRICT = True  # a mistake of mutad's own in a replay raises (tests/conftest.py)

QUIET = dict(deadline=None, database=None, suppress_health_check=list(HealthCheck),
             derandomize=False)


def _judge(program, policies, second_order):
    return rp.check(program, policies=policies, second_order=second_order, replay=True)


def run_batch(features, policies, count, batch_seed, second_order_every, counts, failures,
              classes=(), avoid=()):
    """Draw ``count`` programs; count outcomes; keep the first program of each failure class
    (``classes``: the classes found so far, as their shrunk programs' oracle and features)."""
    state = {"n": 0}

    @seed(batch_seed)
    @settings(max_examples=count, **QUIET)
    @given(rp.programs(features, avoid=avoid))
    def batch(program):
        state["n"] += 1
        second = bool(second_order_every) and state["n"] % second_order_every == 0
        counts["programs"] += 1
        counts["second order"] += second
        try:
            outcome = _judge(program, policies, second)
        except rp.ProgramFailure as failure:
            key = (failure.oracle, tuple(sorted(program.features)))
            # A class already shrunk to a subset of these features is taken to be the cause.
            key = next((known for known in classes if known[0] == key[0]
                        and set(known[1]) <= set(key[1])), key)
            counts["failed: " + " / ".join((key[0], "+".join(key[1])))] += 1
            failures.setdefault(key, (program, failure))
            return
        except Exception as error:  # noqa: BLE001 - the generator or the oracle itself
            counts[f"harness error: {type(error).__name__}: {error}"[:100]] += 1
            return
        counts["kinks (finite differences excused)"] += outcome.kink
        counts["extreme values (finite differences excused)"] += outcome.extreme
        for refusal in outcome.refused:
            counts["refused: " + refusal[:90]] += 1

    batch()


def shrink(key, features, policies, second_order, seconds=120, avoid=()):
    """Hypothesis's smallest program failing the same oracle with a subset of the features,
    found within ``seconds`` (after that every candidate passes, which ends the shrinking)."""
    oracle, classes = key
    best = []
    stop = time.monotonic() + seconds

    def size(program):
        return len(program.statements), len(program.source())

    @settings(max_examples=2000, **QUIET)
    @given(rp.programs(features, avoid=avoid))
    def fails(program):
        if not program.features <= set(classes) or time.monotonic() > stop:
            return
        try:
            _judge(program, policies, second_order)
        except rp.ProgramFailure as failure:
            if failure.oracle == oracle:
                if not best or size(program) < size(best[0][0]):
                    best[:] = [(program, failure)]
                raise

    try:
        fails()
    except Exception:  # noqa: BLE001 - the failure itself, or Flaky once the time is up
        pass
    return best[0] if best else None


def soak_replay(minutes, policies):
    """The replay class: fresh programs of ``replay_programs`` until ``minutes`` are up."""
    counts = collections.Counter()
    deadline = time.monotonic() + 60 * minutes
    first = random.getrandbits(40)
    seed_ = first
    while time.monotonic() < deadline:
        for policy in policies:
            counts["programs"] += 1
            memory = 0 if seed_ % 2 else None  # every other program under a budget too
            try:
                replaying = replay_programs.check(seed_, policy=policy, memory=memory,
                                                  layouts=seed_ % 3 == 0)
            except replay_programs.Mismatch as mismatch:
                counts["failed"] += 1
                print(f"\n=== failure ({policy}, memory={memory}) ===\n{mismatch}", flush=True)
                continue
            counts["signatures replayed"] += sum(
                type(p) is not str for p in replaying.programs.values())
            for reason in replaying.reasons.values():
                counts["traced: " + reason[:80]] += 1
        seed_ += 1
    print(f"\nreplay programs, seeds {first}..{seed_ - 1}; policies: {', '.join(policies)}; "
          f"{minutes:.1f} minutes")
    for name, value in sorted(counts.items()):
        print(f"{value:8d}  {name}")
    return 1 if counts["failed"] else 0


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--minutes", type=float, default=5.0)
    parser.add_argument("--policy", choices=("both", "restore", "checkpoint"), default="both",
                        help="both: each program under both policies, compared (default)")
    parser.add_argument("--features", default=",".join(rp.FEATURES),
                        help=f"comma-separated classes among {', '.join(rp.FEATURES)}")
    parser.add_argument("--ci", action="store_true",
                        help="only the classes CI runs, without the known bugs' statements")
    parser.add_argument("--real", action="store_true",
                        help="every class but complex: real programs only")
    parser.add_argument("--avoid-known-bugs", action="store_true",
                        help="leave out the statements of random_programs.KNOWN_BUGS")
    parser.add_argument("--batch", type=int, default=200)
    parser.add_argument("--second-order", type=int, default=10, metavar="K",
                        help="check Hessian-vector products on one program in K (0: never)")
    parser.add_argument("--shrink-seconds", type=float, default=120.0,
                        help="time to shrink each new failure class (0: print it unshrunk)")
    parser.add_argument("--replay", action="store_true",
                        help="the replay class: data-dependent programs, replayed and traced")
    args = parser.parse_args(argv)
    policies = ("restore", "checkpoint") if args.policy == "both" else (args.policy,)
    recompute.SMALL = 0  # the programs' arrays are small: recompute every temporary that can be
    if args.replay:
        import warnings
        warnings.simplefilter("ignore")  # the programs divide by zero on purpose
        return soak_replay(args.minutes, policies)
    features = rp.CI_FEATURES if args.ci else tuple(args.features.split(","))
    if args.real:
        features = tuple(f for f in features if f != "complex")
    avoid = tuple(rp.KNOWN_BUGS) if args.ci or args.avoid_known_bugs else ()
    unknown = set(features) - set(rp.FEATURES)
    if unknown:
        parser.error(f"unknown feature classes: {', '.join(sorted(unknown))}")
    counts, failures, shown, classes = collections.Counter(), {}, set(), []
    deadline = time.monotonic() + 60 * args.minutes
    start = time.monotonic()
    while time.monotonic() < deadline:
        run_batch(features, policies, args.batch, random.getrandbits(64), args.second_order,
                  counts, failures, classes, avoid)
        for key, (program, failure) in list(failures.items()):
            if key in shown:
                continue
            shown.add(key)
            if any(known[0] == key[0] and set(known[1]) <= set(key[1]) for known in classes):
                continue  # drawn in the same batch as a class shrunk since: counted there next
            if args.shrink_seconds:
                program, failure = (shrink(key, features, policies, False, args.shrink_seconds,
                                           avoid) or (program, failure))
            shrunk = (failure.oracle, tuple(sorted(program.features)))
            classes.append(shrunk)
            print(f"\n=== failure: {key[0]} (found with {'+'.join(key[1])}; shrunk: "
                  f"{'+'.join(shrunk[1])}) ===\n")
            print(program.reproducer(failure), flush=True)
        print(f"[{(time.monotonic() - start) / 60:.1f} min] {counts['programs']} programs, "
              f"{sum(v for k, v in counts.items() if k.startswith('failed'))} failures",
              file=sys.stderr, flush=True)
    print(f"\nfeatures: {', '.join(features)}; policies: {', '.join(policies)}; "
          f"avoided: {', '.join(avoid) or 'nothing'}; "
          f"{(time.monotonic() - start) / 60:.1f} minutes")
    for name, value in sorted(counts.items()):
        print(f"{value:8d}  {name}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
