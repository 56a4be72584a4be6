#!/usr/bin/env bash
# Regenerates the docs' pictures of the Kubeflow Pipelines UI (docs/images/ui/*.png): the browser
# tests of the UI (tests/containers/test_kfp_ui.py) save their screenshots there. They start the
# genuine node's bed with Kubeflow Pipelines as the test suite does (a few minutes warm). The
# pictures are never edited by hand: run this again after a change the UI shows.
#
#   bash docs/screenshots.sh
set -euo pipefail
cd "$(dirname "$0")/.."
here=tests/cluster
. tests/cluster/python.sh
KFDIST_UI_SCREENSHOTS=docs/images/ui "$python" -m pytest -q -n 0 -p no:cacheprovider \
  tests/containers/test_kfp_ui.py
