"""The orchestrator's desired-state sources (`gitdns.orchestrator.sources`): validated with the
operator's probe ranges, re-read only when a file changed (a digest, not the texts, is kept)."""

from __future__ import annotations

from pathlib import Path

from gitdns.core.reach import ProbeReach
from gitdns.orchestrator.sources import DirectorySource

POOL = """\
apiVersion: gitdns.io/v1alpha1
kind: NodePool
metadata: {name: edge}
spec:
  nodes:
    - {name: n1, ip: 127.0.0.11}
    - {name: n2, ip: 10.0.0.2}
"""


def tree(tmp_path: Path, text: str = POOL) -> Path:
    root = tmp_path / "desired"
    root.mkdir(exist_ok=True)
    (root / "pool.yaml").write_text(text)
    return root


def loopback_problems(source: DirectorySource) -> list[str]:
    desired = source.read()
    assert desired is not None
    return [p.message for p in desired.problems if "loopback" in p.message]


def test_a_node_in_the_operators_ranges_is_no_problem(tmp_path: Path) -> None:
    root = tree(tmp_path)
    assert loopback_problems(DirectorySource(root, ProbeReach.parse("127.0.0.0/8").ranges)) == []
    (refused,) = loopback_problems(DirectorySource(root))  # the default settings: refused, and said so
    assert "n1" in refused and "127.0.0.11" in refused


def test_read_again_only_when_a_file_changed(tmp_path: Path) -> None:
    root = tree(tmp_path)
    source = DirectorySource(root)
    first = source.read()
    assert first is not None and [n.name for n in first.state.node_pools[0].nodes] == ["n1", "n2"]
    assert source.read() is None  # unchanged
    tree(tmp_path, POOL.replace("n2", "n3"))
    again = source.read()
    assert again is not None and [n.name for n in again.state.node_pools[0].nodes] == ["n1", "n3"]
    assert source.read() is None
    (root / "other.yaml").write_text("")  # a new file counts too
    assert source.read() is not None
