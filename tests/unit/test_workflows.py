"""The GitHub workflows: actionlint finds nothing wrong in them (and does find a broken one), CI
runs `.ci/run`, and the release builds and pushes every image with `containers/build.sh` and
attaches pipelines compiled against the pushed images."""

import os
import shutil
import subprocess
import sys

import yaml

ROOT = os.path.join(os.path.dirname(__file__), os.pardir, os.pardir)
WORKFLOWS = os.path.join(ROOT, ".github", "workflows")


def _actionlint() -> str:
    found = shutil.which("actionlint", path=os.path.dirname(sys.executable)) or shutil.which(
        "actionlint")
    assert found, "actionlint is missing: the test extra installs it (pip install -e '.[test]')"
    return found


def _lint(*paths: str) -> subprocess.CompletedProcess:
    return subprocess.run([_actionlint(), "-no-color", *paths], capture_output=True, text=True,
                          timeout=120)


def test_actionlint_passes_both_workflows():
    paths = [os.path.join(WORKFLOWS, name) for name in ("ci.yml", "release.yml")]
    done = _lint(*paths)
    assert done.returncode == 0, done.stdout + done.stderr


def test_actionlint_fails_a_broken_workflow(tmp_path):
    with open(os.path.join(WORKFLOWS, "release.yml")) as f:
        broken = f.read().replace("${{ secrets.GITHUB_TOKEN }}", "${{ secrets.GITHUB_TOKEN }")
    path = tmp_path / "release.yml"
    path.write_text(broken)
    assert _lint(str(path)).returncode != 0


def _steps(name: str):
    with open(os.path.join(WORKFLOWS, name)) as f:
        workflow = yaml.safe_load(f)
    [job] = workflow["jobs"].values()
    return workflow, [step.get("run", "") for step in job["steps"]]


def test_ci_runs_the_projects_ci_entry_point_on_debian_12():
    workflow, runs = _steps("ci.yml")
    assert "bash .ci/run" in runs
    assert workflow["jobs"]["test"]["container"]["image"] == "debian:bookworm"


def test_the_release_pushes_every_image_and_attaches_pipelines_compiled_against_them():
    workflow, runs = _steps("release.yml")
    assert workflow[True]["push"]["tags"] == ["v*"]  # YAML 1.1 reads the key `on` as True
    build = next(r for r in runs if "containers/build.sh" in r)
    assert "--push" in build and '--registry "${REGISTRY}"' in build and '--tag "${VERSION}"' in build
    compile_ = next(r for r in runs if "kfdist compile" in r)
    assert '--registry "${REGISTRY}"' in compile_ and '--tag "${VERSION}"' in compile_
    assert any("gh release create" in r and "dist/pipelines/*.yaml" in r for r in runs)
