"""A fleet of gitdns agents against one provider account, in ONE process, in VIRTUAL time.

    python bench/fleet.py                               # 10, 100 and 1,000 agents; route53, google, azure
    python bench/fleet.py --agents 10,100 --providers route53 --quick
    python bench/fleet.py --agents 1000 --providers route53 --json out.json

Every agent is the real `gitdns.agent.cycle.Agent` (fetch, load, the zone pipeline, the
validation loop, heartbeats), built from `AgentPorts` as `gitdns.agent.main.build_agent`
builds it: its provider is the real provider class (`Route53Provider`, `GoogleProvider`,
`AzureProvider`) wrapped in the agent's request budget (`gitdns.agent.budget.Budgets`, the
fleet size from git through `FleetSize`).  Only the service behind the provider's narrow SDK
protocol is a fake, and time is virtual:

- **The clock.** `Kernel` runs each agent as a thread that holds a baton: one thread runs at a
  time; ``kernel.sleep(s)`` hands the baton to whatever is due next and moves the virtual
  clock to that instant.  The agent's clock (`AgentPorts.clock`), the budget's token bucket and
  its throttling backoff (`Budgets(clock, sleep)`), and the stale-write retries of a pass
  (`AgentPorts.pacing`) all run on it, so a run is deterministic for a seed and 2 hours of a
  1,000-agent fleet take minutes.  The scheduling the daemon's `Runner` does with apscheduler
  (poll every ``pollInterval`` ±5 %, validation when `Agent.next_validation` is due, a poll 1 s
  after a pass that yielded, a poll at once on a webhook) is replayed by `agent_loop`; the
  `Runner` itself is not run.  Agents parse each revision once between them (the
  `AgentPorts.loader` port, memoized by sha): the same Desired every agent would build.
- **The services** are the strict fakes of the provider tests, called in-process at the level
  of each provider's protocol, with the service's published request limits added in virtual
  time (`Limit`, a token bucket: a request past it is refused as the service refuses it):
  Route53 — `tests/providers/route53_fake.FakeRoute53` (compare-and-swap, atomic batches, the
  1,000-value / 32,000-character batch limits) behind `Route53Client`, 5 requests/s per account
  (``Throttling``); Google Cloud DNS — `tests/providers/gcp_fake.CloudDnsFake` behind
  `CloudDnsApi`, 240 reads and 60 changes per minute per project (HTTP 429
  ``rateLimitExceeded``); Azure DNS — `tests/providers/azure_fake.FakeAzureDns` behind
  `AzureDnsApi`, per zone 60 lists, 1,000 gets and 40 writes per minute (HTTP 429 with
  ``Retry-After``); a quota per minute is a sliding window (`Window`: no 60 s ever holds more),
  Route53's per second a token bucket of 5.  Every request costs 50 ms of virtual latency.

The run, per provider and fleet size: N agents start within one poll interval (a rollout) and
sync an empty zone; the fleet settles (validation intervals ramp to the quiet period); the
**steady state** is measured over a window (requests/s, the busiest second, throttles per
minute); **one cluster's weight changes** (a custom weight on its attribute; Azure, without
weights: its address) and is pushed to every agent (each wakes at its own point of the
webhook's window, `gitdns.agent.runner.wake_delay`), timed until the zone holds it, with the
requests of that agent and of all the others meanwhile; a **fleet-wide weight change** is
committed and pushed and timed until every agent's weighted row holds the new weight (Azure: a
TTL change instead); a **cluster joins** (a new commit; the joiner's requests and the names it
reads until its records are in the zone; what the others spend meanwhile) and **leaves**
(removed from git; its requests until its records are gone).

Nothing here asserts wall-clock time.  ``--quick`` shortens the settle and steady windows
(tests/agent/test_fleet_sim.py runs it for 10 and 100 Route53 agents and asserts the bounds).
"""

from __future__ import annotations

import argparse
import copy
import heapq
import itertools
import json
import math
import random
import shutil
import sys
import tempfile
import threading
import time
from collections import Counter, deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from gitdns.agent.budget import Budgets  # noqa: E402
from gitdns.agent.config import AgentConfig  # noqa: E402
from gitdns.agent.cycle import Agent  # noqa: E402
from gitdns.agent.hooks import FleetSize  # noqa: E402
from gitdns.agent.ports import AgentPorts  # noqa: E402
from gitdns.agent.runner import wake_delay  # noqa: E402
from gitdns.core.desired import Desired, HeadInfo  # noqa: E402
from gitdns.core.model import Revision  # noqa: E402
from gitdns.core.names import short_hash  # noqa: E402
from gitdns.errors import GitdnsError  # noqa: E402
from gitdns.reconcile.engine import from_files  # noqa: E402
from gitdns.reconcile.zonepass import Pacing  # noqa: E402

DOMAIN = "example.com"
HOST = f"api.{DOMAIN}"
LATENCY = 0.05  # virtual seconds per request
POLL = 60.0


# --------------------------------------------------------------------------------------------- the clock
class SimStop(BaseException):
    """Raised in an agent's thread when the simulation ends (not an Exception: nothing in the
    agent catches it)."""


class Waiter:
    """A thread's place in the kernel's queue; ``gen`` makes a moved entry stale."""

    __slots__ = ("due", "gen", "sem")

    def __init__(self) -> None:
        self.sem = threading.Semaphore(0)
        self.gen = 0
        self.due: float | None = None


