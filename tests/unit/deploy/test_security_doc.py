"""docs/security.md says what each identity may do, and it is what deploy/'s RBAC grants: its table
is what hack/security_rbac_table.py generates from the manifests, so the two cannot drift."""

from types import ModuleType

from tests.support import hackscripts, manifests
from tests.support.manifests import ROOT

DOC = ROOT / "docs" / "security.md"


def generator() -> ModuleType:
    return hackscripts.load("security_rbac_table")


def test_the_docs_identities_table_is_generated_from_deploys_rbac() -> None:
    table = generator()
    doc = DOC.read_text()
    assert table.replace(doc, table.table(table.rows(table.manifests()))) == doc, (
        "run `python hack/security_rbac_table.py --write`"
    )


def test_every_identity_and_every_grant_is_in_the_table() -> None:
    table = generator()
    found = table.rows(table.manifests())
    accounts = {f"`system:serviceaccount:{m.namespace}:{m.name}`" for m in manifests.of_kind("ServiceAccount")}
    assert {who for who, _, _ in found} == accounts | {"whoever you bind it to"}
    bindings = manifests.of_kind("ClusterRoleBinding", "RoleBinding")
    assert len([row for row in found if row[0] != "whoever you bind it to"]) == len(bindings)
    # A verb taken out of a role shows in the table (the generator reads rules, not names).
    scheduler = next(rules for who, where, rules in found if "tessera-scheduler`" in where)
    assert "create pods/binding (core)" in scheduler
