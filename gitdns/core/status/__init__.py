"""status: its modules, each imported where it is used (this file imports nothing).

- `report`: The status documents an agent commits to its status branch (docs/agent.md).
- `doc`: Status documents and status commits (docs/agent.md), pure.
"""
