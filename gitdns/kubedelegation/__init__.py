"""Delegation through Kubernetes, as Kuadrant's "Cluster Aware DNSRecord Delegation" RFC designs it:
a primary merges the Kuadrant DNSRecords of its own and of remote clusters into authoritative
DNSRecords and publishes them.

    delegation.py   one pass (`KubeDelegation.run_once`, every agent cycle of a primary) and
                    `build_kube_delegation` from the agent's configuration
    merge.py        one ``(namespace, rootHost)`` group merged into its authoritative record
    publish.py      an authoritative record's data published to the zone's DNS provider

The Kubernetes calls are adapters: `gitdns.adapters.dnsrecords` (DNSRecords, namespaces),
`gitdns.adapters.kube.clusters` (the remote clusters' kubeconfig Secrets) and
`gitdns.adapters.kube.client` (the primary's own client).
"""
