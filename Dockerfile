# syntax=docker/dockerfile:1
# gitdns agent image.
#   docker build -t gitdns:dev .
#   docker run --rm gitdns:dev agent --repo https://git.example.com/platform/dns.git --cluster eu-1 --once
# Kubernetes manifests: deploy/ (replicas 1, Recreate; probes instead of HEALTHCHECK).

# --- builder: build the wheel and install it with its extras into a self-contained venv ----
FROM python:3.11-slim AS builder

ENV PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_NO_CACHE_DIR=1 \
    PYTHONDONTWRITEBYTECODE=1

WORKDIR /src
# Only what the wheel is built from (.dockerignore keeps the rest of the context out).
# gitdns/data/schemas and gitdns/data/templates are symlinks to ../../schemas and
# ../../templates: without those two directories the wheel would ship no schemas.
COPY pyproject.toml README.md ./
COPY schemas ./schemas
COPY templates ./templates
COPY gitdns ./gitdns

# The venv lives at the same path in both stages: its scripts' shebangs point into it, and its
# python is a symlink to the base image's interpreter (same base image in both stages).
RUN python -m venv /opt/gitdns \
    && python -m pip wheel --no-deps --wheel-dir /wheels . \
    && set -- /wheels/gitdns-*.whl \
    && /opt/gitdns/bin/pip install "$1[kubernetes,route53]" \
    && cd / \
    && /opt/gitdns/bin/python -c "import importlib.resources as r; \
assert r.files('gitdns').joinpath('data/schemas/zone.schema.json').is_file(), 'wheel without schemas'" \
    && /opt/gitdns/bin/gitdns --help >/dev/null

# --- final: the interpreter, the venv, git and ssh; nothing that builds or installs -------
FROM python:3.11-slim

LABEL org.opencontainers.image.title="gitdns" \
      org.opencontainers.image.description="GitOps DNS reconciler agent"

# git and ssh fetch the desired repository (HTTPS with a token file, or SSH with a key);
# ca-certificates verifies HTTPS to git hosts and provider APIs.
RUN apt-get update \
    && apt-get install -y --no-install-recommends git openssh-client ca-certificates \
    && rm -rf /var/lib/apt/lists/*

# A fixed non-root uid/gid (65532, the conventional "nonroot") that the Kubernetes manifests
# name in runAsUser, so runAsNonRoot can be checked without reading the image. Its home is the
# state directory: git and ssh may write ~/.gitconfig or ~/.ssh there when the root
# filesystem is read-only.
RUN groupadd --system --gid 65532 gitdns \
    && useradd --system --uid 65532 --gid 65532 --home-dir /var/lib/gitdns --no-create-home \
       --shell /usr/sbin/nologin gitdns \
    && install -d -o 65532 -g 65532 -m 0750 /var/lib/gitdns

COPY --from=builder /opt/gitdns /opt/gitdns

# No .pyc writes at run time (the root filesystem is read-only in Kubernetes; pip compiled
# the venv's bytecode at install), and unbuffered logs so nothing is lost on a crash.
ENV PATH=/opt/gitdns/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    HOME=/var/lib/gitdns \
    GITDNS_STATE_DIR=/var/lib/gitdns

WORKDIR /var/lib/gitdns
USER 65532:65532

# /healthz /readyz /status /metrics /webhook (GITDNS_LISTEN, default 0.0.0.0:8080).
EXPOSE 8080

# Exec form: gitdns is PID 1 and receives SIGTERM directly to release its lease.
ENTRYPOINT ["gitdns"]
CMD ["agent"]
