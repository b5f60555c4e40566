"""The cluster side of a run: settings per cluster, the Argo and Kubernetes APIs, submitting,
status, logs, and pinning images by digest.
"""
