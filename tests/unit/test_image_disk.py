"""The disk of a set of images: shared layers counted once, pulled layers without ids told apart by what lies below."""

from __future__ import annotations

from orchestrator.images.disk import disk_bytes

HISTORIES = {
    # newest first, as docker's history lists them
    "env-a": [{"Id": "a2", "Size": 0, "CreatedBy": "LABEL"}, {"Id": "a1", "Size": 100, "CreatedBy": "pip install a"},
              {"Id": "base", "Size": 1000, "CreatedBy": ""}],
    "env-b": [{"Id": "b1", "Size": 40, "CreatedBy": "pip install b"}, {"Id": "base", "Size": 1000, "CreatedBy": ""}],
    "pulled-1": [{"Id": "<missing>", "Size": 7, "CreatedBy": "RUN x"}, {"Id": "p0", "Size": 50, "CreatedBy": ""}],
    "pulled-2": [{"Id": "<missing>", "Size": 7, "CreatedBy": "RUN x"}, {"Id": "q0", "Size": 60, "CreatedBy": ""}],
}


def test_a_layer_shared_by_images_counts_once():
    assert disk_bytes(["env-a"], HISTORIES.__getitem__) == 1100
    assert disk_bytes(["env-a", "env-b"], HISTORIES.__getitem__) == 1140
    assert disk_bytes(["env-a", "env-b", "env-a"], HISTORIES.__getitem__) == 1140


def test_layers_without_ids_are_the_same_only_on_the_same_layers_below():
    assert disk_bytes(["pulled-1", "pulled-1"], HISTORIES.__getitem__) == 57
    assert disk_bytes(["pulled-1", "pulled-2"], HISTORIES.__getitem__) == 57 + 67
    assert disk_bytes([], HISTORIES.__getitem__) == 0
