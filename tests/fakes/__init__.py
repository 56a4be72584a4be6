"""The tests' stand-ins for what the project talks to, and their fixtures.

`kube_server`: a stateful Kubernetes API server over HTTP with operators that
run TFJob/MPIJob replicas as local processes; `gcs_emulator`: a GCS emulator;
`kfp_server`: a KFP API server; `crd_schema`: the operators' CRD schemas as
validators. `tests/conftest.py` registers their fixtures.
"""
