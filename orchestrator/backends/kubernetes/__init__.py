"""The Kubernetes backend: Episodes as single-use Pods on a cluster, driven through the official client."""
