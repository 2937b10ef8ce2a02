"""How fast this machine's Docker engine starts hardened policy containers (`make bench-engine`).

Every Episode of a cold batch needs one such start. Prints starts per second,
the engine's CPU time per start and per removal (dockerd, containerd and the
per-container shims with their runc calls; see EngineMeter) and the CPU of the
container's own processes, for containers that only sleep and for containers
that import what the policy runtime imports, each with the network settings
the orchestrator uses (`network_mode=none` and no network stack at all) and
with `network_mode=none` alone, in the same run.
"""

from __future__ import annotations

import argparse
import os
import secrets
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from orchestrator.backends.container_spec import ContainerSpec, to_docker_kwargs
from orchestrator.backends.engine import DockerEngine
from orchestrator.backends.labels import LabelSet, owner_id, selector
from orchestrator.images.builder import ImageBuilder

WORKLOADS = {
    "sleep only": ("sleep", "60"),
    "import the policy runtime": ("python3", "-c", "import epg_sdk.runtime.policy_runtime, time; time.sleep(60)"),
}
ENGINE_PROCESSES = ("dockerd", "containerd", "containerd-shim", "runc")
TICK_MS = 1000 / os.sysconf("SC_CLK_TCK")
CPUACCT = Path("/sys/fs/cgroup/cpuacct")  # cgroup v1's CPU accounting hierarchy


def engine_pids() -> list[int]:
    pids = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            text = stat.read_text()
        except OSError:
            continue
        if text[text.index("(") + 1 : text.rindex(")")].startswith(ENGINE_PROCESSES):
            pids.append(int(stat.parent.name))
    return pids


def engine_cpu_ms() -> dict[int, float]:
    """CPU time so far of each engine process (pid -> ms), with its waited-for children (runc, hooks)."""
    times = {}
    for pid in engine_pids():
        try:
            text = Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            continue
        fields = text[text.rindex(")") + 2 :].split()
        times[pid] = sum(int(v) for v in fields[11:15]) * TICK_MS  # utime, stime, cutime, cstime
    return times


def spent(before: dict[int, float], after: dict[int, float]) -> float:
    """Engine CPU between two snapshots. A shim that exited in between takes its last work with it: a lower bound."""
    return sum(ms - before.get(pid, 0.0) for pid, ms in after.items())


class EngineMeter:
    """The engine's CPU (ms) between two readings.

    Where cgroup v1's cpuacct is writable, the engine's processes move for the measurement into a child of
    their cpuacct cgroup (accounting only: no limit applies, and the parent's figure still includes it), so the
    shims and runc calls they start are counted in full even after they exit; they move back at the end. Elsewhere
    it sums the live processes' own and waited-for children's CPU, which misses what exited shims had spent.
    """

    def __init__(self) -> None:
        self.group: Path | None = None
        pid = next(iter(engine_pids()), None)
        if pid is None or not (CPUACCT / "cgroup.procs").exists():
            return
        try:
            line = next(entry for entry in Path(f"/proc/{pid}/cgroup").read_text().splitlines()
                        if "cpuacct" in entry.split(":")[1].split(","))
            group = CPUACCT / line.split(":", 2)[2].lstrip("/") / f"epg-bench-engine-{os.getpid()}"
            group.mkdir()
            self.group = group
            self._move(engine_pids(), group)
        except (OSError, StopIteration):
            self.close()

    @property
    def complete(self) -> bool:
        return self.group is not None

    def read(self) -> float | dict[int, float]:
        if self.group is None:
            return engine_cpu_ms()
        return int((self.group / "cpuacct.usage").read_text()) / 1e6

    def spent(self, before: float | dict[int, float], after: float | dict[int, float]) -> float:
        if isinstance(before, dict) and isinstance(after, dict):
            return spent(before, after)
        return float(after) - float(before)

    @staticmethod
    def _move(pids: list[int], group: Path) -> None:
        for pid in pids:
            try:
                (group / "cgroup.procs").write_text(str(pid))
            except ProcessLookupError:
                pass  # exited in between

    def close(self) -> None:
        if self.group is None:
            return
        group, self.group = self.group, None
        try:
            self._move([int(p) for p in (group / "cgroup.procs").read_text().split()], group.parent)
            group.rmdir()
        except OSError as exc:
            print(f"could not remove the measuring cgroup {group}: {exc}", file=sys.stderr)