class Kernel:
    """Virtual time for many threads: one runs at a time (it holds the baton); `sleep` hands
    the baton to the earliest due thread and moves the clock to its instant."""

    def __init__(self) -> None:
        self.now = 0.0
        self._heap: list[tuple[float, int, threading.Semaphore, Waiter | None, int]] = []
        self._seq = itertools.count()
        self._main = threading.Semaphore(0)
        self._local = threading.local()
        self._stopping = False
        self.failure: BaseException | None = None
        self.threads: list[threading.Thread] = []

    def time(self) -> float:
        return self.now

    @property
    def who(self) -> str:
        return str(getattr(self._local, "name", "-"))

    def spawn(self, name: str, fn: Callable[[], None], at: float) -> None:
        sem = threading.Semaphore(0)

        def body() -> None:
            sem.acquire()
            self._local.name = name
            try:
                if not self._stopping:
                    fn()
            except SimStop:
                pass
            except BaseException as exc:  # a bug in an agent: stop the run and say where
                if self.failure is None:
                    self.failure = exc
            finally:
                self._main.release()

        thread = threading.Thread(target=body, name=name, daemon=True)
        thread.start()
        self.threads.append(thread)
        heapq.heappush(self._heap, (max(at, self.now), next(self._seq), sem, None, 0))

    def sleep(self, seconds: float) -> None:
        self._wait(Waiter(), self.now + max(0.0, seconds))

    def idle(self, waiter: Waiter, until: float) -> None:
        """Sleep until ``until`` unless `wake` moves the waiter's time earlier."""
        self._wait(waiter, until)

    def wake(self, waiter: Waiter, at: float) -> None:
        """Bring an idle waiter's wake-up forward to ``at`` (no effect on one that is not idle)."""
        if waiter.due is not None and at < waiter.due:
            waiter.gen += 1
            waiter.due = max(at, self.now)
            heapq.heappush(self._heap, (waiter.due, next(self._seq), waiter.sem, waiter, waiter.gen))

    def _wait(self, waiter: Waiter, until: float) -> None:
        if self._stopping:
            raise SimStop
        waiter.gen += 1
        waiter.due = until
        heapq.heappush(self._heap, (until, next(self._seq), waiter.sem, waiter, waiter.gen))
        self._main.release()
        waiter.sem.acquire()
        waiter.due = None
        if self._stopping:
            raise SimStop

    def run(self, until: float) -> None:
        while self._heap and self._heap[0][0] <= until:
            at, _, sem, waiter, gen = heapq.heappop(self._heap)
            if waiter is not None and waiter.gen != gen:
                continue  # woken earlier: this entry is stale
            self.now = max(self.now, at)
            sem.release()
            self._main.acquire()
            if self.failure is not None:
                raise RuntimeError(f"an agent failed at t={self.now:.1f}s") from self.failure
        self.now = max(self.now, until)

    def stop(self) -> None:
        """End every thread (each raises SimStop where it waits)."""
        self._stopping = True
        while self._heap:
            _, _, sem, waiter, gen = heapq.heappop(self._heap)
            if waiter is not None and waiter.gen != gen:
                continue
            sem.release()
            self._main.acquire()
        for thread in self.threads:
            thread.join(timeout=5)


# --------------------------------------------------------------------------------------------- limits and counts
@dataclass
class Limit:
    """A service's request limit: ``rate`` per second, ``burst`` at most saved up."""

    rate: float
    burst: float
    tokens: float = -1.0
    stamp: float = 0.0

    def admit(self, now: float) -> bool:
        tokens = self.burst if self.tokens < 0 else min(self.burst, self.tokens + (now - self.stamp) * self.rate)
        self.stamp = now
        if tokens < 1.0:
            self.tokens = tokens
            return False
        self.tokens = tokens - 1.0
        return True


@dataclass
class Window:
    """A quota of ``count`` requests per ``seconds`` (Google's and Azure's are per minute): no
    window of that length ever holds more (a sliding window, the strictest reading of "N per
    minute"; a token bucket of one request's worth, as this bench had before, refused every
    second request of a second and made the quota about half what is published)."""

    count: int
    seconds: float
    sent: deque[float] = field(default_factory=deque)

    @property
    def rate(self) -> float:
        return self.count / self.seconds

    def admit(self, now: float) -> bool:
        while self.sent and self.sent[0] <= now - self.seconds:
            self.sent.popleft()
        if len(self.sent) >= self.count:
            return False
        self.sent.append(now)
        return True


@dataclass(frozen=True, slots=True)
class Request:
    at: float
    agent: str
    kind: str  # read | write
    op: str
    throttled: bool
    name: str = ""  # a per-name read: the name; "" for a whole-zone page or a write


@dataclass
class Meter:
    requests: list[Request] = field(default_factory=list)

    def window(self, start: float, end: float, agent: str | None = None) -> list[Request]:
        return [r for r in self.requests if start <= r.at < end and (agent is None or r.agent == agent)]


