"""A job's life on the cluster: create or adopt, watch, stream logs, diagnose, remove."""
