# syntax=docker/dockerfile:1
# gitdns agent image: every provider (gitdns[all], hash-pinned by requirements.lock), git, ssh,
# gpg and tini.  docs/image.md says what is in it and why.
#   docker build -t gitdns:dev .
#   docker run --rm gitdns:dev agent --repo https://git.example.com/platform/dns.git --cluster eu-1 --once
# Kubernetes manifests: deploy/ (replicas 1, Recreate; probes instead of HEALTHCHECK).
#
# Both stages start from the same base, pinned to a Python release and a Debian release, and to
# the byte by the digest of the tag's multi-platform index (linux/amd64 and linux/arm64 resolve
# from it): the venv's python is a symlink to the base's interpreter, so the stages must agree.
# docs/image.md, "Base image", says how to move it.

# --- builder: install gitdns[all] with the pinned versions into a self-contained venv ---------
FROM python:3.11.16-slim-bookworm@sha256:528257d48c1da0dcecc2e725d1ae34498d60c965f1241e39cd6a85a8859bdf84 AS builder

ENV PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_NO_CACHE_DIR=1 \
    PYTHONDONTWRITEBYTECODE=1

WORKDIR /src
# Only what the package is built from (.dockerignore keeps the rest of the context out).
# gitdns/data/schemas and gitdns/data/templates are symlinks to ../../schemas and
# ../../templates: without those two directories the package would ship no schemas.
COPY pyproject.toml README.md requirements.lock ./
COPY schemas ./schemas
COPY templates ./templates
COPY gitdns ./gitdns

# The venv lives at the same path in both stages: its scripts' shebangs point into it.
# scripts/check-image.sh runs this same install (a fresh venv, the same lock, then the entrypoint
# check) without Docker, in CI.
# 1. Every dependency of gitdns[all], and the build backend, from requirements.lock: each pinned
#    (the versions of constraints.txt) with the sha256 of every wheel of linux/amd64 and
#    linux/arm64 (--require-hashes: a file that is not one of them is refused, and so is a
#    dependency the lock does not list). As wheels only (--only-binary): the base has no
#    compiler, and a version without a wheel for this platform should fail here, by name,
#    rather than halfway through a C build.
# 2. gitdns itself from these sources, with nothing more fetched: --no-deps (its dependencies are
#    step 1's), --no-build-isolation (built by the setuptools step 1 installed from the lock),
#    --no-index. pip check: every installed distribution's requirements are met.
RUN python -m venv /opt/gitdns \
    && /opt/gitdns/bin/pip install --require-hashes --only-binary :all: -r requirements.lock \
    && /opt/gitdns/bin/pip install --no-deps --no-build-isolation --no-index . \
    && /opt/gitdns/bin/pip check

# The entrypoint check, away from /src so that it imports the installed package: every provider
# SDK, the packaged schemas and templates, and the command line (python -m gitdns.imagecheck).
WORKDIR /
RUN /opt/gitdns/bin/python -m gitdns.imagecheck \
    && /opt/gitdns/bin/gitdns --help >/dev/null

# --- final: the interpreter, the venv, git, ssh, gpg and tini; nothing that builds or installs ---
FROM python:3.11.16-slim-bookworm@sha256:528257d48c1da0dcecc2e725d1ae34498d60c965f1241e39cd6a85a8859bdf84

LABEL org.opencontainers.image.title="gitdns" \
      org.opencontainers.image.description="GitOps DNS reconciler agent"

# git and ssh fetch the desired repository (HTTPS with a token file, or SSH with a key);
# ca-certificates verifies HTTPS to git hosts and provider APIs; gpg checks commit signatures
# (--verify-gpg-keys: gpg --import, then git verify-commit); tini is the init (ENTRYPOINT below).
# Debian package versions are not pinned on purpose: the base pins the Debian release, and a
# pinned package version leaves the archive with its next security update, breaking the build.
# hadolint ignore=DL3008
RUN apt-get update \
    && apt-get install -y --no-install-recommends ca-certificates git gpg openssh-client tini \
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
# TINI_SUBREAPER: tini reaps orphans even when it is not process 1 (a pod sharing its process
# namespace).
ENV PATH=/opt/gitdns/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    HOME=/var/lib/gitdns \
    GITDNS_STATE_DIR=/var/lib/gitdns \
    TINI_SUBREAPER=1

# The entrypoint check again, in the image as it ships: the Python side and the programs the
# agent runs (git, ssh, gpg, tini and the gitdns console script).
RUN ["/opt/gitdns/bin/python", "-m", "gitdns.imagecheck", "--image"]

WORKDIR /var/lib/gitdns
USER 65532:65532

# The webhook, /healthz and /readyz (GITDNS_LISTEN, default 0.0.0.0:8080). /status and /metrics
# are on the admin address (GITDNS_ADMIN_LISTEN, default 127.0.0.1:9090; deploy/ sets the pod IP).
EXPOSE 8080

# tini is process 1: it reaps the ssh processes git leaves behind (a git operation killed on its
# timeout, an SSH master connection that outlives its agent run) and forwards SIGTERM to gitdns,
# which releases its lease and exits; tini exits with gitdns's status. gitdns is then not
# process 1, so SSH connection sharing (ControlMaster, docs/agent.md) stays on.
ENTRYPOINT ["tini", "--", "gitdns"]
CMD ["agent"]
