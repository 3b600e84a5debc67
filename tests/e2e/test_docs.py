"""Every command of the README and docs/ runs as written, against one `tessera up --demo`.

The commands are the docs' ```sh blocks (tests/e2e/docblocks.py has the convention, which
docs/dev/setup.md states for writers). Each block runs with bash in a working directory laid out
like the repository root — the checkout's files, `.venv`, and `tessera-data/` where `make run`
keeps it — with KUBECONFIG exported and `tessera` on PATH, as a user's second terminal has them.
Every command must exit 0 (or the code a `docs-test: exit N` marker names), and what a ```text
block right after shows must be printed, in the lines that stay the same from run to run
(tests/e2e/docoutput.py). curl reads a `.curlrc` with `fail-with-body`, so an HTTP error fails the
command as it would fail the reader. Blocks marked `docs-test: skip — REASON` are reported as
skipped, with the reason; a block that is neither run nor skipped for a reason fails the first
test. The documents run in order, README first, each block in its own shell: blocks may change the
cluster (a GPU fault, a pod created) but never rely on an earlier block's shell.
"""

from __future__ import annotations

import dataclasses
import shlex
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Final

import pytest

from tests.e2e import docoutput
from tests.e2e.docblocks import Commands, Document, documents, parse
from tests.support import sockets
from tests.support.up import Up

pytestmark = pytest.mark.e2e

REPO: Final = Path(__file__).resolve().parents[2]
DOCUMENTS: Final = documents(REPO)
BLOCK_TIMEOUT_S: Final = 120.0
#: How the failing command is named: the block's script prints this line before it exits.
_FAILED: Final = "docs-test: failed:"
#: The Makefile's record that `.venv` has this checkout installed (see `root`).
_MAKE_STAMP: Final = ".installed"


class Shell:
    """Runs a block's commands as the reader's terminal would: bash, in the working directory."""

    def __init__(self, root: Path, env: dict[str, str]) -> None:
        self.root = root
        self.env = env

    def problem(self, block: Commands) -> str | None:
        """What is wrong with the block as written, or None: its files written, its commands run."""
        for name, content in block.files:
            (self.root / name).parent.mkdir(parents=True, exist_ok=True)
            (self.root / name).write_text(content + "\n", encoding="utf-8")
        try:
            result = subprocess.run(
                ["bash", "--noprofile", "--norc", "-c", _script(block)],
                cwd=self.root,
                env=self.env,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
                timeout=BLOCK_TIMEOUT_S,
                check=False,
            )
        except subprocess.TimeoutExpired as e:
            return f"{block.where}: still running after {BLOCK_TIMEOUT_S:g} s:\n{_text(e.output)}"
        if result.returncode != 0:
            return f"{block.where}: {result.stdout}"
        if block.output is not None and (line := docoutput.missing(block.output, result.stdout)) is not None:
            return f"{block.where}: printed no line like the doc's\n  {line}\nit printed:\n{result.stdout}"
        return None


def _script(block: Commands) -> str:
    """The commands one after the other, each followed by a check of its exit code (on a line of its
    own: a command may end in a comment)."""
    lines = ["set -o pipefail"]
    for command in block.commands:
        lines += [
            command,
            f'__status=$?; if [ "$__status" -ne {block.exit_code} ]; then '
            f'printf "\\n{_FAILED} exit %s, not {block.exit_code}: %s\\n" "$__status" {shlex.quote(command)}; '
            "exit 1; fi",
        ]
    return "\n".join(lines) + "\n"


def _text(output: str | bytes | None) -> str:
    return output.decode(errors="replace") if isinstance(output, bytes) else output or ""


@pytest.fixture(scope="module")
def root() -> Iterator[Path]:
    """A directory laid out like the repository root (its entries linked, `.venv` this environment),
    short enough for the sockets `tessera up` makes in `tessera-data/`."""
    directory = sockets.short_tempdir("tessera-docs-")
    for entry in REPO.iterdir():
        if not entry.name.startswith(".") and entry.name != "tessera-data":
            (directory / entry.name).symlink_to(entry)
    venv = directory / ".venv"
    venv.mkdir()
    for entry in Path(sys.prefix).iterdir():
        if entry.name != _MAKE_STAMP:
            (venv / entry.name).symlink_to(entry)
    (venv / _MAKE_STAMP).touch()  # newer than pyproject.toml: a `make` here never pip-installs this tree
    yield directory
    shutil.rmtree(directory, ignore_errors=True)