# --------------------------------------------------------------------------------------------- the services
class World:
    """One provider account: its fake service, its limits, the requests it saw."""

    name = ""
    routing = True  # weighted/geo layout (False: simple strategy, one host per cluster)

    def __init__(self, kernel: Kernel) -> None:
        self.kernel = kernel
        self.meter = Meter()

    def enter(self, kind: str, op: str, limit: Limit | Window, name: str = "") -> bool:
        """One request: its latency, then its limit; returns whether it is admitted."""
        self.kernel.sleep(LATENCY)
        ok = limit.admit(self.kernel.now)
        self.meter.requests.append(Request(self.kernel.now, self.kernel.who, kind, op, not ok, name))
        return ok

    def provider(self) -> Any:
        raise NotImplementedError

    def zone_yaml(self) -> str:
        raise NotImplementedError

    def rows(self) -> dict[str, tuple[int | None, int]]:
        """Each cluster's own record as the zone holds it: `row_key` -> (weight, ttl)."""
        raise NotImplementedError


def _route53_world(kernel: Kernel) -> World:
    from botocore.exceptions import ClientError  # noqa: F401  (the fake raises botocore errors)

    from gitdns.providers.route53.provider import Route53Provider
    from tests.providers.route53_fake import FakeRoute53, _error, _sort_key

    class Route53World(World):
        name = "route53"

        def __init__(self, kernel: Kernel) -> None:
            super().__init__(kernel)
            world = self
            self.limit = Limit(rate=5.0, burst=5.0)

            class Fake(FakeRoute53):
                """The strict fake, with the account's 5 requests/s and a sorted-key cache."""

                _sorted: tuple[object, list[Any]] = (None, [])

                def _enter(self, op: str) -> None:
                    super()._enter(op)
                    kind = "write" if op.startswith("change") else "read"
                    if not world.enter(kind, op, world.limit, getattr(self, "_name", "")):
                        raise _error("Throttling", "Rate exceeded", op, 400)

                def list_resource_record_sets(self, **kw: Any) -> dict[str, Any]:
                    self._name = kw.get("StartRecordName", "") if kw.get("MaxItems") == "100" else ""
                    try:
                        return self._fast_list(**kw)
                    finally:
                        self._name = ""

                def _fast_list(self, **kw: Any) -> dict[str, Any]:
                    import bisect
                    self._enter("list_resource_record_sets")
                    zone = self._zone(kw["HostedZoneId"], "ListResourceRecordSets")
                    records = zone["records"]
                    if self._sorted[0] is not records:
                        keys = sorted(records, key=_sort_key)
                        self._sorted = (records, keys)
                    keys = self._sorted[1]
                    size = min(int(kw.get("MaxItems", "300")), 300)
                    start = 0
                    if kw.get("StartRecordName"):
                        from tests.providers.route53_fake import _name
                        first = (_name(kw["StartRecordName"]), kw.get("StartRecordType", ""),
                                 kw.get("StartRecordIdentifier", ""))
                        sort_keys = [_sort_key(k) for k in keys] if len(keys) < 64 else None
                        if sort_keys is None:
                            lo, hi, target = 0, len(keys), _sort_key(first)
                            while lo < hi:
                                mid = (lo + hi) // 2
                                if _sort_key(keys[mid]) < target:
                                    lo = mid + 1
                                else:
                                    hi = mid
                            start = lo
                        else:
                            start = bisect.bisect_left(sort_keys, _sort_key(first))
                    page, rest = keys[start:start + size], keys[start + size:start + size + 1]
                    out: dict[str, Any] = {"ResourceRecordSets": [self._listed(records[k]) for k in page],
                                           "IsTruncated": bool(rest), "MaxItems": str(size)}
                    if rest:
                        nxt = records[rest[0]]
                        out["NextRecordName"] = self._listed(nxt)["Name"]
                        out["NextRecordType"] = nxt["Type"]
                        if nxt.get("SetIdentifier"):
                            out["NextRecordIdentifier"] = nxt["SetIdentifier"]
                    return out

                @staticmethod
                def _consistency(records: Any, names: set[str]) -> list[str]:
                    subset = {k: v for k, v in records.items() if k[0] in names}
                    return FakeRoute53._consistency(subset, names)

            self.fake = Fake()
            self.zone_id = self.fake.add_zone(DOMAIN, zone_id="ZSIM00000001")

        def provider(self) -> Any:
            return Route53Provider(DOMAIN, self.fake, hosted_zone_id=self.zone_id, account="aws:sim")

        def zone_yaml(self) -> str:
            return "    type: route53\n    settings: {hostedZoneId: ZSIM00000001}\n"

        def rows(self) -> dict[str, tuple[int | None, int]]:
            out: dict[str, tuple[int | None, int]] = {}
            for (_name, rtype, set_id), rrs in self.fake.zones[self.zone_id]["records"].items():
                if rtype == "CNAME" and set_id and "Weight" in rrs:
                    for value in rrs.get("ResourceRecords", ()):
                        out[value["Value"].rstrip(".")] = (int(rrs["Weight"]), int(rrs["TTL"]))
            return out

    return Route53World(kernel)


