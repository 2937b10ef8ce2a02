"""How fast this machine's Docker engine starts hardened policy containers (`make bench-engine`).

The ceiling of a cold batch: every Episode needs one such start. Prints starts
per second for containers that only sleep and for containers that import what
the policy runtime imports (NumPy, protobuf), both with parallel starts.
"""

from __future__ import annotations

import argparse
import secrets
import sys
import time
from concurrent.futures import ThreadPoolExecutor

from orchestrator.backends.container_spec import ContainerSpec
from orchestrator.backends.engine import DockerEngine
from orchestrator.backends.labels import LabelSet, owner_id, selector
from orchestrator.images.builder import ImageBuilder

WORKLOADS = {
    "sleep only": ("sleep", "60"),
    "import the policy runtime": ("python3", "-c", "import orchestrator.runtimes.policy_runtime, time; time.sleep(60)"),
}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--containers", type=int, default=24)
    parser.add_argument("--parallel", type=int, default=4)
    args = parser.parse_args()
    engine = DockerEngine.connect()
    (image,) = [r.tag for r in ImageBuilder(engine.client, progress=lambda m: print(m, file=sys.stderr)).ensure(["policy-runtime"])]
    for label, command in WORKLOADS.items():
        labels = LabelSet(session=secrets.token_hex(6), owner=owner_id(), scope="bench-engine")
        spec = ContainerSpec(image=image, command=command, labels=labels.for_role("policy"), environment={"OPENBLAS_NUM_THREADS": "1"})
        began = time.perf_counter()
        with ThreadPoolExecutor(args.parallel) as pool:
            list(pool.map(lambda _: engine.start(spec), range(args.containers)))
        rate = args.containers / (time.perf_counter() - began)
        engine.reap(selector(session=labels.session))
        print(f"{label:<28} {rate:6.2f} starts/s  ({args.containers} containers, {args.parallel} at a time)", flush=True)
        time.sleep(5)  # let the engine finish removing them
    return 0


if __name__ == "__main__":
    sys.exit(main())
