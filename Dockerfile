# The Gangway runtime image: what every step of a pipeline runs in (docs/image.md).
#
#   docker build --build-arg VARIANT=cuda -t ghcr.io/gangway/runtime:TAG .
#
# VARIANT  cpu (default): torch built without CUDA, from the PyTorch CPU index.
#          cuda: torch from PyPI with NVIDIA's CUDA wheels; the node brings only the driver.
# The install steps are docker/install.sh (tests/e2e/test_image.py runs the same script); the
# dependencies are docker/requirements-VARIANT.lock, hash-pinned (docker/lock.sh makes them).
# The RUN --mount lines need BuildKit, Docker's default builder since 23.0.

# Pinned by exact version tag. To pin by digest as well, look it up where a registry can be
# reached (`docker buildx imagetools inspect python:3.11.16-slim-bookworm`) and pass
#   --build-arg BASE_IMAGE=python:3.11.16-slim-bookworm@sha256:DIGEST
# Python must stay 3.11: the locks are resolved for it.
ARG BASE_IMAGE=python:3.11.16-slim-bookworm
FROM ${BASE_IMAGE}

ARG VARIANT=cpu

LABEL org.opencontainers.image.title="gangway-runtime" \
      org.opencontainers.image.description="Gangway pipeline steps: the gangway, components and pipelines packages with torch and mlflow" \
      org.opencontainers.image.licenses="Apache-2.0" \
      dev.gangway.variant="${VARIANT}"

ENV PYTHONUNBUFFERED=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_NO_INPUT=1 \
    GANGWAY_VENV=/opt/venv \
    VIRTUAL_ENV=/opt/venv \
    PATH=/opt/venv/bin:${PATH}

# torch.compile needs compilers at run time: inductor builds CPU kernels with g++, Triton builds
# its CUDA kernel launchers with gcc (which g++ brings). Both include Python.h, which the base
# image ships.
RUN apt-get update \
    && apt-get install --yes --no-install-recommends g++ \
    && rm -rf /var/lib/apt/lists/*

# The user every pod runs as: gangway.pipeline sets runAsUser, runAsGroup and fsGroup to 1000
# (RUN_AS_USER) with runAsNonRoot. A passwd entry and a home make getpass.getuser() (torch's
# inductor cache directory) and ~ (Triton's cache) work; /gangway is the steps' scratch
# directory (an emptyDir in a pod, owned by fsGroup), made here too so `docker run` works.
RUN groupadd --gid 1000 gangway \
    && useradd --uid 1000 --gid 1000 --create-home --home-dir /home/gangway \
        --shell /bin/bash gangway \
    && install -d -o 1000 -g 1000 /gangway

# The locked dependencies, before the source: this layer (gigabytes for cuda) is rebuilt only
# when docker/ changes. The pip cache lives in a build cache mount, not in the image.
RUN --mount=type=bind,source=docker,target=/src/docker \
    --mount=type=cache,target=/root/.cache/pip \
    bash /src/docker/install.sh "${VARIANT}" deps

# Gangway itself, from the build context (.dockerignore lets through only what it needs):
# bind-mounted, so the source is installed into the venv but never copied into the image.
RUN --mount=type=bind,source=.,target=/src \
    bash /src/docker/install.sh "${VARIANT}" project

ENV PYTHONDONTWRITEBYTECODE=1 \
    NVIDIA_DRIVER_CAPABILITIES=compute,utility

# Numeric, so that the kubelet can verify runAsNonRoot against the image itself.
USER 1000:1000
WORKDIR /gangway

# Smoke test as the pods run it (that user, that directory): imports, `gangway --help`,
# `pip check`, the compilers, and one real torch.compile on the CPU.
RUN --mount=type=bind,source=docker,target=/src/docker \
    bash /src/docker/install.sh "${VARIANT}" check compile

CMD ["gangway", "--help"]
