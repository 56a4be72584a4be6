"""The local backend: a supervisor that runs a job's replicas as processes on this machine."""
