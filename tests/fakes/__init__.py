"""The tests' stand-ins for what the project talks to, and their fixtures.

`kube_server`: a stateful Kubernetes API server over HTTP with a scripted
operator, kept for the faults the real control plane cannot be made to produce
on demand (5xx, dropped watches, 410 Gone, a log stream cut midway);
`gcs_emulator`: a GCS emulator; `kfp_server`: a KFP API server; `crd_schema`:
the operators' CRD schemas as validators. `tests/conftest.py` registers the
fixtures of the GCS emulator and the KFP server.
"""
