"""Kubeflow Pipelines' own object store, as a default install sets it up.

KFP names its artifacts `minio://mlpipeline/...`; its launcher (2.17) reaches `minio://` at
`MINIO_ENDPOINT` (SeaweedFS, earlier MinIO, behind the same Service) with the keys of the
Secret `SECRET_NAME` in the run's namespace. kfdist reads `minio://` the same way where no
endpoint is set (`s3_access`), and its pipelines hand that Secret's keys to their steps and to
the training replicas as the AWS SDKs' variables.
"""

from typing import Dict

#: Where `minio://` URIs are reached when neither AWS_ENDPOINT_URL_S3 nor AWS_ENDPOINT_URL is
#: set: the address KFP 2.17's launcher uses for them.
MINIO_ENDPOINT = "http://seaweedfs.kubeflow:9000"
#: The Secret holding the store's keys in a KFP namespace (the pipelines' default
#: `object_store_secret`).
SECRET_NAME = "mlpipeline-minio-artifact"
#: The environment variables a step or replica gets, by the Secret's key holding each value.
SECRET_KEYS: Dict[str, str] = {"AWS_ACCESS_KEY_ID": "accesskey",
                               "AWS_SECRET_ACCESS_KEY": "secretkey"}