def container_cpu_ms(container_id: str) -> float:
    """CPU time so far of the container's processes (its cgroup; v1 with the cgroupfs driver, or v2)."""
    for path in (f"/sys/fs/cgroup/cpuacct/docker/{container_id}/cpuacct.usage", f"/sys/fs/cgroup/docker/{container_id}/cpu.stat",
                 f"/sys/fs/cgroup/system.slice/docker-{container_id}.scope/cpu.stat"):
        try:
            text = Path(path).read_text()
        except OSError:
            continue
        if path.endswith("cpuacct.usage"):
            return int(text) / 1e6
        return int(text.split("usage_usec", 1)[1].split()[0]) / 1e3
    return float("nan")


@dataclass(frozen=True, slots=True)
class Starts:
    rate: float  # starts per second
    start_ms: float  # engine CPU per create and start
    remove_ms: float  # engine CPU per forced removal (without a measuring cgroup a lower bound: see EngineMeter)
    inside_ms: float  # CPU of the container's own processes (the workload up to its sleep)


def measure(engine: DockerEngine, meter: EngineMeter, image: str, command: tuple[str, ...], network_stack: bool, count: int,
            parallel: int) -> Starts:
    """Start count containers, parallel at a time, then remove them, parallel at a time."""
    labels = LabelSet(sandbox=secrets.token_hex(6), owner=owner_id(), scope="bench-engine")
    spec = ContainerSpec(image=image, command=command, labels=labels.for_role("policy"), environment={"OPENBLAS_NUM_THREADS": "1"})
    kwargs = to_docker_kwargs(spec)
    if network_stack:
        kwargs.pop("network_disabled")
    before = meter.read()
    began = time.perf_counter()
    with ThreadPoolExecutor(parallel) as pool:
        containers = list(pool.map(lambda _: engine.client.containers.run(**kwargs), range(count)))
    rate = count / (time.perf_counter() - began)
    time.sleep(2)  # the shims' last work for the starts; the workloads reach their sleep
    started = meter.read()
    inside = sum(container_cpu_ms(c.id) for c in containers) / count
    with ThreadPoolExecutor(parallel) as pool:
        list(pool.map(engine.remove, containers))
    time.sleep(2)  # the shims exit
    removed = meter.read()
    engine.reap(selector(sandbox=labels.sandbox))
    return Starts(rate=rate, start_ms=meter.spent(before, started) / count,
                  remove_ms=meter.spent(started, removed) / count, inside_ms=inside)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--containers", type=int, default=24)
    parser.add_argument("--parallel", type=int, default=4)
    args = parser.parse_args()
    engine = DockerEngine.connect()
    (image,) = [r.tag for r in ImageBuilder(engine.client, progress=lambda m: print(m, file=sys.stderr)).ensure(["policy-runtime"])]
    meter = EngineMeter()
    accounting = ("in full (the engine's processes in a cpuacct cgroup of their own, exited shims and runc calls included)"
                  if meter.complete else "a lower bound (live engine processes only: cgroup v1's cpuacct is not writable here)")
    print(f"{args.containers} hardened containers per line, {args.parallel} started at a time; engine CPU {accounting}\n",
          flush=True)
    try:
        for label, command in WORKLOADS.items():
            for network_stack, how in ((False, "no network stack (used)"), (True, "network_mode=none only")):
                starts = measure(engine, meter, image, command, network_stack, args.containers, args.parallel)
                total = starts.start_ms + starts.remove_ms + starts.inside_ms
                print(f"{label:<26} {how:<24} {starts.rate:6.2f} starts/s  engine CPU {starts.start_ms:4.0f} ms/start "
                      f"{starts.remove_ms:4.0f} ms/removal  in the container {starts.inside_ms:4.0f} ms  in all {total:4.0f} ms",
                      flush=True)
    finally:
        meter.close()
    print("\ntarget: engine plus runtime CPU per cold container at most 100 ms (the policy runtime, no network stack)", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
