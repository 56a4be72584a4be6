"""The cluster backends (TFJob, MPIJob), run by the KFP step.

`build/` renders manifests (pure functions), `client/` is the one module that
talks to the Kubernetes API, `lifecycle/` creates or adopts, waits, streams
logs and removes a job; `backend` ties them together for one training step.
"""
