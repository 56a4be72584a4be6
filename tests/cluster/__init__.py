"""The cluster test bed: a real Kubernetes control plane and the operators' own controllers, built
from their Go modules (`build.sh`), with a node agent that runs pods as podman containers.

`bed.start(DIR)` / `bed.stop(DIR)` (or `up.sh DIR` / `down.sh DIR`) bring it up and down;
`fixture.py` holds the pytest fixture that one test session shares.
"""
