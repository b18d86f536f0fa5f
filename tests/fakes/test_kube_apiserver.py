"""The fake Kubernetes API server, exercised with the official ``kubernetes`` client."""

from __future__ import annotations

import json
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest

from tests.fakes.kube_apiserver import FakeKube

kubernetes = pytest.importorskip("kubernetes")
from kubernetes import client  # noqa: E402
from kubernetes.client.rest import ApiException  # noqa: E402

GW = ("gateway.networking.k8s.io", "v1", "gateways")


@pytest.fixture
def fake() -> Iterator[FakeKube]:
    kube = FakeKube()
    kube.register(*GW, kind="Gateway")
    kube.register("kuadrant.io", "v1alpha1", "dnsrecords", kind="DNSRecord")
    kube.start()
    yield kube
    kube.stop()


@pytest.fixture
def api(fake: FakeKube) -> Iterator[client.ApiClient]:
    cfg = client.Configuration()
    cfg.host = fake.base_url
    with client.ApiClient(cfg) as api_client:
        yield api_client


def configmap(name: str, labels: dict[str, str] | None = None, **data: str) -> client.V1ConfigMap:
    return client.V1ConfigMap(metadata=client.V1ObjectMeta(name=name, labels=labels), data=data)


def gateway(name: str, **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "gateway.networking.k8s.io/v1", "kind": "Gateway", "metadata": {"name": name},
            "spec": {"gatewayClassName": "example", "listeners": [], **spec},
            "status": {"conditions": [{"type": "Programmed", "status": "True"}]}}


def status_of(exc: pytest.ExceptionInfo[ApiException]) -> dict[str, Any]:
    body: dict[str, Any] = json.loads(exc.value.body)
    return body


def test_version_and_seeded_namespaces(fake: FakeKube, api: client.ApiClient) -> None:
    assert client.VersionApi(api).get_code().git_version == "v1.30.0-fake"
    kube_system = client.CoreV1Api(api).read_namespace("kube-system")
    assert kube_system.metadata.uid == fake.kube_system_uid
    assert kube_system.status.phase == "Active"


def test_create_get_and_metadata(api: client.ApiClient) -> None:
    core = client.CoreV1Api(api)
    created = core.create_namespaced_config_map("default", configmap("a", x="1"))
    assert created.metadata.uid and created.metadata.creation_timestamp and created.metadata.resource_version
    assert created.metadata.generation is None  # as Kubernetes: ConfigMaps have no generation
    read = core.read_namespaced_config_map("a", "default")
    assert read.data == {"x": "1"} and read.metadata.resource_version == created.metadata.resource_version
    second = core.create_namespaced_config_map("default", configmap("b"))
    assert int(second.metadata.resource_version) > int(created.metadata.resource_version)


def test_create_twice_is_409_already_exists(api: client.ApiClient) -> None:
    core = client.CoreV1Api(api)
    core.create_namespaced_config_map("default", configmap("a"))
    with pytest.raises(ApiException) as exc:
        core.create_namespaced_config_map("default", configmap("a"))
    assert exc.value.status == 409
    status = status_of(exc)
    assert status["kind"] == "Status" and status["status"] == "Failure"
    assert status["reason"] == "AlreadyExists" and status["code"] == 409
    assert status["message"] == 'configmaps "a" already exists'


def test_missing_object_is_404_not_found(api: client.ApiClient) -> None:
    with pytest.raises(ApiException) as exc:
        client.CoordinationV1Api(api).read_namespaced_lease("nope", "default")
    assert exc.value.status == 404
    status = status_of(exc)
    assert (status["reason"], status["code"]) == ("NotFound", 404)
    assert status["message"] == 'leases.coordination.k8s.io "nope" not found'
    with pytest.raises(ApiException) as exc:
        client.CoreV1Api(api).replace_namespaced_config_map("nope", "default", configmap("nope"))
    assert exc.value.status == 404  # no create on update


