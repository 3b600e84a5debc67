"""docs/user/deploy.md's Helm section stays true to the chart: its values table is what
hack/helm_values_table.py generates from values.yaml, every value is documented, and the values
its commands set exist."""

import re
from types import ModuleType

import helm_python as helm
import pytest
import yaml

from tests.support import chart, hackscripts
from tests.support.manifests import ROOT

DOC = ROOT / "docs" / "user" / "deploy.md"


def generator() -> ModuleType:
    """hack/helm_values_table.py, imported from its file (hack/ is not a package)."""
    return hackscripts.load("helm_values_table")


def values_text() -> str:
    return (chart.CHART / "values.yaml").read_text()


def test_the_docs_values_table_is_generated_from_values_yaml() -> None:
    table = generator()
    doc = DOC.read_text()
    generated = table.table(table.rows(values_text()))
    assert table.replace(doc, generated) == doc, "run `python hack/helm_values_table.py --write`"


def test_every_value_is_documented() -> None:
    table = generator()
    documented = {row.path for row in table.rows(values_text())}
    for leaf in table.leaves(yaml.safe_load(values_text())):
        parts = leaf.split(".")
        covering = {".".join(parts[:n]) for n in range(1, len(parts) + 1)}
        assert covering & documented, f"{leaf}: no `# --` comment in values.yaml documents it"
    assert all(row.description for row in table.rows(values_text()))


def test_the_generator_reads_comments_and_nesting() -> None:
    text = """
# not a description
a:
  # -- the b
  # (continued)
  b: 1
  c: {d: 2}
# -- the e, whose children are its value
e:
  # -- not a row: inside e
  f: [1]
"""
    rows = generator().rows(text)
    assert [(r.path, r.default, r.description) for r in rows] == [
        ("a.b", 1, "the b (continued)"),
        ("e", {"f": [1]}, "the e, whose children are its value"),
    ]


def helm_commands() -> list[str]:
    blocks = re.findall(r"```sh\n(.*?)```", DOC.read_text(), flags=re.DOTALL)
    lines = [line for block in blocks for line in block.replace("\\\n", " ").splitlines()]
    return [line for line in lines if line.startswith("helm ")]


def test_helm_commands_name_the_chart_and_set_values_that_exist() -> None:
    commands = helm_commands()
    assert {c.split()[1] for c in commands} >= {"install", "upgrade"}
    values = yaml.safe_load(values_text())
    for command in commands:
        assert "deploy/helm/tessera" in command.split()
        for assignment in re.findall(r"--set (\S+)", command):
            path = assignment.partition("=")[0]
            node = values
            for key in path.split("."):
                assert isinstance(node, dict) and key in node, f"{command}: {path} is not a value of the chart"
                node = node[key]
            # As `helm --set` parses it, and the schema accepts it.
            chart.render(helm.parse_set_string(assignment))


@pytest.mark.parametrize("text", ["helm uninstall tessera --namespace tessera-system", "values.schema.json"])
def test_the_section_says(text: str) -> None:
    assert text in DOC.read_text()
