"""Labels on managed resources and the selectors that find them again."""

from __future__ import annotations

import os
import socket

from orchestrator.backends.labels import MANAGED, OWNER, ROLE, SANDBOX, SCOPE, LabelSet, owner_id, selector


def test_all_label_keys_share_the_project_prefix():
    assert {MANAGED, ROLE, SANDBOX, SCOPE, OWNER} == {
        "org.evopolicygym.managed",
        "org.evopolicygym.role",
        "org.evopolicygym.sandbox",
        "org.evopolicygym.scope",
        "org.evopolicygym.owner",
    }


def test_role_labels_hold_managed_role_sandbox_and_owner():
    labels = LabelSet(sandbox="s-1", owner="box:42").for_role("runner")
    assert labels == {MANAGED: "true", ROLE: "runner", SANDBOX: "s-1", OWNER: "box:42"}


def test_scope_label_is_present_only_when_a_scope_is_set():
    assert SCOPE not in LabelSet(sandbox="s", owner="o").for_role("policy")
    assert LabelSet(sandbox="s", owner="o", scope="ci-7").for_role("policy")[SCOPE] == "ci-7"


def test_each_call_returns_a_fresh_dict():
    labels = LabelSet(sandbox="s", owner="o")
    first = labels.for_role("policy")
    first[ROLE] = "tampered"
    assert labels.for_role("policy")[ROLE] == "policy"


def test_selector_without_arguments_matches_all_managed_resources():
    assert selector() == [f"{MANAGED}=true"]


def test_selector_adds_one_filter_per_label_in_a_stable_order():
    filters = selector(sandbox="s-1", scope="ci", owner="box:1", role="policy")
    assert filters == [
        f"{MANAGED}=true",
        f"{OWNER}=box:1",
        f"{ROLE}=policy",
        f"{SANDBOX}=s-1",
        f"{SCOPE}=ci",
    ]


def test_labels_of_a_role_match_the_selector_of_that_sandbox():
    labels = LabelSet(sandbox="s", owner="o", scope="x").for_role("policy")
    for item in selector(sandbox="s", scope="x", role="policy"):
        key, value = item.split("=", 1)
        assert labels[key] == value


def test_owner_id_is_hostname_and_pid():
    assert owner_id() == f"{socket.gethostname()}:{os.getpid()}"