def test_create_in_a_missing_namespace_is_404(api: client.ApiClient) -> None:
    core = client.CoreV1Api(api)
    with pytest.raises(ApiException) as exc:
        core.create_namespaced_config_map("elsewhere", configmap("a"))
    assert exc.value.status == 404 and status_of(exc)["message"] == 'namespaces "elsewhere" not found'
    core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name="elsewhere")))
    core.create_namespaced_config_map("elsewhere", configmap("a"))
    core.delete_namespace("elsewhere")
    with pytest.raises(ApiException) as exc:
        core.read_namespaced_config_map("a", "elsewhere")
    assert exc.value.status == 404


def test_list_with_label_selector_and_list_resource_version(api: client.ApiClient) -> None:
    core = client.CoreV1Api(api)
    core.create_namespaced_config_map("default", configmap("a", {"app": "dns", "tier": "x"}))
    core.create_namespaced_config_map("default", configmap("b", {"app": "dns"}))
    last = core.create_namespaced_config_map("default", configmap("c", {"app": "web"}))
    core.create_namespaced_config_map("kube-system", configmap("d", {"app": "dns"}))

    def names(**kwargs: Any) -> list[str]:
        return [i.metadata.name for i in core.list_namespaced_config_map("default", **kwargs).items]

    assert names() == ["a", "b", "c"]
    assert names(label_selector="app=dns") == ["a", "b"]
    assert names(label_selector="app==dns,tier") == ["a"]
    assert names(label_selector="app=dns,!tier") == ["b"]
    assert names(label_selector="app!=dns") == ["c"]
    listed = core.list_namespaced_config_map("default")
    assert int(listed.metadata.resource_version) > int(last.metadata.resource_version)
    everywhere = core.list_config_map_for_all_namespaces(label_selector="app=dns")
    assert sorted(i.metadata.name for i in everywhere.items) == ["a", "b", "d"]
    with pytest.raises(ApiException) as exc:
        core.list_namespaced_config_map("default", label_selector="app in (dns)")
    assert exc.value.status == 400  # set-based selectors are not implemented: loud, not wrong


def test_replace_with_a_stale_resource_version_is_409_conflict(api: client.ApiClient) -> None:
    core = client.CoreV1Api(api)
    first = core.create_namespaced_config_map("default", configmap("a", x="1"))
    first.data = {"x": "2"}
    second = core.replace_namespaced_config_map("a", "default", first)
    assert int(second.metadata.resource_version) > int(first.metadata.resource_version)
    first.data = {"x": "3"}  # still carries the old resourceVersion
    with pytest.raises(ApiException) as exc:
        core.replace_namespaced_config_map("a", "default", first)
    assert exc.value.status == 409
    status = status_of(exc)
    assert status["reason"] == "Conflict"
    assert "the object has been modified" in status["message"]
    assert core.read_namespaced_config_map("a", "default").data == {"x": "2"}
    # Built-in kinds allow an unconditional update (no resourceVersion at all).
    assert core.replace_namespaced_config_map("a", "default", configmap("a", x="4")).data == {"x": "4"}


def test_custom_resources_need_a_resource_version_to_update(api: client.ApiClient) -> None:
    custom = client.CustomObjectsApi(api)
    created = custom.create_namespaced_custom_object(*GW[:2], "default", GW[2], gateway("gw"))
    assert created["metadata"]["generation"] == 1
    body = gateway("gw")
    with pytest.raises(ApiException) as exc:
        custom.replace_namespaced_custom_object(*GW[:2], "default", GW[2], "gw", body)
    assert exc.value.status == 422


def test_merge_patch_and_strategic_merge_patch(api: client.ApiClient) -> None:
    core = client.CoreV1Api(api)
    created = core.create_namespaced_config_map("default", configmap("a", {"keep": "1", "drop": "1"}, x="1"))
    # A dict body goes out as a strategic merge patch: maps merged, null removes.
    patched = core.patch_namespaced_config_map(
        "a", "default", {"metadata": {"labels": {"drop": None, "new": "2"}}, "data": {"y": "2"}})
    assert patched.metadata.labels == {"keep": "1", "new": "2"}
    assert patched.data == {"x": "1", "y": "2"}
    merged = core.patch_namespaced_config_map("a", "default", {"data": {"x": None}},
                                              _content_type="application/merge-patch+json")
    assert merged.data == {"y": "2"}
    with pytest.raises(ApiException) as exc:  # a resourceVersion in the patch is a precondition
        core.patch_namespaced_config_map("a", "default", {"metadata": {
            "resourceVersion": created.metadata.resource_version}, "data": {"z": "3"}})
    assert exc.value.status == 409
    with pytest.raises(ApiException) as exc:  # JSON patch is not implemented
        core.patch_namespaced_config_map("a", "default", [{"op": "add", "path": "/data/z", "value": "3"}])
    assert exc.value.status == 415


