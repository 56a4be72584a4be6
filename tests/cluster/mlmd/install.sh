#!/usr/bin/env bash
# Creates the virtual environment the mlmd stand-in server runs in (requirements.txt beside this
# script: ml-metadata pins protobuf below 5, so it cannot share the project's environment), and
# prints its python's path on stdout.
#
#   python=$(bash tests/cluster/mlmd/install.sh)
#   "$python" tests/cluster/mlmd/server.py --port 8080 --db /tmp/mlmd.sqlite
#
# The environment lives in CACHE/mlmd-venv/KEY/, KEY a hash of requirements.txt and the
# interpreter's version, and is reused while both stay the same. CACHE is $KFDIST_CLUSTER_CACHE,
# or ~/.cache/kfdist/cluster. The interpreter is $PYTHON3, else python3: ml-metadata is a binary
# wheel, so one PyPI has no 1.17.1 wheel for (CPython 3.11 has one) fails the install. It installs
# with uv when uv is on the PATH, else with pip.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
requirements=$here/requirements.txt
cache=${KFDIST_CLUSTER_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/kfdist/cluster}
python3=${PYTHON3:-python3}
if ! py_version=$("$python3" -c 'import sys; print(sys.version.split()[0])' 2>/dev/null); then
  echo "install.sh: no Python interpreter at '$python3'; set PYTHON3 to a CPython 3.11" >&2
  exit 1
fi

key=$({ cat "$requirements"; echo "python $py_version"; } | sha256sum | cut -c1-16)
venv=$cache/mlmd-venv/$key
mkdir -p "$cache/mlmd-venv"

# One installer at a time: a second waits, then finds the environment ready.
exec 9>"$cache/mlmd-venv/$key.lock"
if command -v flock >/dev/null 2>&1; then flock 9; fi

# The marker is written last, so an environment whose install was interrupted is made anew.
if [ ! -f "$venv/.installed" ]; then
  rm -rf "$venv"
  echo "install.sh: creating $venv (python $py_version)" >&2
  if command -v uv >/dev/null 2>&1; then
    uv venv --quiet --python "$python3" "$venv" >&2
    uv pip install --quiet --compile-bytecode --python "$venv/bin/python" -r "$requirements" >&2
  else
    "$python3" -m venv "$venv"
    "$venv/bin/python" -m pip install --quiet --disable-pip-version-check \
      -r "$requirements" >&2
  fi
  "$venv/bin/python" -c 'import ml_metadata.metadata_store, grpc' >&2
  touch "$venv/.installed"
fi
echo "$venv/bin/python"
