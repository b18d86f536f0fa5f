"""`gitdns orchestrator`: the health orchestrator for one node pool (docs/health.md).

    desired repo ──poll──▶ NodePool + Tenants ──▶ ProbeSpecs ──▶ HealthMonitor
                                    │                                  │ on_change (wake)
                                    ▼                                  ▼
                              Layout (zone blocks) ──render──▶ hosts files + gitdns-<pool>.server
                                                                       │ only what changed
                                                                       ▼
                                              DirectoryDelivery (+SIGHUP) | ConfigMapDelivery

    config.py     OrchestratorConfig and its settings (flags, else GITDNS_*), the Lease name
    sources.py    the desired state (a directory or a git remote), the last good one held;
                  the probe targets of a pool, Kubernetes node discovery
    service.py    Orchestrator: the loop, the lease, readiness, metrics and /status
    conditions.py the conditions of /status (Ready, DesiredLoaded, LeaseHeld, Delivered, ...)
    pool.py       PoolView: the pool, its nodes, the zone layout and the probe targets
    headers.py    probe headers of a pool's headersSecret, from the own namespace
    publisher.py  Publisher: the healthy nodes rendered into files, delivered when changed
    kubeaccess.py the Lease named for RBAC, ConfigMap delivery's refusals, who we run as
    faults.py     the last error of each step, with its reason
    wiring.py     build (the concrete adapters), serve (HTTP endpoints, signals)
    metrics.py    the Prometheus metrics (``health_orchestrator_*``)

* One orchestrator per node pool at a time: a Kubernetes Lease ``gitdns-orchestrator-<pool>``
  (ConfigMap delivery in a cluster) or an ``flock`` on ``<state-dir>/orchestrator-<pool>.lock``.
  Only the holder delivers; the monitor runs either way.
* Ready (/readyz) once a revision is loaded and the first delivery was tried, or standing by
  for the lease; what goes wrong afterwards is a condition and a metric, not NotReady.
* The desired state is re-read every ``poll_interval`` (a directory, or a git remote through
  GitSource); a new tenant, node or setting takes effect then, without a restart.  A revision
  that does not parse, or that rejects the pool, keeps the last good one; a rejected tenant
  keeps its last good version.  Tenants whose zone is fenced off
  (`gitdns.core.checks.tenants`) are refused (a changed one keeps its last good version); a
  pool with a node address that is no IP keeps its last good version.
* What is rendered is read back with CoreDNS's parse rules before delivery
  (`gitdns.core.corefile.check`): a zone block that fails is left out (its tenants refused,
  named in /status, the log and a metric) and the rest delivered; a snippet failing as a
  whole is not delivered, the last delivery stays.
* Fail open: when no node of the pool is healthy every node of the pool is published (as
  Route53 and dns-operator answer), ``health_orchestrator_fail_open`` is 1 and /status says
  so.  An empty hosts file is never written.
"""
