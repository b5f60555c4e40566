"""A step starts in the container's ``/`` (an image's default working directory) or in its
``workingDir``: a relative path it writes is where the declared absolute path points, and a
relative declared path is under the working directory."""

from hera.workflows import DAG, Parameter, Task, Workflow
from hera.workflows import models as m

from tests.argo_features._build import sh

with Workflow(name="working-dir-relative", entrypoint="main") as w:
    at_root = sh(
        "at-root",
        "echo hi > gw-out.txt",
        outputs=[Parameter(name="out", value_from=m.ValueFrom(path="/gw-out.txt"))],
    )
    in_dir = sh(
        "in-dir",
        "echo w > w.txt && echo r > r.txt",
        working_dir="/gw-work",
        outputs=[
            Parameter(name="abs", value_from=m.ValueFrom(path="/gw-work/w.txt")),
            Parameter(name="rel", value_from=m.ValueFrom(path="r.txt")),
        ],
    )
    with DAG(name="main"):
        Task(name="at-root", template=at_root)
        Task(name="in-dir", template=in_dir)
