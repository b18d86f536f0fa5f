"""The two HTTP addresses of a daemon (the agent and the orchestrator alike): ``listen`` serves
the probes and the webhook (what a Service or an Ingress may expose), ``admin_listen`` serves
/status and /metrics with the probes (the pod IP, for the kubelet and Prometheus).  One address
given to both serves everything there; an empty address serves nothing (docs/agent.md, "HTTP
endpoint and metrics")."""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol, TypeVar

from gitdns.adapters.http.server import ADMIN_ROUTES, ALL_ROUTES, WEBHOOK_ROUTES
from gitdns.errors import ConfigError

S = TypeVar("S")


class Server(Protocol):
    host: str
    name: str

    @property
    def port(self) -> int: ...

    def start(self) -> None: ...

    def stop(self) -> None: ...


T = TypeVar("T", bound=Server)


def listen_address(value: str, flag: str) -> tuple[str, int]:
    """``HOST:PORT`` (``:PORT`` for every interface) as (host, port); a ConfigError naming the
    setting otherwise."""
    host, sep, port = value.rpartition(":")
    if not sep or not port.isdigit() or int(port) > 65535:
        raise ConfigError(f"--{flag} {value[:80]!r}: expected HOST:PORT (e.g. 0.0.0.0:8080)")
    return host or "0.0.0.0", int(port)


def endpoints(listen: str, admin_listen: str, make: Callable[[str, int, frozenset[str], str], S]) -> list[S]:
    """The servers, built by ``make(host, port, routes, name)`` and not started; a ConfigError
    for a malformed address or one port on two hosts (checked before any is built)."""
    hook = listen_address(listen, "listen") if listen else None
    admin = listen_address(admin_listen, "admin-listen") if admin_listen else None
    if hook is not None and hook == admin:
        return [make(*hook, ALL_ROUTES, "http")]
    if hook is not None and admin is not None and hook[1] == admin[1] != 0:
        raise ConfigError(f"--listen {listen} and --admin-listen {admin_listen} share port {hook[1]}: "
                          "give both the same address to serve everything there, or another port")
    servers = []
    if hook is not None:
        servers.append(make(*hook, WEBHOOK_ROUTES, "webhook"))
    if admin is not None:
        servers.append(make(*admin, ADMIN_ROUTES, "admin"))
    return servers


def start_all(servers: list[T]) -> list[T]:
    """Start every server (``start()``), in order; when one cannot listen, stop those started
    and raise a ConfigError naming its address: a daemon refuses to start, as for a bad flag."""
    started: list[T] = []
    for server in servers:
        try:
            server.start()
        except OSError as exc:  # the address is taken or not ours
            for done in started:
                done.stop()
            raise ConfigError(f"cannot listen on {server.host}:{server.port} ({server.name}): "
                              f"{exc.strerror or exc}") from None
        started.append(server)
    return started
