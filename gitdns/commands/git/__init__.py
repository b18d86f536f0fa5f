"""git: its modules, each imported where it is used (this file imports nothing).

- `read`: What the verbs that read a repository's git history and status branches (``gitdns status``,
- `remote`: The git transport of the one-shot verbs that talk to a git remote: `status` (the status
"""
