"""`tessera up`'s component identities: tokens kept across runs, one table entry per component."""

from pathlib import Path

from apiserver.authz.identity import parse_token_file
from cli.localcluster import identities


def test_tokens_are_kept_across_runs_and_readable_by_the_api_server(tmp_path: Path) -> None:
    path = tmp_path / "tokens.csv"
    first = identities.ensure_tokens(path, identities.IDENTITIES.values())
    assert sorted(first) == [
        "tessera-agent",
        "tessera-controller",
        "tessera-dashboard",
        "tessera-descheduler",
        "tessera-kube-controller-manager",
        "tessera-scheduler",
    ]
    again = identities.ensure_tokens(path, [*identities.IDENTITIES.values(), identities.Identity("tessera-new")])
    assert {k: again[k] for k in first} == first and "tessera-new" in again
    users = {u.name: u for u in parse_token_file(path.read_text()).values()}
    scheduler = users["system:serviceaccount:tessera-system:tessera-scheduler"]
    assert "system:serviceaccounts:tessera-system" in scheduler.groups
    assert path.stat().st_mode & 0o077 == 0


def test_every_component_has_an_identity() -> None:
    assert identities.identity_of("agent/sim-3").service_account == "tessera-agent"
    assert identities.identity_of("scheduler").user == "system:serviceaccount:tessera-system:tessera-scheduler"
    assert identities.identity_of("dashboard").service_account == "tessera-dashboard"


def test_deploy_rbac_is_what_tessera_up_applies() -> None:
    kinds = {d["kind"] for d in identities.rbac_manifests()}
    assert kinds == {"Namespace", "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding"}
    accounts = {d["metadata"]["name"] for d in identities.rbac_manifests() if d["kind"] == "ServiceAccount"}
    assert accounts == {i.service_account for i in identities.IDENTITIES.values() if i.deployed}
    # What only tessera up runs has its rights from LOCAL_ROLES instead.
    local = {s["name"] for d in identities.LOCAL_ROLES for s in d.get("subjects", ())}
    assert local >= {i.service_account for i in identities.IDENTITIES.values() if not i.deployed}