def test_custom_resource_patch_is_merge_only_and_lists_are_replaced(api: client.ApiClient) -> None:
    custom = client.CustomObjectsApi(api)
    custom.create_namespaced_custom_object(*GW[:2], "default", GW[2], gateway("gw", listeners=[{"name": "a"}]))
    patched = custom.patch_namespaced_custom_object(*GW[:2], "default", GW[2], "gw",
                                                    {"spec": {"listeners": [{"name": "b"}]}})
    assert patched["spec"]["listeners"] == [{"name": "b"}]
    assert patched["metadata"]["generation"] == 2
    with pytest.raises(ApiException) as exc:  # as Kubernetes: no strategic merge for custom resources
        custom.patch_namespaced_custom_object(*GW[:2], "default", GW[2], "gw", {"spec": {}},
                                              _content_type="application/strategic-merge-patch+json")
    assert exc.value.status == 415


def test_status_subresource_semantics(fake: FakeKube, api: client.ApiClient) -> None:
    custom = client.CustomObjectsApi(api)
    args = (*GW[:2], "default", GW[2])
    created = custom.create_namespaced_custom_object(*args, gateway("gw"))
    assert "status" not in created  # create cannot set status
    with_status = dict(created, status={"conditions": [{"type": "Accepted", "status": "True"}]})
    with_status["spec"] = dict(created["spec"], gatewayClassName="ignored")
    after = custom.replace_namespaced_custom_object_status(*args, "gw", with_status)
    assert after["status"]["conditions"] == [{"type": "Accepted", "status": "True"}]
    assert after["spec"]["gatewayClassName"] == "example"  # /status changes only .status
    assert after["metadata"]["generation"] == 1  # a status write is not a new generation
    main = dict(after, status={"conditions": []})
    main["spec"] = dict(after["spec"], gatewayClassName="other")
    replaced = custom.replace_namespaced_custom_object(*args, "gw", main)
    assert replaced["spec"]["gatewayClassName"] == "other"
    assert replaced["status"]["conditions"] == [{"type": "Accepted", "status": "True"}]  # main PUT keeps .status
    assert replaced["metadata"]["generation"] == 2
    patched = custom.patch_namespaced_custom_object_status(*args, "gw", {"status": {"addresses": []},
                                                                         "spec": {"gatewayClassName": "x"}})
    assert patched["status"] == {"conditions": [{"type": "Accepted", "status": "True"}], "addresses": []}
    assert patched["spec"]["gatewayClassName"] == "other"
    with pytest.raises(ApiException) as exc:  # stale resourceVersion on /status too
        custom.replace_namespaced_custom_object_status(*args, "gw", with_status)
    assert exc.value.status == 409
    assert custom.get_namespaced_custom_object_status(*args, "gw")["spec"]["gatewayClassName"] == "other"
    assert fake.count("PUT", "/gateways/gw/status") == 2
    with pytest.raises(urllib.error.HTTPError) as http:  # ConfigMaps have no status subresource
        urllib.request.urlopen(f"{fake.base_url}/api/v1/namespaces/default/configmaps/x/status")
    assert http.value.code == 404 and json.load(http.value)["reason"] == "NotFound"


def test_delete_with_a_stale_precondition_is_409(api: client.ApiClient) -> None:
    core = client.CoreV1Api(api)
    created = core.create_namespaced_config_map("default", configmap("a"))
    core.patch_namespaced_config_map("a", "default", {"data": {"x": "1"}})
    stale = client.V1DeleteOptions(preconditions=client.V1Preconditions(
        resource_version=created.metadata.resource_version))
    with pytest.raises(ApiException) as exc:
        core.delete_namespaced_config_map("a", "default", body=stale)
    assert exc.value.status == 409 and "Precondition failed" in status_of(exc)["message"]
    current = core.read_namespaced_config_map("a", "default").metadata.resource_version
    fresh = client.V1DeleteOptions(preconditions=client.V1Preconditions(resource_version=current))
    assert core.delete_namespaced_config_map("a", "default", body=fresh)["status"] == "Success"
    with pytest.raises(ApiException) as exc:
        core.delete_namespaced_config_map("a", "default")
    assert exc.value.status == 404