@pytest.fixture(scope="module")
def shell(root: Path) -> Iterator[Shell]:
    """`tessera up --demo` in `tessera-data/` (`make run`), and a shell set up to talk to it."""
    curl_home = root / ".docs-test"
    curl_home.mkdir()
    (curl_home / ".curlrc").write_text("fail-with-body\nsilent\nshow-error\n", encoding="utf-8")
    with Up.started(root / "tessera-data", "--demo") as up:
        env = {
            **up.env,
            "KUBECONFIG": str(up.kubeconfig),
            "PATH": f"{Path(sys.executable).parent}:{up.env.get('PATH', '')}",
            "CURL_HOME": str(curl_home),
        }
        yield Shell(root, env)
        code = up.interrupt()
        assert code == 0, up.output()


def _param(block: Commands) -> object:
    marks = [pytest.mark.skip(reason=f"{block.where}: {block.skip}")] if block.skip is not None else []
    return pytest.param(block, id=block.where, marks=marks)


def test_every_block_is_run_or_skipped_for_a_reason() -> None:
    problems = [problem for document in DOCUMENTS for problem in document.problems]
    assert problems == [], "\n".join(problems)


def test_the_readme_tour_is_run() -> None:
    readme = next(d for d in DOCUMENTS if d.path == "README.md")
    run = [c for c in readme.commands if c.skip is None]
    assert any("kubectl get nodes" in command for c in run for command in c.commands)
    assert all(c.output is not None for c in run), "each of the tour's blocks shows what it prints"


@pytest.mark.parametrize("block", [_param(c) for d in DOCUMENTS for c in d.commands])
def test_doc_commands_run_as_written(block: Commands, shell: Shell) -> None:
    problem = shell.problem(block)
    if problem is not None:
        pytest.fail(problem, pytrace=False)


def test_an_unquoted_custom_columns_path_fails(shell: Shell) -> None:
    """The bug this test was written for: unquoted, `koordinator\\.sh` loses its backslash to the
    shell and every device column prints `<none>`, with exit code 0."""
    readme = next(d for d in DOCUMENTS if d.path == "README.md")
    tour = next(c for c in readme.commands if any("custom-columns" in command for command in c.commands))
    unquoted = tuple(command.replace("'", "") if "custom-columns" in command else command for command in tour.commands)
    assert unquoted != tour.commands
    problem = shell.problem(dataclasses.replace(tour, commands=unquoted))
    assert problem is not None
    assert "printed no line like the doc's" in problem
    assert "<none>" in problem


def test_a_command_that_fails_is_named(shell: Shell) -> None:
    block = Commands("x.md:1", ("true", "kubectl get devices no-such-node   # a comment", "true"))
    problem = shell.problem(block)
    assert problem is not None
    assert f"{_FAILED} exit 1, not 0: kubectl get devices no-such-node   # a comment" in problem
    assert 'devices.scheduling.koordinator.sh "no-such-node" not found' in problem


def test_an_http_error_fails_the_command(shell: Shell) -> None:
    """curl exits 0 on a 404 of its own accord; the shell's `.curlrc` makes it fail, as it fails
    the reader who reads the answer."""
    url = "$(jq -r '.components[\"agent/sim-1\"].url' tessera-data/up.json)"
    token = "$(kubectl config view --raw -o jsonpath='{.users[0].user.token}')"
    block = Commands(
        "x.md:1", (f'curl -X POST -H "Authorization: Bearer {token}" "{url}/debug/simulate/xid?minor=33&xid=79"',)
    )
    problem = shell.problem(block)
    assert problem is not None
    assert "no simulated GPU with minor 33" in problem
    assert "The requested URL returned error: 404" in problem


def test_a_failure_the_doc_shows_must_happen(shell: Shell) -> None:
    block = Commands("x.md:1", ("kubectl get devices sim-1 -o name",), exit_code=1)
    problem = shell.problem(block)
    assert problem is not None
    assert f"{_FAILED} exit 0, not 1" in problem


# --- the convention, on documents written for the purpose (no cluster) ------------------------------------------
def _doc(markdown: str) -> Document:
    return parse("x.md", markdown)


def test_blocks_and_their_markers_are_read() -> None:
    document = _doc(
        "Intro.\n\n"
        "<!-- docs-test: file pods/a.yaml -->\n"
        "```yaml\nkind: Pod\n```\n\n"
        "```sh\n# a comment line\nkubectl apply -f pods/a.yaml \\\n    --dry-run=client   # trailing\n\n"
        "echo done\n```\n\n"
        "```text\npod/a created (dry run)\n```\n\n"
        "<!-- docs-test: skip — needs a real cluster -->\n\n"
        "```sh\nkubectl drain gpu-1\n```\n\n"
        "- a list item:\n\n"
        "  <!-- docs-test: exit 1 -->\n"
        "  ```sh\n  false\n  ```\n"
    )
    assert document.problems == ()
    first, skipped, failing = document.commands
    assert first.where == "x.md:8"
    assert first.commands == ("kubectl apply -f pods/a.yaml \\\n    --dry-run=client   # trailing", "echo done")
    assert first.output == "pod/a created (dry run)"
    assert first.files == (("pods/a.yaml", "kind: Pod"),)
    assert (skipped.skip, skipped.output) == ("needs a real cluster", None)
    assert (failing.commands, failing.exit_code, failing.skip) == (("false",), 1, None)


