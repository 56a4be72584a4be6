# kfdist's runtime image with PyTorch, for the test bed's PyTorchJobs and torch-distributed
# TrainJobs: what the README's three lines make (the runtime image plus torch from PyPI, its
# default build, which runs on the CPU; PyTorch's own CPU index is not reachable from this
# project's machines), layered so that a change of kfdist's code does not reinstall torch: torch
# goes onto the runtime image's dependency stage (kfdist-runtime-deps, which containers/build.sh
# tags), and kfdist's installed files (its package, its metadata and its `kfdist` command) are
# copied from the runtime image on top. The fixture `pytorch_image` passes kfdist's version and the
# torch version pyproject.toml pins, and pip's CA bundle (PIP_CERT) as a build secret where pip needs one, as
# containers/build.sh does.
ARG RUNTIME_IMAGE=ghcr.io/kfdist/kfdist-runtime:0.1.0
ARG DEPS_IMAGE=ghcr.io/kfdist/kfdist-runtime-deps:0.1.0
FROM ${RUNTIME_IMAGE} AS runtime

FROM ${DEPS_IMAGE}
ARG TORCH_REQUIREMENT
USER 0
RUN --mount=type=secret,id=pip-cert \
    if [ -s /run/secrets/pip-cert ]; then export PIP_CERT=/run/secrets/pip-cert; fi \
    && pip install --no-cache-dir "${TORCH_REQUIREMENT}"
ARG KFDIST_VERSION=0.1.0
COPY --from=runtime /opt/venv/lib/python3.11/site-packages/kfdist /opt/venv/lib/python3.11/site-packages/kfdist
COPY --from=runtime /opt/venv/lib/python3.11/site-packages/kfdist-${KFDIST_VERSION}.dist-info /opt/venv/lib/python3.11/site-packages/kfdist-${KFDIST_VERSION}.dist-info
COPY --from=runtime /opt/venv/bin/kfdist /opt/venv/bin/kfdist
RUN python -P -c "import kfdist.components.train_distributed, torch" && kfdist --help >/dev/null
USER 1000:1000
WORKDIR /home/kfdist
