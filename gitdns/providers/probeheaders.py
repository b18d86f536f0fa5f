"""Probe headers of a ``healthCheck.headersSecret``, for both daemons: the agent's DNSPolicy checks
and the orchestrator's NodePool checks (docs/health.md, "Probe headers").

The repository names the Secret; it is read only when the operator lists it (``--headers-secrets``,
`gitdns.providers.credentials.secret_gate`), so a pull request cannot make a daemon send a Secret it
holds for something else (its git credential, a provider's keys) as request headers.  Then, in a
cluster, the Secret of that name in the daemon's own namespace; outside one, the file
``<state dir>/secrets/<name>`` (JSON, YAML or ``KEY=VALUE`` lines).  Read again at every call (a
rotated Secret is picked up); the values go to the prober only, never to a log, an error, /status
or a status branch.

    ProbeHeaders(listed, namespace, state_dir, in_cluster=)
        read(name) -> headers       raises HeadersUnavailable (``kept``: the last good headers of
                                    that name, if any were read before); HeadersNotListed when the
                                    operator does not list it (nothing is read)
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection
from pathlib import Path

from gitdns.core.model import CredentialsRef
from gitdns.core.problems import shown
from gitdns.errors import AuthError, ConfigError, GitdnsError
from gitdns.providers.credentials import SecretNotListed, load_credentials, secret_gate

Headers = tuple[tuple[str, str], ...]
SETTING = "--headers-secrets (GITDNS_HEADERS_SECRETS)"
_NAME = re.compile(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?\Z")  # the schema's headersSecret
_PREFIXES = ("spec.provider.credentials.secret: ", "spec.provider.credentials.file: ")


class HeadersUnavailable(ConfigError):
    """The headersSecret cannot be read; ``kept``: the headers read last time, if any."""

    reason = "HeadersSecretUnreadable"

    def __init__(self, message: str, kept: Headers | None) -> None:
        super().__init__(message)
        self.kept = kept


class HeadersNotListed(HeadersUnavailable):
    """The operator does not list the headersSecret: nothing was read."""

    reason = "HeadersSecretNotListed"


class ProbeHeaders:
    """``listed``: the Secret names the operator lets the repository name as a headersSecret;
    ``account`` says who the daemon runs as, for the messages of a refused read."""

    def __init__(self, listed: Collection[str], namespace: str, state_dir: Path | str, *, in_cluster: bool,
                 account: Callable[[], str] | None = None, setting: str = SETTING) -> None:
        self.listed = frozenset(listed)
        self.namespace = namespace
        self.state_dir = Path(state_dir)
        self.in_cluster = in_cluster
        self.account = account or (lambda: f"the ServiceAccount of its pod in {namespace}")
        self.setting = setting
        self._good: dict[str, Headers] = {}

    def where(self, name: str) -> str:
        return f"Secret {self.namespace}/{name}" if self.in_cluster else f"file {self.state_dir / 'secrets' / name}"

    def read(self, name: str) -> Headers:
        try:
            secret_gate(name, listed=self.listed, setting=self.setting, what="healthCheck.headersSecret")
        except SecretNotListed as exc:
            raise HeadersNotListed(str(exc), None) from None
        if not _NAME.match(name):  # a listed name is the operator's; still one path component only
            raise HeadersUnavailable(f"headersSecret {shown(name)}: not a Secret name", None)
        ref = (CredentialsRef(secret=name, namespace=self.namespace) if self.in_cluster
               else CredentialsRef(file=str(self.state_dir / "secrets" / name)))
        try:
            headers = tuple(sorted(load_credentials(ref, provider="probe").items()))
        except AuthError:
            raise HeadersUnavailable(
                f"headersSecret {name}: {self.where(name)} cannot be read: refused for {self.account()}; it needs a "
                f"Role in {self.namespace} bound to it with {{apiGroups: [\"\"], resources: [secrets], "
                f"resourceNames: [{name}], verbs: [get]}} (docs/health.md, \"RBAC\")", self._good.get(name)) from None
        except GitdnsError as exc:
            text = str(exc)
            for prefix in _PREFIXES:
                text = text.removeprefix(prefix)
            if "HTTP 404" in text:
                text = f"{self.where(name)} does not exist"
            raise HeadersUnavailable(f"headersSecret {name}: {text}", self._good.get(name)) from None
        except Exception as exc:  # the client's connection errors
            raise HeadersUnavailable(f"headersSecret {name}: {self.where(name)} cannot be read: "
                                     f"{type(exc).__name__}", self._good.get(name)) from None
        self._good[name] = headers
        return headers
