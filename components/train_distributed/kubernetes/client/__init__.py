"""The one place that talks to the Kubernetes API (the `kubernetes` client), with its errors and retries."""
