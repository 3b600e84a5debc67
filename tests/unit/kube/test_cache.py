"""The informer's store: indexes kept in step, and replace() reporting only real changes."""

import pytest

from kube.cache import Store


def by_node(obj: dict[str, str]) -> list[str]:
    return [obj["node"]] if obj.get("node") else []


def test_indexes_follow_updates_and_deletes() -> None:
    store: Store[dict[str, str]] = Store({"node": by_node})
    store.upsert("a", "1", {"node": "n1"})
    store.upsert("b", "1", {"node": "n1"})
    store.upsert("a", "2", {"node": "n2"})
    assert store.by_index("node", "n1") == [{"node": "n1"}]
    assert sorted(store.index_values("node")) == ["n1", "n2"]
    store.delete("b")
    assert store.by_index("node", "n1") == [] and store.index_values("node") == ["n2"]
    assert len(store) == 1 and "a" in store and store.resource_version("a") == "2"


def test_replace_reports_adds_updates_and_deletes_only() -> None:
    store: Store[dict[str, str]] = Store()
    store.upsert("same", "1", {"v": "same"})
    store.upsert("changed", "1", {"v": "old"})
    store.upsert("gone", "1", {"v": "gone"})
    changes = store.replace({"same": ("1", {"v": "same"}), "changed": ("2", {"v": "new"}), "new": ("3", {"v": "n"})})
    summary = {(c.key, c.old is None, c.new is None) for c in changes}
    assert summary == {("gone", False, True), ("changed", False, False), ("new", True, False)}
    assert sorted(store.keys()) == ["changed", "new", "same"]


def test_add_indexer_indexes_what_is_there() -> None:
    store: Store[dict[str, str]] = Store()
    store.upsert("a", "1", {"node": "n1"})
    store.add_indexer("node", by_node)
    assert store.by_index("node", "n1") == [{"node": "n1"}]


def test_a_failing_indexer_leaves_the_store_consistent(caplog: pytest.LogCaptureFixture) -> None:
    def picky(obj: dict[str, str]) -> list[str]:
        if obj.get("bad"):
            raise KeyError("bad")
        return [obj["node"]]

    store: Store[dict[str, str]] = Store({"node": picky})
    store.upsert("a", "1", {"node": "n1", "bad": "yes"})
    store.upsert("b", "1", {"node": "n1"})
    store.delete("a")
    assert store.by_index("node", "n1") == [{"node": "n1"}] and len(store) == 1
    assert "Indexer failed" in caplog.text
