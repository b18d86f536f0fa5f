"""`gitdns orchestrator`: the health orchestrator for one node pool (docs/health.md).

    desired repo ──poll──▶ NodePool + Tenants ──▶ ProbeSpecs ──▶ HealthMonitor
                                    │                                  │ on_change (wake)
                                    ▼                                  ▼
                              Layout (zone blocks) ──render──▶ hosts files + gitdns-<pool>.server
                                                                       │ only what changed
                                                                       ▼
                                              DirectoryDelivery (+SIGHUP) | ConfigMapDelivery

    config.py     OrchestratorConfig, from the command line's flags
    sources.py    the desired state (a directory or a git remote), the last good one held;
                  the probe targets of a pool, Kubernetes node discovery
    service.py    Orchestrator: the loop, the lease, metrics and /status
    pool.py       PoolView: the pool, its nodes, the zone layout and the probe targets
    publisher.py  Publisher: the healthy nodes rendered into files, delivered when changed
    faults.py     the last error of each step
    wiring.py     build (the concrete adapters), serve (HTTP endpoint, signals)
    metrics.py    the Prometheus metrics (``health_orchestrator_*``)

* One orchestrator per node pool at a time: a Kubernetes Lease (ConfigMap delivery in a
  cluster) or an ``flock`` on ``<state-dir>/orchestrator-<pool>.lock``.  Only the holder
  delivers; the monitor runs either way.
* The desired state is re-read every ``poll_interval`` (a directory, or a git remote through
  GitSource); a new tenant, node or setting takes effect then, without a restart.  A revision
  that does not parse, or that rejects the pool, keeps the last good one; a rejected tenant
  keeps its last good version.
* Fail open: when no node of the pool is published by its health (all unhealthy) the last
  published set stays (before any, every node), ``health_orchestrator_fail_open`` is 1 and
  /status says so.  An empty hosts file is never written.
"""
