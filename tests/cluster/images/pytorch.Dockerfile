# kfdist's runtime image with PyTorch, for the test bed's PyTorchJobs and torch-distributed
# TrainJobs: the README's three lines, with torch from PyPI (its default build, which runs on the
# CPU; PyTorch's own CPU index is not reachable from this project's machines). The fixture
# `pytorch_image` passes the version pyproject.toml pins, and pip's CA bundle (PIP_CERT) as a
# build secret where pip needs one, as containers/build.sh does.
ARG RUNTIME_IMAGE=ghcr.io/kfdist/kfdist-runtime:0.1.0
FROM ${RUNTIME_IMAGE}
ARG TORCH_REQUIREMENT
USER 0
RUN --mount=type=secret,id=pip-cert \
    if [ -s /run/secrets/pip-cert ]; then export PIP_CERT=/run/secrets/pip-cert; fi \
    && pip install --no-cache-dir "${TORCH_REQUIREMENT}"
USER 1000:1000
