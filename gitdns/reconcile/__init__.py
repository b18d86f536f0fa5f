"""The per-zone reconcile pipeline: one pass for a (cluster, zone) pair, run by every entry
point (the preview, `apply`, `failover simulate`, the `groups set` description and each agent
cycle); only the role chooses the steps and whether writes are allowed."""
