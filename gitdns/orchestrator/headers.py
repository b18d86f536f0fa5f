"""Probe headers of a node pool's ``healthCheck.headersSecret`` (docs/health.md, "Probe headers").

In a cluster the Secret of that name in the orchestrator's own namespace (``--pod-namespace``,
``GITDNS_POD_NAMESPACE``, ``POD_NAMESPACE``, the service account's namespace file); outside one
the file ``<state dir>/secrets/<name>`` (JSON, YAML or ``KEY=VALUE`` lines).  Read again at
every poll (a rotated Secret is picked up); the values go to the prober only, never to a log,
an error or /status.

    SecretHeaders(namespace, state_dir, in_cluster)
        read(name) -> headers           raises HeadersUnavailable (with the last good headers
                                        of that name, if any were read before)
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from gitdns.core.model import CredentialsRef
from gitdns.errors import AuthError, ConfigError, GitdnsError
from gitdns.orchestrator.kubeaccess import service_account
from gitdns.providers.credentials import load_credentials

Headers = tuple[tuple[str, str], ...]
_PREFIXES = ("spec.provider.credentials.secret: ", "spec.provider.credentials.file: ")


class HeadersUnavailable(ConfigError):
    """The headersSecret cannot be read; ``kept``: the headers read last time, if any."""

    reason = "HeadersSecretUnreadable"

    def __init__(self, message: str, kept: Headers | None) -> None:
        super().__init__(message)
        self.kept = kept


class SecretHeaders:
    def __init__(self, namespace: str, state_dir: Path, *, in_cluster: bool,
                 account: Callable[[], str] | None = None) -> None:
        self.namespace = namespace
        self.state_dir = Path(state_dir)
        self.in_cluster = in_cluster
        self.account = account or (lambda: service_account(namespace))
        self._good: dict[str, Headers] = {}

    def where(self, name: str) -> str:
        return f"Secret {self.namespace}/{name}" if self.in_cluster else f"file {self.state_dir / 'secrets' / name}"

    def read(self, name: str) -> Headers:
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
