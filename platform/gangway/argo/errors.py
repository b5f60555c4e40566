"""The one error of Argo semantics: something Gangway does not implement (yet)."""

from __future__ import annotations

from gangway.errors import PermanentError

__all__ = ["UnsupportedConstruct"]


class UnsupportedConstruct(PermanentError):
    """A workflow uses an Argo construct (a field, an expression, a condition) that Gangway
    does not evaluate; the message names it and where it is."""
