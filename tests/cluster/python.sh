# Sourced by up.sh and down.sh: sets `python` to an interpreter with the test bed's packages
# ($PYTHON, else the project's .venv, else `python` on the PATH), or says in one line what to do.
repo=$(cd "$here/../.." && pwd)
python=${PYTHON:-}
if [ -z "$python" ]; then
  if [ -x "$repo/.venv/bin/python" ]; then python=$repo/.venv/bin/python; else python=python; fi
fi
if ! "$python" -c 'import yaml, cryptography' >/dev/null 2>&1; then
  echo "$(basename "$0"): '$python' lacks the test bed's packages (PyYAML, cryptography):" \
    "run it from the project's environment (. .venv/bin/activate after" \
    "pip install -e '.[test]'), or set PYTHON to that environment's python" >&2
  exit 2
fi
