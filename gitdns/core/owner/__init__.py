"""owner: its modules, each imported where it is used (this file imports nothing).

- `install`: The owner id of an install: the kube-system Namespace UID, and an instance name for the
- `zone`: Owners of a zone, heartbeats, and explicit take-overs (`gitdns owners`, `adopt`).
"""
