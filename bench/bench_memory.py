"""Peak memory of the agent and the orchestrator, each run as a `gitdns` process of its own.

    python bench/bench_memory.py                  # every scenario below (about 40 minutes; agent-100k about 6)
    python bench/bench_memory.py --quick          # agent-cloud and orch-1k, shorter (about 1 minute)
    python bench/bench_memory.py --only agent-10k,orch-10k [--writes 5] [--json FILE]

Everything runs on 127.0.0.1: local bare git repositories, moto's Route53 over TLS, the fake
Kubernetes API (tests/fakes/kube_apiserver.py) over TLS, and a probe server in a child process.
Each scenario starts one `python -m gitdns.cli agent` (or `orchestrator`) process and drives it
through its cycles; the figures are read from /proc/<pid>/status of that process:

    peak   VmHWM, the process's high-water resident set over its whole life (exact, not sampled),
           read after the last cycle, before SIGTERM;
    tree   the largest sum of VmRSS over the process and its children (git fetch, git push,
           ssh), sampled every 20 ms: what the container's cgroup holds at once, page cache aside;
    idle   VmRSS after the last cycle.

Agent scenarios (each: start = first fetch, validate, the initial sync and the status push;
then --writes commits, each changing the value of ``bench-memory.example.com A``: a write cycle
and a status push, waited for on the status branch; then a few idle polls):

    agent-local    example-repo (health checks dropped), the `local` store, TXT lease
    agent-cloud    example-repo on Route53 (moto, TLS, the CA bundle of certifi plus the test CA)
                   with the Kubernetes Lease (fake API, TLS) and JSON logs: deploy/base's settings
    agent-10k      bench/generate.py's 10,000-host repository (2 zones, 10 clusters), cluster-00,
                   the `local` store (the initial sync writes about 14,500 records)
    agent-10k-cloud  the same on Route53 with the Kubernetes Lease
    agent-100k     a 100,000-record zone with ten owners (bench/generate.py zone) on the `local`
                   store and its repository (one zone, about 13,000 hosts), cluster-00, with
                   --allow-rollback (the fixture's TXT name a revision of no repository)
    agent-cap      agent-cloud, then one commit of the worst YAML the read caps let through
                   (a 4 MiB file and a 1 MiB file of ``[{},{},...]``, read in full; the
                   note says whether the status shows that revision applied)
    agent-soak     agent-cloud with 40 writes: VmRSS after every 10th shows any growth

Orchestrator scenarios: a NodePool of N nodes (health endpoints on the probe server, 50 loopback
addresses x 4 ports, interval 5 s, timeout 2 s, thresholds 2/1) and one Tenant with two
domains, read from a bare git repository (--poll-interval 2s). Phases: every node answers until
all N are delivered, 2 intervals more; every node hangs (accepts, never answers: probes time
out, up to the prober's 2,048 in flight) for 3 intervals; every node answers again until all N
are delivered; a commit adds a third domain, waited for in the delivery.

    orch-1k, orch-10k          ConfigMap delivery (kube-system/coredns-custom on the fake API)
                               and the Kubernetes Lease: deploy/orchestrator/base's settings
    orch-1k-out, orch-10k-out  --out DIR and the file lease: the sidecar component's settings

imports: VmHWM of a fresh interpreter after importing what each kind of deployment loads.

Prints figures; asserts nothing (tests/test_deploy_sizing.py runs --quick and compares the
peaks with the limits deploy/ ships).  The measuring and the stand-ins are in memory_kit.py, the
orchestrator's scenarios and the probe server in memory_orch.py.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.memory_kit import POD_NAMESPACE, Cloud, Result, Watched, base_env, python, settings, wait_for  # noqa: E402
from bench.memory_orch import INTERVAL, ProbeServer, run_orchestrator  # noqa: E402
from tests.e2e.agent_kit import DesiredRepo, WorkTree, free_ports, git  # noqa: E402

MiB = 1024 * 1024
RECORD_NAME = "bench-memory"
RECORDSET = """apiVersion: gitdns.io/v1alpha1
kind: RecordSet
metadata:
  name: bench-memory
spec:
  zone: example-com
  records:
    - name: bench-memory
      type: A
      values: [{value}]
