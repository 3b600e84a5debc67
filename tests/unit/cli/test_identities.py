"""`tessera up`'s identities, (component, node): tokens kept across runs, one table entry per
component, one identity per node."""

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
        "tessera-metrics-scraper",
        "tessera-scheduler",
    ]
    again = identities.ensure_tokens(path, [*identities.IDENTITIES.values(), identities.Identity("tessera-new")])
    assert {k: again[k] for k in first} == first and "tessera-new" in again
    users = {u.name: u for u in parse_token_file(path.read_text()).values()}
    scheduler = users["system:serviceaccount:tessera-system:tessera-scheduler"]
    assert "system:serviceaccounts:tessera-system" in scheduler.groups
    assert path.stat().st_mode & 0o077 == 0


def test_every_component_has_an_identity_and_every_agent_its_nodes() -> None:
    agent = identities.identity_of("agent/sim-3")
    assert (agent.user, agent.groups, agent.key) == ("system:node:sim-3", ("system:nodes",), "node-sim-3")
    assert (agent.component, agent.node) == ("agent", "sim-3")
    assert (identities.identity_of("scheduler").component, identities.identity_of("scheduler").node) == (
        "scheduler",
        "",
    )
    assert identities.identity_of("agent/sim-4").user == "system:node:sim-4"
    assert identities.identity_of("scheduler").user == "system:serviceaccount:tessera-system:tessera-scheduler"
    assert identities.identity_of("dashboard").service_account == "tessera-dashboard"
    # deploy/'s DaemonSet identity stays in the table, for the tests of deploy/'s RBAC.
    assert identities.IDENTITIES["agent"].user == "system:serviceaccount:tessera-system:tessera-agent"


def test_node_tokens_are_per_node_and_dropped_with_the_node(tmp_path: Path) -> None:
    path = tmp_path / "tokens.csv"
    first = identities.ensure_tokens(path, identities.up_identities(["scheduler", "agent/sim-1", "agent/sim-2"]))
    assert sorted(first) == ["node-sim-1", "node-sim-2", "tessera-scheduler"]
    assert first["node-sim-1"] != first["node-sim-2"]
    users = {u.name: u for u in parse_token_file(path.read_text()).values()}
    assert users["system:node:sim-1"].groups == ("system:nodes", "system:authenticated")
    again = identities.ensure_tokens(path, identities.up_identities(["scheduler", "agent/sim-1"]))
    assert again == {k: first[k] for k in ("node-sim-1", "tessera-scheduler")}
    assert "system:node:sim-2" not in {u.name for u in parse_token_file(path.read_text()).values()}


def test_deploy_rbac_is_what_tessera_up_applies() -> None:
    kinds = {d["kind"] for d in identities.rbac_manifests()}
    assert kinds == {"Namespace", "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding"}
    accounts = {d["metadata"]["name"] for d in identities.rbac_manifests() if d["kind"] == "ServiceAccount"}
    assert accounts == {i.service_account for i in identities.IDENTITIES.values() if i.deployed}
    # What only tessera up runs has its rights from LOCAL_ROLES instead.
    local = {s["name"] for d in identities.LOCAL_ROLES for s in d.get("subjects", ())}
    assert local >= {i.service_account for i in identities.IDENTITIES.values() if not i.deployed}
