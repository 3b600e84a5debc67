"""deploy/Dockerfile: it cannot be built here (no container engine), so what can drift is checked
against the project: every package is copied, installs are pinned by hack/constraints.txt, the
final stage runs `tessera` as a non-root user, and the ignore file never hides a copied path."""

import fnmatch
import shlex
import tomllib

from tests.support.manifests import DEPLOY, ROOT

DOCKERFILE = DEPLOY / "Dockerfile"
IGNORE = DEPLOY / "Dockerfile.dockerignore"


def instructions() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments), continuation lines joined, comments dropped."""
    out: list[tuple[str, str]] = []
    logical = ""
    for raw in DOCKERFILE.read_text().splitlines():
        line = raw.strip()
        if not logical and (not line or line.startswith("#")):
            continue
        if line.endswith("\\"):
            logical += line[:-1] + " "
            continue
        line, logical = logical + line, ""
        keyword, _, rest = line.partition(" ")
        out.append((keyword.upper(), rest.strip()))
    return out


def stages() -> list[list[tuple[str, str]]]:
    found: list[list[tuple[str, str]]] = []
    for keyword, rest in instructions():
        if keyword == "FROM":
            found.append([])
        found[-1].append((keyword, rest))
    return found


def copied_sources() -> set[str]:
    sources = set()
    for keyword, rest in instructions():
        if keyword == "COPY" and not rest.startswith("--from"):
            *srcs, _ = shlex.split(rest)
            sources.update(srcs)
    return sources


def test_both_stages_are_python_3_11_slim() -> None:
    assert [s[0][1].split()[0] for s in stages()] == ["python:3.11-slim", "python:3.11-slim"]
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert pyproject["project"]["requires-python"] == ">=3.11"


def test_every_package_and_what_the_build_reads_is_copied() -> None:
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    packages = {p.rstrip("*") for p in pyproject["tool"]["setuptools"]["packages"]["find"]["include"]}
    readme = pyproject["project"]["readme"]
    assert copied_sources() == packages | {"pyproject.toml", readme, "hack/constraints.txt"}
    assert all((ROOT / source).exists() for source in copied_sources())


def test_the_install_is_pinned_by_the_constraints() -> None:
    runs = [rest for keyword, rest in instructions() if keyword == "RUN"]
    installs = [r for r in runs if "pip install" in r]
    assert len(installs) == 1
    assert "-c hack/constraints.txt ." in installs[0]


def test_the_final_stage_runs_tessera_as_a_non_root_user() -> None:
    final = dict(stages()[-1])
    user = final["USER"].split(":")[0]
    assert user.isdigit() and int(user) != 0  # numeric, so runAsNonRoot can check it
    assert final["ENTRYPOINT"] == '["tessera"]'
    assert "/opt/tessera/bin" in final["ENV"]


def test_the_ignore_file_hides_no_copied_path() -> None:
    patterns = [line.strip() for line in IGNORE.read_text().splitlines() if line.strip() and not line.startswith("#")]
    for source in copied_sources():
        hidden = [p for p in patterns if fnmatch.fnmatch(source, p) or source.startswith(p.rstrip("/") + "/")]
        assert hidden == [], source
