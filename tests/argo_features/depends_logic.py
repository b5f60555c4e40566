"""The ``depends`` grammar on task results: ``.Failed``, ``||``, ``&&``, ``!``, parentheses, a
bare name (Succeeded, Skipped or Daemoned). Every failure here is handled by a dependant, so
the workflow succeeds; the Omitted tasks only hang off tasks that did not fail."""

from hera.workflows import DAG, Task, Workflow

from tests.argo_features._build import sh

with Workflow(name="depends-logic", entrypoint="main") as w:
    ok = sh("ok", "echo ok")
    boom = sh("boom", "echo boom; exit 1")
    with DAG(name="main"):
        Task(name="good", template=ok)
        Task(name="bad", template=boom)
        Task(name="skipped", template=ok, when="1 == 2")
        Task(name="on-bad-failed", template=ok, depends="bad.Failed")
        Task(name="either", template=ok, depends="good.Succeeded || bad.Succeeded")
        Task(name="neither", template=ok, depends="good.Failed || skipped.Succeeded")
        Task(name="not-skipped", template=ok, depends="!skipped.Skipped")
        Task(name="not-failed", template=ok, depends="!good.Failed")
        Task(
            name="grouped",
            template=ok,
            depends="(bad.Failed || bad.Errored) && (good.Succeeded || good.Skipped)",
        )
        Task(name="bare-skipped", template=ok, depends="skipped")
