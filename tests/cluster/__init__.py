"""The cluster test bed: a real Kubernetes control plane, node (the kubelet on containerd) and the
operators' own controllers, built from their Go modules (`build.sh`).

`bed.start(DIR)` / `bed.stop(DIR)` (or `up.sh DIR` / `down.sh DIR`) bring it up and down;
`fixture.py` holds the pytest fixtures that one test session shares.
"""
