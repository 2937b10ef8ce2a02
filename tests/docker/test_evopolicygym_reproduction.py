"""`evaluate --reproduce` against EvoPolicyGym's own kernel: the same per-Episode returns for the same seed, split and count.

For six of their packages (CartPole, Acrobot, FrozenLake, Taxi, MiniGrid DoorKey and MuJoCo InvertedPendulum), their
kernel's `evaluate` runs their baseline Program in a container of its own (tests/support/evopolicygym_reference.py:
trixie's Python 3.13, their locked versions) and our `epg-orchestrate evaluate --reproduce` runs the same baseline
directory from the checkout. Returns must be equal exactly, except MuJoCo's, which may differ by 1e-6 relative (the
differences are printed; a MuJoCo build other than the locked one can round the last bits of a simulation step
differently). The policy seeds their kernel derived must be ours too, and the environment seeds where our output
shows them.

Needs a checkout of their repository (sources only) named by EPG_EVOPOLICYGYM_CHECKOUT; without it the module is
skipped, saying so. Building the six reference images and our six env-epg-* images takes minutes the first time.
"""

from __future__ import annotations

import math
import os
import re
from pathlib import Path

import pytest

from orchestrator.backends.engine import DockerEngine
from tests.support.cli import run_cli
from tests.support.evopolicygym_reference import ReferencePackage, evaluate_reference

CHECKOUT_VARIABLE = "EPG_EVOPOLICYGYM_CHECKOUT"
CHECKOUT = os.environ.get(CHECKOUT_VARIABLE, "")

pytestmark = [
    pytest.mark.docker,
    pytest.mark.skipif(not CHECKOUT, reason=f"{CHECKOUT_VARIABLE} names no checkout of EvoPolicyGym's repository "
                                            "(set it to the checkout's root to compare with their kernel)"),
]

SEED, SPLIT, COUNT = 7, "test", 8
MUJOCO_RELATIVE_TOLERANCE = 1e-6

# (package directory under environments/, relative tolerance of a return: 0.0 is exact equality)
PACKAGES = {
    "cartpole": ("gymnasium/classic_control/cartpole", 0.0),
    "acrobot": ("gymnasium/classic_control/acrobot", 0.0),
    "frozen_lake": ("gymnasium/toy_text/frozen_lake", 0.0),
    "taxi": ("gymnasium/toy_text/taxi", 0.0),
    "doorkey": ("minigrid/minigrid/doorkey", 0.0),
    "inverted_pendulum": ("gymnasium/mujoco/inverted_pendulum", MUJOCO_RELATIVE_TOLERANCE),
}


def _checkout() -> Path:
    checkout = Path(CHECKOUT).resolve()
    assert (checkout / "src" / "evopolicygym").is_dir() and (checkout / "environments").is_dir(), (
        f"{CHECKOUT_VARIABLE}={CHECKOUT} is not a checkout of EvoPolicyGym (no src/evopolicygym, environments/)")
    return checkout


def _our_image(package: ReferencePackage) -> str:
    """Our catalogue's image of their package: env-epg- and the distribution name without its prefix."""
    name = re.sub(r"^evopolicygym-benchmark-", "", package.distribution.lower())
    return "env-epg-" + re.sub(r"[^a-z0-9]+", "-", name).strip("-")


def _differences(ours: list[float | None], theirs: list[float | None], tolerance: float) -> tuple[list[str], list[str]]:
    """Every Episode whose returns are not equal, as lines, and those of them beyond tolerance (relative) or where one
    side failed and the other did not."""
    unequal, beyond = [], []
    for index, (mine, reference) in enumerate(zip(ours, theirs, strict=True)):
        if mine == reference:
            continue
        line = f"Episode {index}: ours {mine!r}, theirs {reference!r}"
        unequal.append(line)
        if mine is None or reference is None or not math.isclose(mine, reference, rel_tol=tolerance, abs_tol=0.0):
            beyond.append(line)
    return unequal, beyond


@pytest.mark.parametrize("name", sorted(PACKAGES))
def test_reproduction_mode_returns_what_their_kernels_evaluate_returns(name: str, engine: DockerEngine, scope: str) -> None:
    checkout = _checkout()
    relative, tolerance = PACKAGES[name]
    package = ReferencePackage.read(checkout / "environments" / relative)

    reference = evaluate_reference(engine.client, checkout, package.directory, split=SPLIT, seed=SEED, count=COUNT,
                                   scope=scope)
    theirs = reference.returns
    print(f"{name}: their returns {theirs} ({reference.seconds:.1f} s; substitutions {reference.substitutions})")
    assert len(theirs) == COUNT and len(reference.document["policy_seeds"]) == COUNT, reference.document

    built = run_cli("images", "build", _our_image(package), "--environments", str(checkout), scope=scope, timeout=3600)
    assert built.exit_code == 0, built.stdout[-2000:] + built.stderr[-4000:]
    evaluated = run_cli("evaluate", "--reproduce", "--seed", str(SEED), "--split", SPLIT, "--count", str(COUNT),
                        "--environments", str(checkout), "--benchmark", reference.document["benchmark_id"],
                        str(package.baseline), "--json", scope=scope, timeout=1800)
    assert evaluated.exit_code == 0, evaluated.stdout[-2000:] + evaluated.stderr[-4000:]
    reproduction = evaluated.json()["reproduction"]
    ours = reproduction["returns"]
    print(f"{name}: our returns {ours}")

    assert (reproduction["seed"], reproduction["split"], reproduction["count"]) == (SEED, SPLIT, COUNT)
    assert reproduction["policy_seeds"] == reference.document["policy_seeds"]
    if "environment_seeds" in reproduction:
        assert reproduction["environment_seeds"] == reference.document["environment_seeds"]
    unequal, beyond = _differences(ours, theirs, tolerance)
    if unequal:
        print(f"{name}: returns that differ (tolerance {tolerance} relative):\n" + "\n".join(unequal))
    assert not beyond, "\n".join(beyond)
    if not tolerance:
        assert ours == theirs
