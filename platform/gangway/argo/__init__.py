"""Argo Workflows' semantics, as Gangway evaluates them: one home for the local executor
(:mod:`gangway.local`) and the linter (:mod:`gangway.lint`), neither of which imports the other.

* :mod:`~gangway.argo.substitution` — ``{{name}}`` placeholders, filled from a scope;
* :mod:`~gangway.argo.expressions` — ``{{=expr}}``, ``when`` and ``retryStrategy.expression``;
* :mod:`~gangway.argo.manifests` — a resource template's manifest, filled without letting a
  value change its structure;
* :mod:`~gangway.argo.conditions` — DAG ``depends`` clauses and resource success/failure
  conditions;
* :mod:`~gangway.argo.scope` — the variables in scope: workflow, inputs, task outputs, items.

What is not implemented is refused with :class:`UnsupportedConstruct`, never guessed.
"""

from gangway.errors import UnsupportedConstruct

__all__ = ["UnsupportedConstruct"]
