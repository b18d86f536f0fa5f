"""The owner id of an install: the kube-system Namespace UID, and an instance name for the
second and later installs in one cluster (docs/agent.md, "Two installs in one cluster").

The agent in a pod is the Cluster whose ``spec.id`` is its owner id.  The default install's is
the UID itself (``<uid>``, Kuadrant's owner id); a named instance's is ``<uid>.<instance>``:

- stable: the UID lives as long as the cluster's kube-system Namespace, and the name is the
  operator's, so a restart or a reinstall with the same name is the same owner;
- distinct: a UID holds no ``.``, so no named instance's id is another cluster's UID or
  another instance's id, and the default install's id is unchanged by this setting;
- a valid Cluster ``spec.id`` (letters, digits, ``-``, ``_``, ``.``; at most 63 characters),
  a valid owner label of the ownership TXT (none of ``,;="\\&`` or blanks) and a valid git
  ref component for the status branch ``gitdns-status/<id>``.

Everything keyed by the owner id is then distinct per instance: the ownership TXT
(``kuadrant-<hash8(owner)>-…``), the heartbeat, the lock TXT, the Kubernetes Lease
``gitdns-<hash8(id)>`` and the status branch.

    check_instance(name) -> name       ValueError naming what is wrong
    owner_id(uid, instance) -> id      ValueError when the id would not be a Cluster id
"""

from __future__ import annotations

import re

MAX_ID = 63  # a Cluster spec.id (schemas/cluster.schema.json)
UID_LENGTH = 36  # a Kubernetes UID: 8-4-4-4-12 hex digits
MAX_INSTANCE = MAX_ID - UID_LENGTH - 1  # 26: <uid>.<instance> fits a Cluster id
SEPARATOR = "."
# a DNS-1123 label: lower-case letters, digits and '-', starting and ending with a letter or digit
_INSTANCE = re.compile(r"[a-z0-9](?:[-a-z0-9]*[a-z0-9])?\Z")
# the Cluster spec.id pattern (schemas/cluster.schema.json)
_CLUSTER_ID = re.compile(r"(?!.*\.\.)[A-Za-z0-9](?:[-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?\Z")
RESERVED = frozenset({"default"})  # the default install is the one without a name


def check_instance(name: str) -> str:
    """``name`` when it is a valid instance name: a DNS-1123 label of at most 26 characters,
    not ``default``; else ValueError saying why."""
    shown = repr(name[:40])
    if not name:
        raise ValueError("empty: leave the setting unset for the default instance")
    if len(name) > MAX_INSTANCE:
        raise ValueError(f"{shown}: at most {MAX_INSTANCE} characters (<kube-system UID>.<instance> is a "
                         f"Cluster id of at most {MAX_ID})")
    if not _INSTANCE.match(name):
        raise ValueError(f"{shown}: use lower-case letters, digits and '-', starting and ending with a "
                         "letter or digit (a DNS-1123 label)")
    if name in RESERVED:
        raise ValueError(f"{shown}: the default instance is the one without a name; leave the setting unset "
                         "to keep the kube-system UID as the owner id")
    return name


def owner_id(uid: str, instance: str = "") -> str:
    """The owner id (and Cluster ``spec.id``) of the install ``instance`` ("" the default one)
    in the cluster whose kube-system Namespace UID is ``uid``."""
    if not instance:
        return uid
    ident = f"{uid}{SEPARATOR}{check_instance(instance)}"
    if not _CLUSTER_ID.match(ident):
        raise ValueError(f"{ident[:80]!r} is not a Cluster id (1 to {MAX_ID} letters, digits, '-', '_' or '.'): "
                         "a shorter instance name")
    return ident