def _google_world(kernel: Kernel) -> World:
    from gitdns.providers.google.api import CloudDnsError
    from gitdns.providers.google.provider import GoogleProvider
    from tests.providers.gcp_fake import ApiFault, CloudDnsFake

    class GoogleWorld(World):
        name = "google"

        def __init__(self, kernel: Kernel) -> None:
            super().__init__(kernel)
            self.reads = Window(240, 60.0)
            self.writes = Window(60, 60.0)
            self.fake = Fake(project="sim-project", page_size=100)
            self.fake.add_zone("example-com", DOMAIN)
            self.api = Api(self)

        def provider(self) -> Any:
            return GoogleProvider(self.api, "sim-project", managed_zone="example-com")

        def zone_yaml(self) -> str:
            return "    type: google\n    settings: {project: sim-project, managedZone: example-com}\n"

        def rows(self) -> dict[str, tuple[int | None, int]]:
            out: dict[str, tuple[int | None, int]] = {}
            for rrset in self.fake.zones["example-com"].rrsets.values():
                policy = rrset.get("routingPolicy") or {}
                for item in (policy.get("wrr") or {}).get("items", []):
                    for target in item.get("rrdatas", []):
                        out[target.rstrip(".")] = (int(float(item["weight"])), int(rrset["ttl"]))
            return out

    class Fake(CloudDnsFake):
        """The strict fake, with a name index instead of sorting the zone on every list."""

        def _list_rrsets(self, zone: Any, query: dict[str, str]) -> dict[str, Any]:
            name = query.get("name", "").lower()
            if not name:
                return super()._list_rrsets(zone, query)
            items = [copy.deepcopy(r) for (n, _t), r in zone.rrsets.items() if n == name] \
                if len(zone.rrsets) < 64 else [copy.deepcopy(zone.rrsets[k]) for k in
                                               sorted(k for k in _keys_named(zone, name))]
            return self._page(items, query, "rrsets", "dns#resourceRecordSetsListResponse")

    index: dict[int, tuple[object, dict[str, list[tuple[str, str]]]]] = {}

    def _keys_named(zone: Any, name: str) -> list[tuple[str, str]]:
        cached = index.get(id(zone))
        if cached is None or cached[0] is not zone.rrsets:
            by_name: dict[str, list[tuple[str, str]]] = {}
            for key in zone.rrsets:
                by_name.setdefault(key[0], []).append(key)
            cached = index[id(zone)] = (zone.rrsets, by_name)
        return cached[1].get(name, [])

    class Api:
        """`CloudDnsApi` in-process over the fake, with the project's read and change quotas."""

        def __init__(self, world: GoogleWorld) -> None:
            self.world = world
            self.base = "/dns/v1/projects/sim-project/managedZones"

        def _call(self, kind: str, method: str, path: str, query: dict[str, str], body: Any,
                  name: str = "") -> dict[str, Any]:
            limit = self.world.reads if kind == "read" else self.world.writes
            if not self.world.enter(kind, f"{method} {path.rsplit('/', 1)[-1]}", limit, name):
                raise CloudDnsError(429, "rateLimitExceeded", "Quota exceeded for quota metric 'Queries'")
            try:
                _, answer = self.world.fake.handle(method, path, query, copy.deepcopy(body))
            except ApiFault as fault:
                raise CloudDnsError(fault.status, fault.reason, fault.message) from None
            return answer

        def list_zones(self, page_token: str | None) -> dict[str, Any]:
            return self._call("read", "GET", self.base, {"pageToken": page_token} if page_token else {}, None)

        def list_rrsets(self, zone: str, name: str | None, page_token: str | None) -> dict[str, Any]:
            query = {k: v for k, v in (("name", name), ("pageToken", page_token)) if v}
            return self._call("read", "GET", f"{self.base}/{zone}/rrsets", query, None, name or "")

        def create_change(self, zone: str, change: dict[str, Any]) -> dict[str, Any]:
            return self._call("write", "POST", f"{self.base}/{zone}/changes", {}, change)

    return GoogleWorld(kernel)


