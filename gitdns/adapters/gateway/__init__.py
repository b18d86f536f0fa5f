"""gateway: its modules, each imported where it is used (this file imports nothing).

- `read`: Reading a Gateway (Gateway API v1) for its addresses and listener host names.
- `conditions`: The ``gateway.networking.k8s.io/PolicyAffected`` condition on Gateways (Kuadrant's DNSPolicy RFC).
"""
