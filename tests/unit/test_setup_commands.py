"""The README's set-up commands and CI run the same thing: `.ci/run` ends in the README's test
command, which installs the system packages the tests need before anything else."""

import os
import re
import subprocess

ROOT = os.path.join(os.path.dirname(__file__), os.pardir, os.pardir)


def _readme_commands():
    with open(os.path.join(ROOT, "README.md")) as f:
        setup = f.read().split("## Set up", 1)[1]
    block = re.search(r"```bash\n(.*?)```", setup, re.S).group(1)
    return [line for line in block.splitlines() if line and not line.startswith("#")]


def test_the_readme_has_two_set_up_commands_and_ci_runs_the_second():
    main, tests = _readme_commands()
    assert "kfdist run mnist" in main and tests.endswith("pytest -q")
    with open(os.path.join(ROOT, ".ci", "run")) as f:
        lines = [line for line in f.read().splitlines() if line and not line.startswith("#")]
    assert lines[-1] == tests


def test_the_test_command_installs_the_system_packages_first():
    _, tests = _readme_commands()
    assert tests.startswith("bash .ci/system-packages.sh && ")
    with open(os.path.join(ROOT, ".ci", "system-packages.sh")) as f:
        script = f.read()
    for package in ("chromium", "openssh-server", "openmpi-bin", "cmake"):
        assert package in script
    done = subprocess.run(["bash", "-n", os.path.join(ROOT, ".ci", "system-packages.sh")],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
