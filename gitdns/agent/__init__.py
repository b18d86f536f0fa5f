"""Orchestration: the reconcile cycle and its wiring (the only layer naming concrete adapters)."""
