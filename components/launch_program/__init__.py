"""Runs a user's own training program with the environment a Kubeflow operator injects."""
