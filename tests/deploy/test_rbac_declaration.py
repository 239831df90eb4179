"""One declaration of the controller's permissions (``contracts/rbac.GRANTS``): the Roles in ``deploy/``
grant exactly it (a permission missing or extra is named, with the grant it belongs to), and the table of
``docs/rbac.md`` is it (``just generate`` writes it; tests/test_generated.py checks it). ``model-catalog
check`` asks for each of its permissions, and tests/adapters/kube/test_rbac.py runs every adapter with
exactly it, so a verb added in one place and forgotten in another fails here."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

from contracts import rbac

REPO = Path(__file__).resolve().parents[2]
DEFAULTS = rbac.DEFAULT_SETTINGS

Access = tuple[str, str, str, str, str]  # namespace, group, resource, name ("" for any), verb


ROLES_IN_DEPLOY = "the Roles in deploy/controller/"
RULE_KEYS = ("apiGroups", "resources", "verbs")  # a rule without one of them grants nothing


def granted_by_rules(namespace: str, rules: Sequence[Mapping[str, Any]]) -> set[Access]:
    out = set()
    for rule in rules:
        for group in rule.get("apiGroups") or []:
            for resource in rule.get("resources") or []:
                for name in rule.get("resourceNames") or [""]:
                    for verb in rule.get("verbs") or []:
                        out.add((namespace, group, resource, name, verb))
    return out


def _incomplete(file: str, rules: Sequence[Mapping[str, Any]]) -> list[str]:
    return [
        f"{file}: a rule without {', '.join(k for k in RULE_KEYS if not rule.get(k))} grants nothing: {rule}"
        for rule in rules
        if not all(rule.get(k) for k in RULE_KEYS)
    ]


def _access(p: rbac.Permission) -> Access:
    resource = f"{p.resource}/{p.subresource}" if p.subresource else p.resource
    return (p.namespace, p.group, resource, p.name, p.verb)


def declared() -> set[Access]:
    return {_access(p) for p in rbac.permissions(DEFAULTS)}


def _differences(granted: set[Access], where: str) -> list[str]:
    """Each declared permission ``where`` lacks (naming its grant) and each it grants beyond them."""
    missing = [
        f"{p.role.file if where == ROLES_IN_DEPLOY else where} does not grant {p.describe()} "
        f"({p.grant.who}: contracts/rbac.GRANTS)"
        for p in rbac.permissions(DEFAULTS)
        if _access(p) not in granted
    ]
    extra = [
        f"{where} grants {access}, which contracts/rbac.GRANTS does not" for access in granted - declared()
    ]
    return sorted(set(missing)) + sorted(extra)


def test_the_deploy_roles_grant_exactly_the_declaration_to_the_controllers_service_account() -> None:
    granted: set[Access] = set()
    incomplete: list[str] = []
    files = sorted({role.file for role in rbac.ROLES.values()})
    for file in files:
        docs = [d for d in yaml.safe_load_all((REPO / file).read_text()) if d]
        roles = [d for d in docs if d["kind"] == "Role"]
        bindings = [d for d in docs if d["kind"] == "RoleBinding"]
        assert len(roles) == 1 and len(bindings) == 1, file
        role, binding = roles[0], bindings[0]
        namespace = role["metadata"]["namespace"]
        expected = {ref.name for key, ref in rbac.ROLES.items() if ref.file == file}
        assert {role["metadata"]["name"]} == expected, file
        assert binding["roleRef"]["name"] == role["metadata"]["name"]
        assert binding["subjects"] == [
            {"kind": "ServiceAccount", "name": rbac.SERVICE_ACCOUNT, "namespace": DEFAULTS[rbac.NAMESPACE]}
        ]
        granted |= granted_by_rules(namespace, role["rules"])
        incomplete += _incomplete(file, role["rules"])
    problems = _differences(granted, ROLES_IN_DEPLOY) + incomplete
    assert not problems, "\n".join(problems)
    for key, ref in rbac.ROLES.items():  # the Role named for a namespace is the one in that namespace
        namespace = DEFAULTS[key]
        docs = [d for d in yaml.safe_load_all((REPO / ref.file).read_text()) if d and d["kind"] == "Role"]
        assert docs[0]["metadata"]["namespace"] == namespace


def test_role_rules_grant_what_the_permissions_ask() -> None:
    granted = set()
    for namespace, rules in rbac.role_rules(DEFAULTS).items():
        granted |= granted_by_rules(namespace, rules)
    problems = _differences(granted, "rbac.role_rules")
    assert not problems, "\n".join(problems)


def test_the_docs_table_is_the_declaration() -> None:
    lines = (REPO / "docs" / "rbac.md").read_text().splitlines()
    start = next(i for i, line in enumerate(lines) if "rbac-table" in line) + 3  # marker, header, separator
    end = next(i for i in range(start, len(lines)) if not lines[i].startswith("|"))
    assert lines[start:end] == rbac.table_rows(DEFAULTS), "docs/rbac.md's table is stale: run `just generate`"
