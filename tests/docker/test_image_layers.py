"""Environment images are the SDK layer (env-sdk) plus their own layers, and run what the layer pins."""

from __future__ import annotations

import json
import secrets

from orchestrator.backends.labels import LabelSet, owner_id
from orchestrator.images.pins import sdk_layer_versions

VERSIONS = (
    "import importlib.metadata as m, json, epg_sdk.runtime.runner, epg_env_cartpole; "
    "print(json.dumps({n: m.version(n) for n in ('numpy', 'protobuf', 'grpcio', 'typing-extensions', 'gymnasium', 'epg-sdk')}))"
)


def test_an_environment_image_shares_every_layer_of_the_sdk_layer_and_runs_the_locked_versions(engine, builder, images, scope):
    layer = builder.tag_of(builder.recipes()["env-sdk"])
    below = engine.client.images.get(layer).attrs["RootFS"]["Layers"]
    cartpole = engine.client.images.get(images["env-cartpole"])
    above = cartpole.attrs["RootFS"]["Layers"]
    assert len(above) > len(below) > 1 and above[: len(below)] == below
    # CartPole's lock is all in the layer: its own layers hold its module, not a second NumPy or gymnasium.
    history = engine.client.api.history(images["env-cartpole"])
    own = sum(entry["Size"] for entry in history[: len(history) - len(engine.client.api.history(layer))])
    assert own < 5 * 2**20, own
    output = engine.client.containers.run(
        images["env-cartpole"], ["python3", "-c", VERSIONS], network_disabled=True, remove=True,
        labels=LabelSet(sandbox=secrets.token_hex(6), owner=owner_id(), scope=scope).for_role("image-check"),
    )
    installed = json.loads(output)
    assert {name: installed[name] for name in sdk_layer_versions() if name in installed} == {
        name: version for name, version in sdk_layer_versions().items() if name in installed
    }
    assert installed["epg-sdk"] == "0.1.0" and len(installed) == 6