"""
AGENT_TIMEOUT = 900.0  # seconds a cycle may take (the 100,000-record zone's first cycle is the longest)


# -- the agent ---------------------------------------------------------------------------------------


@dataclass
class Desired:
    """A desired repository pushed to a bare one, and how its agent runs."""

    tree: WorkTree
    bare: Path
    cluster: str
    cluster_id: str
    store: Path  # --store-dir: the `local` stores lie under it
    domains: list[str]


def route53_zones(tree: Path) -> None:
    """Every Zone of the tree on Route53 (no credentials named: the environment's, as IRSA's)."""
    for path in sorted(tree.rglob("*.yaml")):
        text = path.read_text()
        # "type: local" and its settings (block or flow style) -> "type: route53"
        changed = re.sub(r"type: local\n\s+settings:(?: \{[^\n]*\}|\n\s+path: [^\n]*)\n", "type: route53\n", text)
        if changed != text:
            path.write_text(changed)


def example_desired(work: Path, route53: bool) -> Desired:
    repo = DesiredRepo(work)
    if route53:
        route53_zones(repo.work)
    repo.write(f"records/{RECORD_NAME}.yaml", RECORDSET.format(value="192.0.2.200"))
    repo.commit("bench-memory record")
    cluster_id = re.findall(r"\bid: (\S+)", (repo.work / "clusters" / "eu-west-1.yaml").read_text())[0]
    return Desired(repo, repo.bare, "eu-west-1", cluster_id, work, ["example.com", "example.org"])


def generated_desired(work: Path, source: Path, route53: bool) -> Desired:
    """A repository written by bench/generate.py (in ``source``) as the desired one, cluster-00."""
    tree = WorkTree(work / "desired", work / "desired.git")
    shutil.copytree(source, tree.work, dirs_exist_ok=True)
    if route53:
        route53_zones(tree.work)
    tree.write(f"records/{RECORD_NAME}.yaml", RECORDSET.format(value="192.0.2.200"))
    tree.commit("generated desired state")
    domains = sorted(set(re.findall(r"domain: (\S+)", (tree.work / "zones.yaml").read_text())))
    cluster_id = re.findall(r"\bid: (\S+)", (tree.work / "clusters.yaml").read_text())[0]  # cluster-00's
    assert tree.bare is not None
    return Desired(tree, tree.bare, "cluster-00", cluster_id, work / "store", domains)



def make_zone_and_repo(records: int, out: Path) -> None:
    """Child mode: the zone of ``generate.py zone --records N`` and the repository it was built
    from (same layout, one zone), so that an agent of its first owner plans against it."""
    import math
    from dataclasses import replace

    sys.path.insert(0, str(ROOT / "bench"))
    import generate

    base = generate.Layout(hosts=0, zones=1, statics=-1)
    hosts = generate.hosts_for_records(records, base)
    layout = replace(base, hosts=hosts, statics=max(10, hosts // 100))
    fixture = generate.build_zone(layout)
    if len(fixture.records) < records:  # as generate.zone_for_records does
        hosts = math.ceil(hosts * records / len(fixture.records))
        layout = replace(base, hosts=hosts, statics=max(10, hosts // 100))
        fixture = generate.build_zone(layout)
    counts = generate.write_zone(fixture, out / "zone")
    generate.write_repo(replace(layout, zones=1), out / "repo")
    print(json.dumps({"hosts": hosts, **counts}))


def status_summary(bare: Path) -> str:
    """summary.yaml of the (only) status branch in ``bare``; '' while there is none."""
    refs = git("for-each-ref", "--format=%(objectname)", "refs/heads/gitdns-status/", cwd=bare).split()
    if not refs:
        return ""
    return git("show", f"{refs[0]}:summary.yaml", cwd=bare)


def applied_and_pushed(bare: Path, sha: str) -> bool:
    return f"appliedRevision: {sha}" in status_summary(bare)


def store_value(store: Path, fqdn: str) -> list[str]:
    for path in store.rglob("example.com.json"):
        for row in json.loads(path.read_bytes()).get("records", []):
            if row[0] == fqdn and row[1] == "A":  # [name, type, set id, ttl, weight, geo, values]
                return [str(v) for v in row[-1]]
    return []


def worst_shape(path: Path, size: int) -> None:
    """A file of ``size`` bytes of the shape that costs the loader the most memory per byte
    (bench/bench_hostile_yaml.py)."""
    body = "[" + ",".join(["{}"] * ((size - 3) // 3)) + "]\n"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(body + " " * (size - len(body)))


def run_agent(result: Result, desired: Desired, work: Path, cloud: Cloud | None, writes: int, *,
              route53: bool = False, cap_commit: bool = False, extra_env: dict[str, str] | None = None) -> None:
    """Without ``cloud``: flags and the TXT lease.  With it, as deploy/base runs the agent: no
    argument but ``agent``, the settings of deploy/base/settings.env and the Deployment's env
    (but a 1 s poll interval instead of 60 s, and this repository), the cluster id read from
    the API server, the Kubernetes Lease; the zones on Route53 (``route53``) or the local store."""
    state = work / "state"
    state.mkdir(parents=True, exist_ok=True)
    listen, admin = free_ports(2)
    env = base_env()
    if cloud is None:
        cmd = [sys.executable, "-m", "gitdns.cli", "agent", "--repo", str(desired.bare), "--cluster",
               desired.cluster, "--state-dir", str(state), "--store-dir", str(desired.store), "--git-timeout", "60",
               "--poll-interval", "1", "--listen", f"127.0.0.1:{listen}", "--admin-listen", f"127.0.0.1:{admin}",
               "--lease", "txt"]
    else:
        cloud.cluster(desired.cluster_id)
        if route53:
            cloud.create_zones(desired.domains)
        cmd = [sys.executable, "-m", "gitdns.cli", "agent"]
        env.update(settings(ROOT / "deploy" / "base" / "settings.env"))
        env.update(cloud.env())
        env.update({"GITDNS_REPO": str(desired.bare), "GITDNS_POLL_INTERVAL": "1", "GITDNS_GIT_TIMEOUT": "60",
                    "GITDNS_STATE_DIR": str(state), "GITDNS_LISTEN": f"127.0.0.1:{listen}",
                    "GITDNS_ADMIN_LISTEN": f"127.0.0.1:{admin}", "GITDNS_POD_NAME": f"gitdns-{result.name}",
                    "GITDNS_POD_NAMESPACE": POD_NAMESPACE, "GITDNS_STORE_DIR": str(desired.store),
                    "HOME": str(state)})
    env.update(extra_env or {})
    fqdn = f"{RECORD_NAME}.example.com"
    started = time.monotonic()
    head = git("rev-parse", "HEAD", cwd=desired.tree.work)
    watched = Watched(cmd, env, work / "agent.log")
    try:
        wait_for(lambda: applied_and_pushed(desired.bare, head), AGENT_TIMEOUT, watched)
        result.ready_rss = watched.rss()
        result.pushes += 1
        for i in range(writes):
            value = f"192.0.2.{i % 200 + 1}"
            desired.tree.write(f"records/{RECORD_NAME}.yaml", RECORDSET.format(value=value))
            sha = desired.tree.commit(f"bench-memory: {value}")
            wait_for(lambda s=sha: applied_and_pushed(desired.bare, s), AGENT_TIMEOUT, watched)  # type: ignore[misc]
            result.pushes += 1
            seen = cloud.value(fqdn) if cloud is not None and route53 else store_value(desired.store, fqdn)
            if seen != [value]:
                raise RuntimeError(f"write {i + 1}: the zone holds {seen} for {fqdn}, not {value}")
            result.writes += 1
            if (i + 1) % 10 == 0:
                result.rss_after.append(round(watched.rss(), 1))
        if cap_commit:
            from gitdns.core.limits import MAX_COMMIT_BYTES, MAX_FILE_BYTES

            rest = sum(p.stat().st_size for p in desired.tree.work.rglob("*.yaml") if ".git" not in p.parts)
            worst_shape(desired.tree.work / "records" / "cap-a.yaml", MAX_FILE_BYTES)
            worst_shape(desired.tree.work / "records" / "cap-b.yaml", MAX_COMMIT_BYTES - MAX_FILE_BYTES - rest)
            sha = desired.tree.commit("the worst YAML within the read caps")
            wait_for(lambda: f"attemptedRevision: {sha}" in status_summary(desired.bare), AGENT_TIMEOUT, watched)
            result.pushes += 1
            result.notes.append("worst-shape commit refused as expected" if f"appliedRevision: {sha}"
                                not in status_summary(desired.bare) else "worst-shape commit APPLIED")
        time.sleep(3)  # a few idle polls: the validation of the last write is due after 5-10 s
        status = json.loads(urllib.request.urlopen(f"http://127.0.0.1:{admin}/status", timeout=30).read())
        result.cycles = int(status.get("cycles", 0))
        result.ok = True
    except Exception as exc:  # reported; the other scenarios go on
        result.error = f"{type(exc).__name__}: {exc}"[:3000]
        result.notes.append(watched.tail(1500))
    finally:
        result.finish(watched)
        result.seconds = time.monotonic() - started
        code = watched.stop()
        if code not in (0, None) and result.ok:
            result.ok, result.error = False, f"agent exited {code} on SIGTERM: {watched.tail()}"


# -- imports -----------------------------------------------------------------------------------------

IMPORTS = {
    "python": "pass",
    "gitdns agent (local, TXT lease)": "import gitdns.cli.daemons, gitdns.agent.main, gitdns.agent.runner",
    "+ kubernetes client": "import gitdns.agent.main, kubernetes.client, kubernetes.config",
    "+ route53 (boto3 client)": "import gitdns.agent.main, boto3; boto3.client('route53', region_name='us-east-1')",
    "+ google-cloud-dns": "import gitdns.agent.main, google.cloud.dns, google.auth",
    "+ azure-mgmt-dns, azure-identity": "import gitdns.agent.main, azure.mgmt.dns, azure.identity",
    "+ kubernetes + route53": "import gitdns.agent.main, kubernetes.client, boto3; "
                              "boto3.client('route53', region_name='us-east-1')",
    "+ kubernetes + every provider": "import gitdns.agent.main, kubernetes.client, boto3, google.cloud.dns, "
                                     "azure.mgmt.dns, azure.identity; boto3.client('route53', region_name='us-east-1')",
}


def bench_imports() -> dict[str, float]:
    out = {}
    for label, code in IMPORTS.items():
        probe = code + "\nimport re\nprint(re.search(r'VmHWM:\\s+(\\d+)', open('/proc/self/status').read()).group(1))"
        try:
            out[label] = int(python("-c", probe, timeout=120).split()[-1]) / 1024
        except RuntimeError as exc:
            print(f"[imports] {label}: failed: {str(exc)[-300:]}")
    return out


# -- the run --------------------------------------------------------------------------------------------

AGENT_CASES = ("agent-local", "agent-cloud", "agent-10k", "agent-10k-cloud", "agent-100k", "agent-cap", "agent-soak")
ORCH_CASES = ("orch-1k", "orch-10k", "orch-1k-out", "orch-10k-out")
ALL = (*AGENT_CASES, *ORCH_CASES, "imports")
QUICK = ("agent-cloud", "orch-1k")

WHAT = {
    "agent-local": "example-repo, local store, TXT lease",
    "agent-cloud": "example-repo, Route53 (moto), Kubernetes Lease",
    "agent-10k": "10,000 hosts (2 zones), local store, Kubernetes Lease",
    "agent-10k-cloud": "10,000 hosts (2 zones), Route53 (moto), Kubernetes Lease",
    "agent-100k": "100,000-record zone, local store, Kubernetes Lease",
    "agent-cap": "agent-cloud + a 5 MiB worst-shape commit",
    "agent-soak": "agent-cloud, 40 writes",
    "orch-1k": "1,000 nodes, ConfigMap, Kubernetes Lease",
    "orch-10k": "10,000 nodes, ConfigMap, Kubernetes Lease",
    "orch-1k-out": "1,000 nodes, --out, file lease",
    "orch-10k-out": "10,000 nodes, --out, file lease",
}


def run_case(name: str, work: Path, args: argparse.Namespace, need_cloud: Callable[[], Cloud],
             need_probes: Callable[[int], ProbeServer]) -> Result:
    kind = "agent" if name.startswith("agent") else "orchestrator"
    result = Result(name, kind, WHAT[name])
    case = work / name
    case.mkdir()
    if name in ("agent-local", "agent-cloud", "agent-cap", "agent-soak"):
        cloud = None if name == "agent-local" else need_cloud()
        writes = 40 if name == "agent-soak" else args.writes
        run_agent(result, example_desired(case, cloud is not None), case, cloud, writes, route53=cloud is not None,
                  cap_commit=name == "agent-cap")
    elif name in ("agent-10k", "agent-10k-cloud"):
        python(str(ROOT / "bench" / "generate.py"), "repo", "--hosts", "10000", "--out", str(case / "generated"))
        route53 = name.endswith("cloud")
        run_agent(result, generated_desired(case, case / "generated", route53), case, need_cloud(), args.writes,
                  route53=route53)
    elif name == "agent-100k":
        made = json.loads(python(__file__, "--make-zone", "100000", str(case / "generated")).splitlines()[-1])
        desired = generated_desired(case, case / "generated" / "repo", False)
        zones = desired.store / ".gitdns" / "zones"
        zones.mkdir(parents=True)
        shutil.copy(case / "generated" / "zone" / "store" / "example.com.json", zones / "example.com.json")
        result.notes.append(f"zone of {made['records']} records, {made['owners']} owners, {made['hosts']} hosts; "
                            f"cluster-00 owns {made['intent']}")
        # The fixture's ownership TXT carry a revision of no repository (generate.REVISION_SHA):
        # without --allow-rollback the agent refuses every head as a rollback from it.
        result.notes.append("--allow-rollback: the zone's TXT name the fixture's revision, not this repository's")
        run_agent(result, desired, case, need_cloud(), args.writes, extra_env={"GITDNS_ALLOW_ROLLBACK": "true"})
    else:
        nodes = 10_000 if "10k" in name else 1_000
        cloud = None if name.endswith("-out") else need_cloud()
        run_orchestrator(result, nodes, case, cloud, need_probes(nodes), args.phase)
    return result


def print_result(r: Result) -> None:
    head = f"[{r.name}] {r.what}"
    if not r.ok:
        print(f"{head}: FAILED after {r.seconds:.0f} s: {r.error}")
        for note in r.notes:
            print("  " + note.replace("\n", "\n  "))
        if not r.peak:
            return
    extra = f" writes {r.writes} status pushes {r.pushes}" if r.kind == "agent" else ""
    print(f"{head}: peak (VmHWM) {r.peak:.1f} MiB  process tree {r.tree:.1f} MiB (largest child {r.child:.1f})  "
          f"ready {r.ready_rss:.1f}  idle {r.idle:.1f}  cycles {r.cycles}{extra}  {r.seconds:.0f} s")
    if r.rss_after:
        print(f"  VmRSS after every 10 writes: {r.rss_after}")
    for note in r.notes if r.ok else ():
        print("  " + note)


def table(results: list[Result]) -> None:
    print("\n| scenario | what | peak VmHWM (MiB) | process tree (MiB) | ready VmRSS (MiB) | idle VmRSS (MiB) "
          "| cycles |")
    print("|---|---|---:|---:|---:|---:|---:|")
    for r in results:
        peak = f"{r.peak:.1f}" if r.ok else (f"{r.peak:.1f} (failed)" if r.peak else "failed")
        print(f"| {r.name} | {r.what} | {peak} | {r.tree:.1f} | {r.ready_rss:.1f} | {r.idle:.1f} | {r.cycles} |")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help=f"only {', '.join(QUICK)}, 2 writes, short phases")
    parser.add_argument("--only", default="", help=f"comma-separated: {', '.join(ALL)}")
    parser.add_argument("--writes", type=int, default=5, help="write cycles per agent scenario (default 5)")
    parser.add_argument("--phase", type=float, default=INTERVAL, help="orchestrator phase unit, seconds")
    parser.add_argument("--json", type=Path, help="write the results there as JSON")
    parser.add_argument("--keep", action="store_true", help="keep the work directory")
    parser.add_argument("--make-zone", nargs=2, metavar=("RECORDS", "OUT"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.make_zone:
        make_zone_and_repo(int(args.make_zone[0]), Path(args.make_zone[1]))
        return 0
    names = list(QUICK) if args.quick else [n for n in ALL if n in args.only.split(",")] if args.only else list(ALL)
    unknown = set(args.only.split(",")) - set(ALL) - {""}
    if unknown:
        parser.error(f"unknown scenario(s): {', '.join(sorted(unknown))}")
    if args.quick:
        args.writes, args.phase = min(args.writes, 2), min(args.phase, 2.0)
    work = Path(tempfile.mkdtemp(prefix="gitdns-bench-memory-"))
    cloud: list[Cloud] = []
    probes: list[ProbeServer] = []

    def need_cloud() -> Cloud:
        if not cloud:
            cloud.append(Cloud(work / "cloud"))
        return cloud[0]

    def need_probes(nodes: int) -> ProbeServer:
        if probes and probes[0].nodes != nodes:
            probes.pop().close()
        if not probes:
            probes.append(ProbeServer(nodes))
        return probes[0]

    results: list[Result] = []
    imports: dict[str, float] = {}
    try:
        for name in names:
            if name == "imports":
                imports = bench_imports()
                for label, mib in imports.items():
                    print(f"[imports] {label}: VmHWM {mib:.1f} MiB")
                continue
            results.append(run_case(name, work, args, need_cloud, need_probes))
            print_result(results[-1])
            sys.stdout.flush()
    finally:
        for c in cloud:
            c.close()
        for p in probes:
            p.close()
        if args.keep:
            print(f"work directory kept: {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)
    table(results)
    if args.json:
        args.json.write_text(json.dumps({"results": [asdict(r) for r in results], "imports": imports}, indent=2) + "\n")
    return 0 if all(r.ok for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
