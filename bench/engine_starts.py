"""How fast this machine's Docker engine starts hardened policy containers (`make bench-engine`).

Every Episode of a cold batch needs one such start. Prints starts per second
and the engine's CPU time per start (dockerd, containerd and the per-container
shims with their runc calls) for containers that only sleep and for containers
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


def engine_cpu_ms() -> float:
    """CPU time so far of the engine's processes, with their waited-for children (runc, hooks)."""
    total = 0.0
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            text = stat.read_text()
        except OSError:
            continue
        name = text[text.index("(") + 1 : text.rindex(")")]
        if name.startswith(ENGINE_PROCESSES):
            fields = text[text.rindex(")") + 2 :].split()
            total += sum(int(v) for v in fields[11:15]) * TICK_MS  # utime, stime, cutime, cstime
    return total


def measure(engine: DockerEngine, image: str, command: tuple[str, ...], network_stack: bool, count: int, parallel: int) -> tuple[float, float]:
    """Start count containers, parallel at a time; return (starts per second, engine CPU ms per start)."""
    labels = LabelSet(session=secrets.token_hex(6), owner=owner_id(), scope="bench-engine")
    spec = ContainerSpec(image=image, command=command, labels=labels.for_role("policy"), environment={"OPENBLAS_NUM_THREADS": "1"})
    kwargs = to_docker_kwargs(spec)
    if network_stack:
        kwargs.pop("network_disabled")
    before = engine_cpu_ms()
    began = time.perf_counter()
    with ThreadPoolExecutor(parallel) as pool:
        list(pool.map(lambda _: engine.client.containers.run(**kwargs), range(count)))
    rate = count / (time.perf_counter() - began)
    time.sleep(1)  # the shims' last work for the starts
    cpu = (engine_cpu_ms() - before) / count
    engine.reap(selector(session=labels.session))
    time.sleep(5)  # let the engine finish removing them
    return rate, cpu


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--containers", type=int, default=24)
    parser.add_argument("--parallel", type=int, default=4)
    args = parser.parse_args()
    engine = DockerEngine.connect()
    (image,) = [r.tag for r in ImageBuilder(engine.client, progress=lambda m: print(m, file=sys.stderr)).ensure(["policy-runtime"])]
    print(f"{args.containers} hardened containers per line, {args.parallel} started at a time\n", flush=True)
    for label, command in WORKLOADS.items():
        for network_stack, how in ((False, "no network stack (used)"), (True, "network_mode=none only")):
            rate, cpu = measure(engine, image, command, network_stack, args.containers, args.parallel)
            print(f"{label:<26} {how:<24} {rate:6.2f} starts/s  engine CPU {cpu:5.0f} ms/start", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
