"""gitdns: a GitOps DNS reconciler."""

__version__ = "0.1.0"
