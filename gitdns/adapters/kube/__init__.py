"""kube: its modules, each imported where it is used (this file imports nothing).

- `access`: Kubernetes access, imported only when a command needs it (the client is heavy).
- `client`: The Kubernetes client: the one module that loads credentials and creates API clients.
- `clusters`: Remote clusters from kubeconfig Secrets (the cluster-aware controller of Kuadrant's "Cluster
"""