def _azure_world(kernel: Kernel) -> World:
    from gitdns.providers.azure.api import ApiError
    from gitdns.providers.azure.provider import AzureProvider
    from tests.providers.azure_fake import FakeAzureDns
    from tests.providers.azure_fake import Request as AzRequest

    class AzureWorld(World):
        name = "azure"
        routing = False

        def __init__(self, kernel: Kernel) -> None:
            super().__init__(kernel)
            self.lists = Window(60, 60.0)
            self.gets = Window(1000, 60.0)
            self.puts = Window(40, 60.0)
            self.deletes = Window(40, 60.0)
            self.fake = FakeAzureDns(subscription="sim-sub", resource_group="rg-sim")
            self.fake.add_zone(DOMAIN)
            self.api = Api(self)

        def provider(self) -> Any:
            return AzureProvider(DOMAIN, self.api, account="azure:sim-sub")

        def zone_yaml(self) -> str:
            return "    type: azure\n    settings: {subscriptionId: sim-sub, resourceGroup: rg-sim}\n"

        def rows(self) -> dict[str, tuple[int | None, int]]:
            out: dict[str, tuple[int | None, int]] = {}
            for (rel, rtype), rec in self.fake.zones[DOMAIN].items():
                if rtype == "A" and rel.endswith(".apps"):
                    for a in rec["properties"].get("ARecords", []):
                        out[a["ipv4Address"]] = (None, int(rec["properties"]["TTL"]))
            return out

    class Api:
        """`AzureDnsApi` in-process over the fake, with the zone's list, get and write limits."""

        def __init__(self, world: AzureWorld) -> None:
            self.world = world
            self.base = "/subscriptions/sim-sub/resourceGroups/rg-sim/providers/Microsoft.Network/dnszones"

        def _send(self, kind: str, limit: Limit | Window, method: str, path: str, query: dict[str, str] | None = None,
                  headers: dict[str, str] | None = None, body: Any = None, name: str = "") -> Any:
            if not self.world.enter(kind, method + (" list" if (query and "$skiptoken" in query) or path.endswith(
                    "/recordsets") else ""), limit, name):
                raise ApiError(429, "TooManyRequests", "The request is being throttled.", retry_after=10.0)
            req = AzRequest(method, path, {"api-version": "2018-05-01", **(query or {})},
                            {"authorization": "Bearer sim", **(headers or {})}, copy.deepcopy(body))
            status, answer, _ = self.world.fake.handle(req)
            if status >= 400:
                error = (answer or {}).get("error") or {}
                raise ApiError(status, str(error.get("code", "")), str(error.get("message", "")))
            return answer

        def list_zones(self) -> list[str]:
            answer = self._send("read", self.world.lists, "GET", self.base)
            return [z["name"] for z in answer["value"]]

        def list_record_sets(self, zone: str, page: str | None = None) -> tuple[list[dict[str, Any]], str | None]:
            query = {"$skiptoken": page} if page else {}
            answer = self._send("read", self.world.lists, "GET", f"{self.base}/{zone}/recordsets", query)
            link = answer.get("nextLink")
            return answer["value"], (link.split("$skiptoken=", 1)[1].split("&", 1)[0] if link else None)

        def get(self, zone: str, relative: str, rtype: str) -> dict[str, Any] | None:
            try:
                return dict(self._send("read", self.world.gets, "GET", f"{self.base}/{zone}/{rtype}/{relative}",
                                       name=relative))
            except ApiError as err:
                if err.status == 404:
                    return None
                raise

        def put(self, zone: str, relative: str, rtype: str, body: Any, *, if_match: str | None = None,
                if_none_match: str | None = None) -> dict[str, Any]:
            headers = {k: v for k, v in (("if-match", if_match), ("if-none-match", if_none_match)) if v}
            return dict(self._send("write", self.world.puts, "PUT", f"{self.base}/{zone}/{rtype}/{relative}",
                                   headers=headers, body=body))

        def delete(self, zone: str, relative: str, rtype: str, *, if_match: str) -> None:
            self._send("write", self.world.deletes, "DELETE", f"{self.base}/{zone}/{rtype}/{relative}",
                       headers={"if-match": if_match})

    return AzureWorld(kernel)


WORLDS: dict[str, Callable[[Kernel], World]] = {"route53": _route53_world, "google": _google_world,
                                                "azure": _azure_world}


# --------------------------------------------------------------------------------------------- git
GEOS = {"route53": ("GEO-EU", "GEO-NA", "GEO-AS"), "google": ("europe-west1", "us-east1", "asia-east1"),
        "azure": ("GEO-EU", "GEO-NA", "GEO-AS")}


def cluster_id(i: int) -> str:
    return f"00000000-0000-4000-8000-{i:012d}"


def address(i: int) -> str:
    return f"10.{i // 62500}.{i // 250 % 250}.{i % 250 + 1}"


def row_key(world: World, i: int) -> str:
    """What `World.rows` calls cluster i's own record: its weighted row's target (the
    cluster's klb A name), or its address where there are no weights."""
    if not world.routing:
        return address(i)
    return f"{short_hash(cluster_id(i), 6)}-{short_hash('api-gw-ingress', 6)}.klb.{HOST}"


CANARY = 1  # the cluster whose own weight (Azure: address) the one-cluster change moves


def canary_address(i: int) -> str:
    return f"10.255.{i // 250 % 250}.{i % 250 + 1}"


def repo_files(world: World, members: list[int], weight: int = 120, ttl: int = 60,
               canary: int | None = None) -> dict[str, str]:
    """The desired branch for ``members``; ``canary``: cluster `CANARY`'s own weight (a custom
    weight on its attribute; Azure, without weights: any value moves its address instead)."""
    geos = GEOS[world.name]
    zone = ("apiVersion: gitdns.io/v1alpha1\nkind: Zone\nmetadata: {name: example-com}\nspec:\n"
            f"  domain: {DOMAIN}\n  provider:\n{world.zone_yaml()}")
    if world.routing:
        custom = f", custom: [{{attribute: tier, value: canary, weight: {canary}}}]" if canary is not None else ""
        policy = ("apiVersion: gitdns.io/v1alpha1\nkind: DNSPolicy\nmetadata: {name: api}\nspec:\n"
                  "  targetRef: {gateway: api-gw, namespace: ingress}\n  strategy: loadbalanced\n"
                  f"  loadBalancing:\n    weighted: {{defaultWeight: {weight}{custom}}}\n"
                  f"    geo: {{defaultGeo: {geos[0]}}}\n  ttl: {{loadbalancedInner: {ttl}}}\n")
    else:
        policy = ("apiVersion: gitdns.io/v1alpha1\nkind: DNSPolicy\nmetadata: {name: api}\nspec:\n"
                  "  targetRef: {gateway: api-gw, namespace: ingress}\n  strategy: simple\n"
                  f"  ttl: {{simple: {ttl}}}\n")
    docs = []
    for i in members:
        host = HOST if world.routing else f"c{i:04d}.apps.{DOMAIN}"
        moved = canary is not None and i == CANARY and not world.routing
        attributes = "  attributes: {tier: canary}\n" if i == CANARY else ""
        docs.append(f"apiVersion: gitdns.io/v1alpha1\nkind: Cluster\nmetadata: {{name: c{i:04d}}}\nspec:\n"
                    f"  id: {cluster_id(i)}\n  geo: {geos[i % len(geos)]}\n{attributes}  gateways:\n"
                    f"    - name: api-gw\n      namespace: ingress\n"
                    f"      addresses: [{canary_address(i) if moved else address(i)}]\n"
                    f"      listeners: [{{hostname: {host}, name: https}}]\n")
    return {"zone.yaml": zone, "policy.yaml": policy, "clusters.yaml": "---\n".join(docs)}


