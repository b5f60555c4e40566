"""Gangway: an ML platform on Argo Workflows.

This package stays import-light on purpose: step processes import single modules
(``gangway.storage``, ``gangway.errors``) and must not pay for Hera or Kubernetes.
"""

__version__ = "0.1.0"
__all__ = ["__version__"]