@pytest.mark.parametrize(
    ("markdown", "problem"),
    [
        ("```\nkubectl get nodes\n```\n", "x.md:1: a block without a language"),
        ("```bash\nkubectl get nodes\n```\n", "x.md:1: ```bash: fence commands as ```sh"),
        ("```text\n$ kubectl get nodes\nNAME\n```\n", "x.md:1: a `$ ` prompt in a ```text block"),
        ("```sh\n$ kubectl get nodes\n```\n", "x.md:1: a `$ ` prompt in a ```sh block"),
        ("```sh\n# only a comment\n```\n", "x.md:1: a ```sh block without a command"),
        ("<!-- docs-test: skip -->\n```sh\nmake run\n```\n", "say why it is skipped"),
        ("<!-- docs-test: skip — why -->\nText.\n```sh\nmake run\n```\n", "x.md:1: a docs-test marker that no"),
        ("```sh\ntrue\n```\n<!-- docs-test: skip — why -->\n", "x.md:4: a docs-test marker that no"),
        ("<!-- docs-test: file a.yaml -->\n```sh\ntrue\n```\n", "names the content of a file, not commands"),
        ("<!-- docs-test: file ../a.yaml -->\n```yaml\na: 1\n```\n", "the file goes in the working directory"),
        ("<!-- docs-test: exit 1 -->\n```text\nError\n```\n", "belongs before a ```sh block"),
        ("<!-- docs-test: run twice -->\n```sh\ntrue\n```\n", "not `skip — REASON`, `exit N` or `file NAME`"),
        ("```sh\ntrue\n", "x.md:1: a fence that is never closed"),
    ],
)
def test_what_breaks_the_convention_is_a_problem(markdown: str, problem: str) -> None:
    problems = _doc(markdown).problems
    assert any(problem in p for p in problems), problems


def test_a_text_block_is_output_only_right_after_commands() -> None:
    document = _doc("```sh\ntrue\n```\nSome prose.\n```text\nNAME\n```\n```sh\ntrue\n```\n")
    assert [c.output for c in document.commands] == [None, None]


@pytest.mark.parametrize(
    ("shown", "printed"),
    [
        ("NAME    GPU   RDMA\nsim-1   800   400", "NAME  GPU     RDMA\nvm    <none>  <none>\nsim-1 700     300"),
        ("Pod x: pending after 1 attempt, …", "Pod x: pending after 3 attempts, unschedulable"),
        ("a\n…\nc", "a\nb\nc\nd"),
        ("listening on 127.0.0.1:35271 in 2.2 s", "listening on 127.0.0.1:41005 in 0.9 s"),
    ],
)
def test_output_is_compared_in_what_stays_the_same(shown: str, printed: str) -> None:
    assert docoutput.missing(shown, printed) is None


@pytest.mark.parametrize(
    ("shown", "printed", "first_missing"),
    [
        ("NAME GPU\nsim-1 800", "NAME GPU\nsim-1 <none>", "sim-1 800"),
        ("too-big  -  pending", "too-small  -  pending", "too-big  -  pending"),
        ("a\nb", "b\na", "b"),
        (
            "default/my-pod  sim-2  gpu 2 [gpu-core=25 …]",
            "default/my-pod  -  0/3 nodes are available: invalid device request: …",
            "default/my-pod  sim-2  gpu 2 [gpu-core=25 …]",
        ),
    ],
)
def test_output_that_differs_in_names_or_order_is_missing(shown: str, printed: str, first_missing: str) -> None:
    assert docoutput.missing(shown, printed) == first_missing


@pytest.mark.parametrize(
    ("shown", "printed", "found"),
    [
        ("2 attempts", "1 attempt", True),
        ("Pods: docs-shared-… docs-shared-…", "Pods: docs-shared-x-ckpz4 docs-shared-x-lsbkl", True),
        ("3 pods", "3 pod-lists", False),
    ],
    ids=["a-plural-counts-as-its-singular", "a-generated-name-ending-in-a-digit", "a-word-is-not-its-plural"],
)
def test_printed_output_is_compared_in_what_stays_the_same(shown: str, printed: str, found: bool) -> None:
    assert (docoutput.missing(shown, printed) is None) is found
