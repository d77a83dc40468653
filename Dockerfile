# bandwall in a container.
#
# CPU image (plan, sweep, serve, monitor; no torch):
#   docker build -t bandwall:0.2.0 .
#   docker run --rm bandwall:0.2.0 plan --model llama3-8b --gpus 64
# The dashboard: inside a container, loopback is the container's own, so the server must
# bind 0.0.0.0, which bandwall refuses without --allow-remote; with it, every API call needs
# a token (generated and printed in the log, or your own with --token). Publish the port on
# the host's loopback only:
#   docker run --rm -p 127.0.0.1:8000:8000 bandwall:0.2.0 serve --host 0.0.0.0 --allow-remote
#   (open the printed http://...?token=... address with the host port, 127.0.0.1:8000)
# GPU image for `bench` under torchrun, Slurm (pyxis) or a Kubeflow PyTorchJob
# (`bandwall launch k8s --image REF`): a CUDA base of your choice and the bench extra:
#   docker build --build-arg BASE_IMAGE=nvidia/cuda:12.6.3-runtime-ubuntu24.04 \
#       --build-arg EXTRAS=bench,web -t REGISTRY/bandwall:0.2.0-cuda .
# The base must provide Python >= 3.11 or apt (python3 is installed from it when missing).
# VERSION is bandwall.__version__ (scripts/check_dockerfile.py keeps them equal in CI).

ARG BASE_IMAGE=python:3.11.11-slim-bookworm
FROM ${BASE_IMAGE}

ARG EXTRAS=web
ARG VERSION=0.2.0
LABEL org.opencontainers.image.title="bandwall" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.licenses="Apache-2.0"
ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    VIRTUAL_ENV=/opt/bandwall \
    PATH=/opt/bandwall/bin:$PATH

# CUDA bases ship no Python: take the distribution's (Ubuntu 24.04: 3.12).
RUN if ! command -v python3 >/dev/null 2>&1; then \
        apt-get update \
        && apt-get install -y --no-install-recommends python3 python3-venv \
        && rm -rf /var/lib/apt/lists/*; \
    fi \
    && python3 -m venv "$VIRTUAL_ENV"

WORKDIR /src
COPY pyproject.toml README.md ./
COPY src ./src
# prometheus-client serves `monitor --prometheus`; the bench extra adds torch for `bench`.
RUN pip install ".[${EXTRAS}]" "prometheus-client>=0.20,<1" \
    && rm -rf /src

RUN useradd --create-home --uid 10001 --shell /usr/sbin/nologin bandwall
USER 10001
WORKDIR /home/bandwall
ENV BANDWALL_DB=/home/bandwall/results/results.db
RUN mkdir -p /home/bandwall/results
VOLUME ["/home/bandwall/results"]

EXPOSE 8000 9101
ENTRYPOINT ["bandwall"]
CMD ["--help"]
