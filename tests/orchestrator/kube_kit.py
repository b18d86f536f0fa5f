"""The orchestrator against the fake Kubernetes API (tests/fakes/kube_apiserver.py), in process.

    in_pod(fake, tmp_path, monkeypatch, namespace)   as in a pod: KUBERNETES_SERVICE_HOST set,
                                                     POD_NAMESPACE (not GITDNS_POD_NAMESPACE),
                                                     a service account token naming
                                                     ServiceAccount <namespace>/gitdns-orchestrator,
                                                     the client reaching the fake by a kubeconfig
    deny(fake, resource, verbs, name=None)           RBAC refusing some requests: 403 Forbidden with
                                                     Kubernetes' message (or 401), by a hook
                                                     of the fake; returns the hook
    FakeMonitor                                      a scripted health monitor (no probes)
"""

from __future__ import annotations

import base64
import json
import math
from array import array
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

import pytest

from gitdns.adapters.probes import ProbeTiming
from gitdns.core.health import HealthSettings, ProbeSpec, State, TargetHealth
from tests.fakes.kube_apiserver import ApiError, FakeKube, Request

ACCOUNT = "gitdns-orchestrator"
METHOD_VERBS = {"GET": "get", "POST": "create", "PUT": "update", "PATCH": "patch", "DELETE": "delete"}


def jwt(claims: Mapping[str, object]) -> str:
    """An unsigned JWT-shaped token carrying ``claims`` (as a projected token's payload)."""
    def part(doc: Mapping[str, object]) -> str:
        return base64.urlsafe_b64encode(json.dumps(doc).encode()).decode().rstrip("=")
    return f"{part({'alg': 'RS256'})}.{part(claims)}.c2lnbmF0dXJl"


def in_pod(fake: FakeKube, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, namespace: str) -> Path:
    """As in a pod in ``namespace``; returns the token file."""
    from kubernetes import client
    from kubernetes import config as kube_config
    from kubernetes.config.config_exception import ConfigException

    from gitdns.orchestrator import kubeaccess

    def no_incluster() -> None:
        raise ConfigException("no service account token")

    fake.create("", "v1", "namespaces", {"metadata": {"name": namespace}})
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: fake\n"
        f"clusters: [{{name: fake, cluster: {{server: '{fake.base_url}'}}}}]\n"
        "users: [{name: fake, user: {token: fake}}]\n"
        "contexts: [{name: fake, context: {cluster: fake, user: fake}}]\n")
    token = tmp_path / "token"
    token.write_text(jwt({"iss": "https://kubernetes.default.svc",
                          "sub": f"system:serviceaccount:{namespace}:{ACCOUNT}"}))
    monkeypatch.setattr(kube_config, "load_incluster_config", no_incluster)
    monkeypatch.setattr(client.Configuration, "_default", None)
    monkeypatch.setattr(kubeaccess, "TOKEN_FILE", str(token))
    monkeypatch.setenv("KUBECONFIG", str(kubeconfig))
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "127.0.0.1")
    monkeypatch.delenv("GITDNS_POD_NAMESPACE", raising=False)
    monkeypatch.setenv("POD_NAMESPACE", namespace)
    monkeypatch.setenv("POD_NAME", "orchestrator-0")
    return token


def deny(fake: FakeKube, resource: str, verbs: tuple[str, ...], name: str | None = None,
         user: str = f"system:serviceaccount:dns-failover:{ACCOUNT}", code: int = 403) -> Callable[[Request], None]:
    """Refuse ``verbs`` on ``resource`` (plural; one object ``name`` or all) with 403 (or 401:
    the credentials not accepted)."""

    def hook(request: Request) -> None:
        parts = [p for p in request.path.split("/") if p]
        if resource not in parts:
            return
        at = parts.index(resource)
        target = parts[at + 1] if len(parts) > at + 1 else ""
        verb = METHOD_VERBS.get(request.method, request.method.lower())
        if verb not in verbs or (name is not None and target and target != name):
            return
        if name is not None and not target and verb != "create":
            return
        namespace = parts[parts.index("namespaces") + 1] if "namespaces" in parts else ""
        if code == 401:
            raise ApiError(401, "Unauthorized", "Unauthorized")
        raise ApiError(403, "Forbidden", f'{resource} "{target}" is forbidden: User "{user}" cannot {verb} '
                                         f'resource "{resource}" in API group "" in the namespace "{namespace}"',
                       {"name": target, "kind": resource})

    fake.add_hook(hook)
    return hook


class FakeMonitor:
    def __init__(self) -> None:
        self.targets: dict[str, tuple[ProbeSpec, HealthSettings]] = {}
        self.health: dict[str, TargetHealth] = {}
        self.timing: dict[str, ProbeTiming] = {}
        self.last_check_time: float | None = None
        self.sets = 0

    def set_targets(self, targets: Mapping[str, tuple[ProbeSpec, HealthSettings]]) -> None:
        self.sets += 1
        self.targets = dict(targets)
        self.health = {k: v for k, v in self.health.items() if k in self.targets}

    def set(self, **states: State) -> None:
        for name, state in states.items():
            self.health[name] = TargetHealth(state, checks=1, failures=0 if state is State.HEALTHY else 2)
            self.timing[name] = ProbeTiming(0.01, 100.0)
        self.last_check_time = 100.0

    def snapshot(self) -> dict[str, TargetHealth]:
        return dict(self.health)

    def rounds(self, names: Sequence[str]) -> tuple[array[float], array[float]]:
        rows = [self.timing.get(name) for name in names]
        return (array("d", (math.nan if r is None else r.last_round_duration for r in rows)),
                array("d", (math.nan if r is None else r.last_check_time for r in rows)))

    def start(self) -> None: ...

    def stop(self) -> None: ...