@dataclass
class Fetched:
    sha: str
    revision: Revision
    message: str
    author: str
    files: dict[str, str]


class Git:
    """The desired branch, shared by every agent; git itself costs nothing here."""

    def __init__(self) -> None:
        self.commits: list[tuple[str, dict[str, str]]] = []
        self.parsed: dict[str, Desired] = {}

    def commit(self, files: dict[str, str]) -> str:
        sha = f"{len(self.commits) + 1:07d}" + "c" * 33
        self.commits.append((sha, files))
        return sha

    def index(self, sha: str) -> int:
        return next(i for i, (s, _) in enumerate(self.commits) if s.startswith(sha))  # as git reads a short sha

    def remote_head(self) -> str:
        return self.commits[-1][0]

    def fetch(self, sha: str | None = None) -> Fetched:
        sha = sha or self.remote_head()
        i = self.index(sha)
        return Fetched(sha, self.revision_at(sha), f"commit {i}", "fleet", dict(self.commits[i][1]))

    def is_descendant(self, new: str, old: str) -> bool:
        return self.index(new) >= self.index(old)

    def files_at(self, sha: str) -> dict[str, str]:
        return dict(self.commits[self.index(sha)][1])

    def revision_at(self, sha: str) -> Revision:
        return Revision(1_700_000_000 + 60 * self.index(sha), sha)

    def load(self, root: Path, files: dict[str, str], head: HeadInfo) -> Desired:
        """The `AgentPorts.loader` of every agent: each revision parsed once for the fleet."""
        sha = head.revision.sha
        if sha not in self.parsed:
            self.parsed[sha] = from_files(root, files, head)
        return self.parsed[sha]


# --------------------------------------------------------------------------------------------- the fleet
@dataclass
class Member:
    index: int
    agent: Agent
    next_poll: float = 0.0
    stopped: bool = False
    waiter: Waiter = field(default_factory=Waiter)
    poked: bool = False  # a webhook arrived during a pass: poll again right after it


class Fleet:
    def __init__(self, world: World, seed: int, workdir: Path) -> None:
        self.world, self.kernel = world, world.kernel
        self.git = Git()
        self.rng = random.Random(seed)
        self.workdir = workdir
        self.members: dict[int, Member] = {}

    def start(self, i: int, at: float) -> Member:
        rng = random.Random(self.rng.random())
        fleet = FleetSize()
        budgets = Budgets(fleet.get, clock=self.kernel.time, sleep=self.kernel.sleep, uniform=rng.uniform)
        provider = budgets.wrap(self.world.provider())
        config = AgentConfig(repo="mem://fleet", cluster=cluster_id(i), state_dir=str(self.workdir / f"a{i}"),
                             status=False, lease="none", listen="", admin_listen="", poll_interval=POLL)
        ports = AgentPorts(source=self.git, factory=lambda zone: provider, clock=self.kernel.time, rng=rng,
                           poll_hooks=(fleet.update,), load_hooks=(fleet.update,),
                           pacing=Pacing(self.kernel.time, self.kernel.sleep, rng.uniform),
                           loader=self.git.load)
        member = Member(i, Agent(config, ports))
        self.members[i] = member
        self.kernel.spawn(f"a{i}", lambda: self.agent_loop(member, rng), at)
        return member

    def agent_loop(self, m: Member, rng: random.Random) -> None:
        """The daemon's schedule (`gitdns.agent.runner.Runner`): the first pass at start, a poll
        every interval ±5 % (at once on a webhook, 1 s after a pass that yielded), validation
        when due; an agent whose Cluster left git stops once it left every zone."""
        kernel, agent = self.kernel, m.agent
        self._pass(lambda: agent.run("start", force=True))
        m.next_poll = kernel.now + POLL * rng.uniform(0.95, 1.05)
        while not m.stopped:
            due_validation = agent.next_validation()
            due = min(m.next_poll, due_validation if due_validation is not None else math.inf)
            if due > kernel.now:
                kernel.idle(m.waiter, due)
                continue
            if due_validation is not None and due_validation <= kernel.now and due_validation <= m.next_poll:
                self._pass(agent.validate)
                continue
            started, m.poked = kernel.now, False
            cycle = self._pass(lambda: agent.run("poll"))
            gap = 1.0 if cycle is not None and cycle.yielded else POLL * rng.uniform(0.95, 1.05)
            m.next_poll = kernel.now if m.poked else max(kernel.now, started + gap)
            if agent.state.current is not None and agent.state.current.state.cluster(cluster_id(m.index)) is None \
                    and not agent.state.tracks:
                m.stopped = True  # removed from git and gone from the zone

    @staticmethod
    def _pass(fn: Callable[[], Any]) -> Any:
        try:
            return fn()
        except GitdnsError:
            return None

    def push(self, files: dict[str, str], delivery: float = 0.2) -> float:
        """Commit and deliver a webhook to every running agent (each within ``delivery`` s); each
        fetches after its own wake-up delay (`gitdns.agent.runner.wake_delay`), as the Runner does."""
        self.git.commit(files)
        now = self.kernel.now
        for m in self.members.values():
            if not m.stopped:
                wake = wake_delay(m.agent.view()) if m.agent.state.current is not None else 0.0
                m.next_poll = min(m.next_poll, now + self.rng.uniform(0, delivery) + wake)
                m.poked = True
                self.kernel.wake(m.waiter, m.next_poll)
        return now

    def run_until(self, done: Callable[[], bool], limit: float, step: float = 1.0) -> float | None:
        """Advance until ``done()`` (checked every ``step`` virtual seconds); the instant, or None."""
        end = self.kernel.now + limit
        while self.kernel.now < end:
            if done():
                return self.kernel.now
            self.kernel.run(self.kernel.now + step)
        return self.kernel.now if done() else None


