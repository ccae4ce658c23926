"""Sessions (issue 22): what a session costs against the single runs it replaces.

    create      `Sandbox.session()` until the container answers (a container of its own, on demand)
    create_cold / create_warm
                --creates N sessions made on demand, and taken from a warm set
                (`Sandbox(warm_sessions=2)`, refilled between takes), each until
                `session()` returned; `*_first_call` until its first `run` answered too
    run         `session.run("print(1)")`: one call, its processes killed after it
    shell       `session.shell("true")`
    write       `session.write_file(...)`
    score       `session.score(asserts label)`: the agent's file graded by a single run
    close       the container killed and removed
    single run  the same program as one pooled run (`make_sandbox("pooled").run`) and as
                one cold run (`Sandbox.run`: a container per run), the costs a call replaces
    held        sessions open at once, each answering a call: --held N

Usage: .venv/bin/python bench/sessions.py [--sessions 8] [--calls 3] [--creates 20]
       [--held 20] [--runtime runsc] [--json FILE]
"""

import argparse
import json
import statistics
import time
from collections.abc import Callable
from functools import partial
from typing import Any

from rewardbox import CodeReward, RunRequest, Sandbox
from rewardbox.sandbox.modes import make_sandbox

PROGRAM = RunRequest(files={"p.py": "print(1)\n"}, program="p.py")
LABEL = {"tests": ["assert add(1, 2) == 3"]}
SOLUTION = "def add(a, b):\n    return a + b\n"


def timed(call: Callable[[], Any], into: list[float]) -> Any:
    started = time.monotonic()
    result = call()
    into.append(time.monotonic() - started)
    return result


def summary(seconds: list[float]) -> dict[str, float]:
    ordered = sorted(seconds)
    p90 = ordered[min(len(ordered) - 1, round(0.9 * (len(ordered) - 1)))]
    return {"p50_ms": round(statistics.median(seconds) * 1000, 1), "p90_ms": round(p90 * 1000, 1),
            "max_ms": round(max(seconds) * 1000, 1), "n": len(seconds)}


def creates(box: Sandbox, n: int, warm: bool) -> dict[str, list[float]]:
    """`n` sessions made (or handed out), each closed before the next; with
    `warm`, each taken once the set has refilled (a hand-out, not a fallback)."""
    made: list[float] = []
    first_call: list[float] = []
    for _ in range(n):
        if warm:
            deadline = time.monotonic() + 60
            while box.warm_sessions < 2:
                assert time.monotonic() < deadline, "the warm set did not refill"
                time.sleep(0.02)
        started = time.monotonic()
        session = box.session()
        made.append(time.monotonic() - started)
        with session:
            assert session.run("print(1)").stdout == "1\n"
            first_call.append(time.monotonic() - started)
    return {"made": made, "first_call": first_call}


def measure(sessions: int, calls: int, held: int, runtime: str | None, n_creates: int = 20) -> dict[str, dict[str, float]]:
    phases: dict[str, list[float]] = {k: [] for k in
                                      ("create", "run", "shell", "write", "score", "close", "single_pooled",
                                       "single_cold")}
    with Sandbox(runtime=runtime, max_containers=2) as cold, \
            make_sandbox("pooled", max_containers=1, runtime=runtime) as pooled:
        grader = CodeReward(pooled)
        pooled.run(PROGRAM)  # the pool's container started and warm
        for _ in range(sessions):
            session = timed(lambda: cold.session(grader=grader), phases["create"])
            with session:
                for _ in range(calls):
                    timed(partial(session.run, "print(1)"), phases["run"])
                    timed(partial(session.shell, "true"), phases["shell"])
                    timed(partial(session.write_file, "solution.py", SOLUTION), phases["write"])
                reward = timed(partial(session.score, LABEL), phases["score"])
                assert reward.reward == 1.0, reward
                timed(session.close, phases["close"])
            for _ in range(calls):
                timed(lambda: pooled.run(PROGRAM), phases["single_pooled"])
            timed(lambda: cold.run(PROGRAM), phases["single_cold"])
        if n_creates:
            cold_made = creates(cold, n_creates, warm=False)
            with Sandbox(runtime=runtime, max_containers=1, sweep=False, warm_sessions=2) as warm_box:
                warm_made = creates(warm_box, n_creates, warm=True)
            phases.update(create_cold=cold_made["made"], create_cold_first_call=cold_made["first_call"],
                          create_warm=warm_made["made"], create_warm_first_call=warm_made["first_call"])
        figures = {name: summary(values) for name, values in phases.items()}
        if held:
            opened = []
            started = time.monotonic()
            try:
                for _ in range(held):
                    opened.append(cold.session())
                made_s = time.monotonic() - started
                answered = sum(s.run("print(1)").stdout == "1\n" for s in opened)
            finally:
                for s in opened:
                    s.close()
            figures["held"] = {"sessions": held, "answered": answered, "created_in_s": round(made_s, 1)}
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--sessions", type=int, default=8)
    parser.add_argument("--calls", type=int, default=3, help="of each kind, per session")
    parser.add_argument("--creates", type=int, default=20, help="sessions made cold and from the warm set (0: skip)")
    parser.add_argument("--held", type=int, default=20, help="sessions open at once (0: skip)")
    parser.add_argument("--runtime", help="e.g. runsc")
    parser.add_argument("--json", help="write the figures here")
    args = parser.parse_args()
    figures = measure(args.sessions, args.calls, args.held, args.runtime, args.creates)
    print(f"sessions ({args.runtime or 'runc'}), {args.sessions} sessions x {args.calls} calls of each kind:")
    for name, row in figures.items():
        if name != "held":
            print(f"  {name:22s} p50 {row['p50_ms']:7.1f} ms   p90 {row['p90_ms']:7.1f} ms   "
                  f"max {row['max_ms']:7.1f} ms   (n={row['n']})")
    if "held" in figures:
        held = figures["held"]
        print(f"  held at once   {held['answered']}/{held['sessions']} answered a call (created in "
              f"{held['created_in_s']} s)")
    run, pooled = figures["run"]["p50_ms"], figures["single_pooled"]["p50_ms"]
    print(f"  a session's call against a pooled single run: {run / pooled:.2f}x; against a cold one: "
          f"{run / figures['single_cold']['p50_ms']:.2f}x")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"runtime": args.runtime or "runc", **figures}, f, indent=2)


if __name__ == "__main__":
    main()