def test_secrets_nodes_leases_and_custom_resources(api: client.ApiClient) -> None:
    core = client.CoreV1Api(api)
    core.create_namespaced_secret("default", client.V1Secret(metadata=client.V1ObjectMeta(name="s"),
                                                             string_data={"k": "v"}))
    assert core.read_namespaced_secret("s", "default").metadata.name == "s"
    core.create_node(client.V1Node(metadata=client.V1ObjectMeta(name="n1", labels={"zone": "eu"})))
    assert [n.metadata.name for n in core.list_node(label_selector="zone=eu").items] == ["n1"]
    leases = client.CoordinationV1Api(api)
    now = datetime(2024, 5, 1, 12, 0, 0, 123456, tzinfo=UTC)
    lease = leases.create_namespaced_lease("default", client.V1Lease(
        metadata=client.V1ObjectMeta(name="l"), spec=client.V1LeaseSpec(holder_identity="me", renew_time=now)))
    assert lease.spec.renew_time == now
    custom = client.CustomObjectsApi(api)
    record = {"apiVersion": "kuadrant.io/v1alpha1", "kind": "DNSRecord", "metadata": {"name": "r"},
              "spec": {"endpoints": []}}
    custom.create_namespaced_custom_object("kuadrant.io", "v1alpha1", "default", "dnsrecords", record)
    got = custom.list_namespaced_custom_object("kuadrant.io", "v1alpha1", "default", "dnsrecords")
    assert [i["metadata"]["name"] for i in got["items"]] == ["r"] and got["kind"] == "DNSRecordList"
    deleted = custom.delete_namespaced_custom_object("kuadrant.io", "v1alpha1", "default", "dnsrecords", "r")
    assert deleted["metadata"]["name"] == "r"


def test_lease_times_must_be_microtime(api: client.ApiClient) -> None:
    """As Kubernetes: acquireTime/renewTime need exactly six fractional digits. The client
    writes datetime.isoformat(), which has none when the microseconds are 0."""
    leases = client.CoordinationV1Api(api)
    whole_second = datetime(2024, 5, 1, 12, 0, 0, tzinfo=UTC)
    with pytest.raises(ApiException) as exc:
        leases.create_namespaced_lease("default", client.V1Lease(
            metadata=client.V1ObjectMeta(name="l"), spec=client.V1LeaseSpec(renew_time=whole_second)))
    assert exc.value.status == 400 and "RFC3339Micro" in status_of(exc)["message"]


def test_hooks_see_requests_and_may_change_the_store(fake: FakeKube, api: client.ApiClient) -> None:
    core = client.CoreV1Api(api)
    core.create_namespaced_config_map("default", configmap("a", x="1"))
    read = core.read_namespaced_config_map("a", "default")

    def other_writer(request: Any) -> None:
        if request.method == "PUT":
            fake.mutate("", "v1", "configmaps", "a", lambda o: o["data"].update(other="yes"), namespace="default")

    fake.add_hook(other_writer)
    read.data["x"] = "2"
    with pytest.raises(ApiException) as exc:
        core.replace_namespaced_config_map("a", "default", read)
    assert exc.value.status == 409
    assert fake.get("", "v1", "configmaps", "a", namespace="default")["data"] == {"x": "1", "other": "yes"}
    assert fake.count("PUT") == 1 and fake.count("GET", "/configmaps/a") == 1


def test_runs_as_a_process_and_serves_raw_http() -> None:
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    proc = subprocess.Popen([sys.executable, "-m", "tests.fakes.kube_apiserver", str(port)],
                            stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert line.strip() == f"ready http://127.0.0.1:{port}"
        deadline = time.monotonic() + 10
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/apis/gateway.networking.k8s.io/v1") as resp:
                    body = json.load(resp)
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)
        assert "gateways/status" in {r["name"] for r in body["resources"]}
    finally:
        proc.terminate()
        proc.wait(timeout=10)