# --------------------------------------------------------------------------------------------- one scenario
@dataclass
class Figures:
    provider: str
    agents: int
    records: int = 0
    initial_sync_s: float | None = None
    steady_window_s: float = 0.0
    steady_rps: float = 0.0
    steady_peak_1s: int = 0
    steady_throttles_per_min_max: int = 0
    steady_throttles: int = 0
    steady_whole_zone_reads: int = 0
    limit_rps: float = 0.0
    one_change_s: float | None = None
    one_change_requests: int = 0
    one_change_others: int = 0
    one_change_window_s: float = 0.0
    one_change_throttles: int = 0
    change_convergence_s: float | None = None
    change_requests: int = 0
    change_throttles: int = 0
    change_throttles_per_min_max: int = 0
    join_requests: int = 0
    join_names_read: int = 0
    join_whole_zone_pages: int = 0
    join_others_requests: int = 0
    join_s: float | None = None
    leave_requests: int = 0
    leave_names_read: int = 0
    leave_whole_zone_pages: int = 0
    leave_s: float | None = None
    wall_s: float = 0.0
    notes: list[str] = field(default_factory=list)


def per_minute(requests: list[Request], start: float, end: float) -> list[int]:
    counts = Counter(int((r.at - start) // 60) for r in requests if r.throttled)
    return [counts.get(m, 0) for m in range(max(1, math.ceil((end - start) / 60)))]


def whole_zone_pages(requests: list[Request]) -> int:
    return sum(1 for r in requests if r.kind == "read" and not r.name and not r.throttled)


def names_read(requests: list[Request]) -> int:
    return len({r.name for r in requests if r.name})


def scenario(provider: str, n: int, *, quick: bool, seed: int) -> Figures:
    started = time.perf_counter()
    kernel = Kernel()
    world = WORLDS[provider](kernel)
    fig = Figures(provider, n, limit_rps={"route53": 5.0, "google": 5.0, "azure": 1.0 + 40 / 60}[provider])
    workdir = Path(tempfile.mkdtemp(prefix="gitdns-fleet-"))
    fleet = Fleet(world, seed, workdir)
    members = list(range(n))
    try:
        fleet.git.commit(repo_files(world, members))
        for i in members:
            fleet.start(i, fleet.rng.uniform(0, POLL))

        def converged(weight: int, ttl: int, who: list[int]) -> Callable[[], bool]:
            wanted = {row_key(world, i) for i in who}

            def check() -> bool:
                rows = world.rows()
                return all(rows.get(a) == ((weight if world.routing else None), ttl) for a in wanted)
            return check

        sync_limit = max(1800.0, n * 12.0)
        fig.initial_sync_s = fleet.run_until(converged(120, 60, members), sync_limit, step=5.0)
        if fig.initial_sync_s is None:
            fig.notes.append(f"initial sync not done after {sync_limit:.0f} s")
        # a large fleet's first passes end in stale refusals more often (every agent writes the
        # shared records), and the validation that retries them waits for its share of the
        # account (at 1,000 Route53 agents, 17 requests at one per 250 s): let those land first
        settle = max(900.0 if quick else 2400.0, 5.0 * n)
        kernel.run(kernel.now + settle)
        window = 600.0 if quick else 1800.0
        t0 = kernel.now
        kernel.run(t0 + window)
        steady = world.meter.window(t0, kernel.now)
        fig.steady_window_s = window
        fig.steady_rps = sum(1 for r in steady if not r.throttled) / window
        per_second = Counter(int(r.at - t0) for r in steady)
        fig.steady_peak_1s = max(per_second.values(), default=0)
        fig.steady_throttles = sum(1 for r in steady if r.throttled)
        fig.steady_throttles_per_min_max = max(per_minute(steady, t0, kernel.now))
        fig.steady_whole_zone_reads = whole_zone_pages(steady)
        fig.records = len(world.rows())

        # one cluster's own weight changes (Azure: its address): the others' intent does not
        t0 = fleet.push(repo_files(world, members, canary=200))

        def canary_done() -> bool:
            rows = world.rows()
            if world.routing:
                return rows.get(row_key(world, CANARY)) == (200, 60)
            return rows.get(canary_address(CANARY)) is not None and address(CANARY) not in rows
        done = fleet.run_until(canary_done, 600.0, step=0.5)
        fig.one_change_s = None if done is None else done - t0
        kernel.run(kernel.now + 30.0)
        one = world.meter.window(t0, kernel.now)
        fig.one_change_requests = sum(1 for r in one if r.agent == f"a{CANARY}" and not r.throttled)
        fig.one_change_others = sum(1 for r in one if r.agent != f"a{CANARY}" and not r.throttled)
        fig.one_change_window_s = kernel.now - t0
        fig.one_change_throttles = sum(1 for r in one if r.throttled)

        # a weight change (Azure: a TTL change) pushed to every agent
        weight, ttl = (150, 60) if world.routing else (120, 30)
        t1 = fleet.push(repo_files(world, members, weight=weight, ttl=ttl))
        done = fleet.run_until(converged(weight, ttl, members), 300.0 if quick else max(600.0, n * 4.0), step=0.5)
        fig.change_convergence_s = None if done is None else done - t1
        changed = world.meter.window(t1, kernel.now)
        fig.change_requests = sum(1 for r in changed if not r.throttled)
        fig.change_throttles = sum(1 for r in changed if r.throttled)
        fig.change_throttles_per_min_max = max(per_minute(changed, t1, max(kernel.now, t1 + 1)))
        kernel.run(kernel.now + 120.0)

        # a cluster joins, then leaves
        joiner = n
        t2 = fleet.push(repo_files(world, [*members, joiner], weight=weight, ttl=ttl))
        fleet.start(joiner, t2)
        done = fleet.run_until(converged(weight, ttl, [joiner]), 1800.0, step=1.0)
        fig.join_s = None if done is None else done - t2
        kernel.run(kernel.now + 60.0)
        mine = world.meter.window(t2, kernel.now, f"a{joiner}")
        fig.join_requests = sum(1 for r in mine if not r.throttled)
        fig.join_names_read = names_read(mine)
        fig.join_whole_zone_pages = whole_zone_pages(mine)
        fig.join_others_requests = sum(1 for r in world.meter.window(t2, kernel.now)
                                       if r.agent != f"a{joiner}" and not r.throttled)

        t3 = fleet.push(repo_files(world, members, weight=weight, ttl=ttl))
        gone = fleet.run_until(lambda: row_key(world, joiner) not in world.rows() and fleet.members[joiner].stopped,
                               1800.0, step=1.0)
        fig.leave_s = None if gone is None else gone - t3
        left = world.meter.window(t3, kernel.now, f"a{joiner}")
        fig.leave_requests = sum(1 for r in left if not r.throttled)
        fig.leave_names_read = names_read(left)
        fig.leave_whole_zone_pages = whole_zone_pages(left)
    finally:
        kernel.stop()
        shutil.rmtree(workdir, ignore_errors=True)
    fig.wall_s = time.perf_counter() - started
    return fig


# --------------------------------------------------------------------------------------------- report
def fmt(value: float | None, unit: str = " s") -> str:
    if value is None:
        return "not reached"
    return f"{value:.1f}{unit}" if value < 10 else f"{value:,.0f}{unit}"


def table(figures: list[Figures]) -> Iterator[str]:
    yield ("| provider | agents | steady req/s (limit) | busiest second | throttles/min (max) | "
           "one cluster's change: reaches the zone, its requests, the others' | "
           "fleet-wide change converged | change requests (throttled) | join: requests, names, whole-zone pages | "
           "others during join | leave: requests, names, whole-zone pages | initial sync |")
    yield "|---|---|---|---|---|---|---|---|---|---|---|---|"
    for f in figures:
        yield (f"| {f.provider} | {f.agents:,} | {f.steady_rps:.2f} ({f.limit_rps:g}) | {f.steady_peak_1s} | "
               f"{f.steady_throttles_per_min_max} | {fmt(f.one_change_s)}, {f.one_change_requests}, "
               f"{f.one_change_others} in {f.one_change_window_s:.0f} s | {fmt(f.change_convergence_s)} | "
               f"{f.change_requests:,} ({f.change_throttles:,}) | "
               f"{f.join_requests}, {f.join_names_read}, {f.join_whole_zone_pages} | {f.join_others_requests} | "
               f"{f.leave_requests}, {f.leave_names_read}, {f.leave_whole_zone_pages} | {fmt(f.initial_sync_s)} |")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--agents", default="10,100,1000", help="fleet sizes, comma separated")
    ap.add_argument("--providers", default="route53,google,azure")
    ap.add_argument("--quick", action="store_true", help="shorter settle and steady windows")
    ap.add_argument("--seed", type=int, default=30)
    ap.add_argument("--json", metavar="FILE", help="write the figures as JSON")
    args = ap.parse_args(argv)
    threading.stack_size(512 * 1024)
    import logging

    logging.disable(logging.WARNING)
    figures: list[Figures] = []
    for provider in args.providers.split(","):
        for n in (int(x) for x in args.agents.split(",")):
            fig = scenario(provider.strip(), n, quick=args.quick, seed=args.seed)
            figures.append(fig)
            print(f"{provider} {n}: done in {fig.wall_s:.0f} s wall" + "".join(f"; {x}" for x in fig.notes),
                  file=sys.stderr, flush=True)
    for line in table(figures):
        print(line)
    if args.json:
        Path(args.json).write_text(json.dumps([f.__dict__ for f in figures], indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
