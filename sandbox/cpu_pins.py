"""Which CPUs each container of a sandbox is pinned to (the `pin_cpus`
setting): off by default, the kernel then places every container's
processes where it likes.

With two or more containers per core, the kernel moves a run's processes
between cores as the others wake, and a run that loses its core's cache half
way through is the slow tail (bench/RESULTS.md, issue 21: at 4
containers on 2 cores, p99/p50 of a sample's time outside its tests falls
from 2.09-3.46 to 1.51-1.73 pinned, at the same throughput; at one
container per core nothing changes). Pinning keeps each container on its own cores, spread evenly:
a new container takes the least used CPUs of the set, and the replacement of
a retiring one takes the CPUs it leaves.

The set is `all` (every CPU of the Docker engine's machine) or a list in
Docker's `--cpuset-cpus` form, `0-3,8`: on a shared trainer node, the cores
the trainer does not use.
"""

import math
import random
import threading
from collections.abc import Sequence

from rewardbox.sandbox.errors import CpusMissing

ALL = "all"


def cpu_set(text: str) -> str:
    """The setting's value checked and written the one way: `all`, or the
    CPUs in increasing order with runs as ranges; ValueError otherwise.

    >>> cpu_set(" 8, 0-3 ,2")
    '0-3,8'
    >>> cpu_set("ALL")
    'all'
    >>> cpu_set("3-1")
    Traceback (most recent call last):
    ...
    ValueError: '3-1' is not a CPU or a range of CPUs (`all`, or a list such as 0-3,8)
    """
    if text.strip().lower() == ALL:
        return ALL
    return _written(_cpus(text))


def _cpus(text: str) -> list[int]:
    cpus: set[int] = set()
    for part in (part.strip() for part in text.split(",")):
        first, dash, last = (end.strip() for end in part.partition("-"))
        if not (first.isdigit() and first.isascii() and (not dash or (last.isdigit() and last.isascii()))) \
                or (dash and int(last) < int(first)):
            raise ValueError(f"{part!r} is not a CPU or a range of CPUs (`{ALL}`, or a list such as 0-3,8)")
        cpus.update(range(int(first), int(last if dash else first) + 1))
    return sorted(cpus)


def _written(cpus: Sequence[int]) -> str:
    """CPUs (in increasing order) in Docker's form: `0-3,8`."""
    runs: list[list[int]] = []
    for cpu in cpus:
        if runs and runs[-1][1] == cpu - 1:
            runs[-1][1] = cpu
        else:
            runs.append([cpu, cpu])
    return ",".join(str(a) if a == b else f"{a}-{b}" for a, b in runs)


class CpuPins:
    """The CPUs of `setting` shared out among a sandbox's containers, each
    CPU counted by the containers pinned to it. `engine_cpus`: how many CPUs
    the Docker engine has (its `docker info`; not this process's machine when
    the engine is remote). Among CPUs used equally, the first taken is the
    `first`-th of the set, then those after it in turn; by default a random
    one, so that several processes pinning over one set (a trainer's reward
    workers, each with its own pool) do not all begin with its first CPU."""

    def __init__(self, setting: str, engine_cpus: int, first: int | None = None):
        cpus = list(range(engine_cpus)) if cpu_set(setting) == ALL else _cpus(setting)
        missing = [cpu for cpu in cpus if cpu >= engine_cpus]
        if missing:
            raise CpusMissing(f"pin_cpus {setting!r}: the Docker engine has {engine_cpus} CPUs "
                             f"({_written(range(engine_cpus))}), not CPU {missing[0]}")
        self.cpus = tuple(cpus)
        start = random.randrange(len(cpus)) if first is None else first % len(cpus)
        self._turn = cpus[start:] + cpus[:start]  # the order among CPUs used equally
        self._pinned = dict.fromkeys(cpus, 0)
        self._lock = threading.Lock()

    def take(self, cores: float, like: tuple[int, ...] = ()) -> tuple[int, ...]:
        """CPUs for a container of `cores` (its `Limits.cpus`, rounded up; all
        of the set at most): those of `like`, the container it replaces, if
        given; else the least used, in turn among equals."""
        with self._lock:
            if like:
                chosen = like
            else:
                wanted = min(len(self.cpus), max(1, math.ceil(cores)))
                chosen = tuple(sorted(sorted(self._turn, key=self._pinned.__getitem__)[:wanted]))
            for cpu in chosen:
                self._pinned[cpu] += 1
            return chosen

    def give_back(self, cpus: tuple[int, ...]) -> None:
        """A container pinned to `cpus` is gone (or going)."""
        with self._lock:
            for cpu in cpus:
                self._pinned[cpu] -= 1

    def pinned(self) -> dict[int, int]:
        """Containers pinned to each CPU of the set."""
        with self._lock:
            return dict(self._pinned)


def cpuset_cpus(cpus: tuple[int, ...]) -> str | None:
    """The engine's `CpusetCpus` for these CPUs; None (not pinned) for none."""
    return _written(sorted(cpus)) if cpus else None
