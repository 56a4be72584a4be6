"""The job contract shared by the KFP step and every replica: settings, TF_CONFIG, files, exit codes.

Pure Python: nothing here imports TensorFlow or the Kubernetes client.
"""
