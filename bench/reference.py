"""The local reference users compare with: a fresh, unisolated Python process per Episode, JSON frames over pipes.

As lean as the reference implementation's: the child imports numpy and the Program's
policy.py, then answers one JSON observation per line with one JSON action; the parent
steps gymnasium's CartPole itself. No container, no runner, no protobuf. Lanes run at
once, each a thread of this process driving its own children.
"""

from __future__ import annotations

import json
import resource
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

CHILD = r"""
import importlib.util, json, sys
import numpy as np

program, seed = sys.argv[1], int(sys.argv[2])
spec = importlib.util.spec_from_file_location("policy", program + "/policy.py")
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)

class Context:
    pass

context = Context()
context.rng, context.benchmark_id, context.program_dir = np.random.default_rng(seed), "CartPole-v1", program
policy = module.make_policy(context)
out = sys.stdout
for line in sys.stdin:
    out.write(json.dumps(int(policy.act(np.asarray(json.loads(line))))) + "\n")
    out.flush()
"""


@dataclass(frozen=True, slots=True)
class ReferenceRun:
    episodes: int
    steps: int
    wall_s: float
    child_cpu_s: float  # CPU time of the children (user + system), all Episodes

    @property
    def rate(self) -> float:
        return self.episodes / self.wall_s

    @property
    def cpu_ms_per_episode(self) -> float:
        return self.child_cpu_s / self.episodes * 1e3


def _episode(program: Path, seed: int, horizon: int) -> int:
    import gymnasium as gym

    env = gym.make("CartPole-v1").unwrapped
    child = subprocess.Popen([sys.executable, "-I", "-c", CHILD, str(program), str(seed)], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, text=True, bufsize=1)
    try:
        observation, _ = env.reset(seed=seed)
        steps = 0
        while steps < horizon:
            child.stdin.write(json.dumps(observation.tolist()) + "\n")
            child.stdin.flush()
            observation, _reward, terminated, truncated, _ = env.step(int(json.loads(child.stdout.readline())))
            steps += 1
            if terminated or truncated:
                break
        return steps
    finally:
        child.stdin.close()
        child.wait(30)
        env.close()


def run_reference(program: Path, episodes: int, lanes: int, horizon: int = 500) -> ReferenceRun:
    """episodes Episodes of CartPole-v1 (seeds 0..episodes-1), each in a fresh `python` child, lanes at once."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    began = time.perf_counter()
    with ThreadPoolExecutor(max_workers=lanes) as pool:
        steps = sum(pool.map(lambda seed: _episode(program, seed, horizon), range(episodes)))
    wall = time.perf_counter() - began
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return ReferenceRun(episodes=episodes, steps=steps, wall_s=wall, child_cpu_s=cpu)


if __name__ == "__main__":
    figures = run_reference(Path(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]) if len(sys.argv) > 3 else 1)
    print(json.dumps({"episodes_per_s": figures.rate, "steps": figures.steps, "cpu_ms_per_episode": figures.cpu_ms_per_episode}))
