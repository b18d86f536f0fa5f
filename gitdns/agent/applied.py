"""The revision this agent last applied, kept where a restart finds it.

Rollback protection must not fail open when one record is lost, so the applied revision is
looked for in three places, in this order:

1. the state directory (``applied.json``, written after every applied revision);
2. the agent's status branch (``summary.yaml: appliedRevision``), for a new state directory;
3. the ``rev`` labels of this cluster's own ownership TXT records in its zones (the commit
   time and short sha of the revision that wrote them), which survive a lost state directory
   and a deleted status branch.

A head that is not a descendant of what is found is refused (``RollbackRefused``) unless the
operator starts the agent with ``--allow-rollback``.
"""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path

log = logging.getLogger(__name__)

APPLIED_FILE = "applied.json"


def save_applied(root: Path, sha: str) -> None:
    """Record ``sha`` as applied (atomically; a failure is logged, never raised)."""
    path = Path(root) / APPLIED_FILE
    tmp = path.with_name(f".{APPLIED_FILE}.tmp")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp.write_text(json.dumps({"sha": sha}) + "\n")
        os.replace(tmp, path)
    except OSError as exc:
        log.warning("cannot record the applied revision: path=%s error=%s", path, exc)


def load_applied(root: Path) -> str | None:
    try:
        doc = json.loads((Path(root) / APPLIED_FILE).read_text())
    except (OSError, ValueError):
        return None
    sha = doc.get("sha") if isinstance(doc, dict) else None
    if isinstance(sha, str) and len(sha) == 40 and all(c in "0123456789abcdef" for c in sha):
        return sha
    return None
