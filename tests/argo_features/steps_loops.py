"""Steps fan-out: ``withItems`` (strings and maps), ``withParam`` from a previous step's result,
``withSequence`` by count, by start/end, and with a format."""

from hera.workflows import Parameter, Step, Steps, Workflow
from hera.workflows import models as m

from tests.argo_features._build import py, sh

with Workflow(name="steps-loops", entrypoint="main") as w:
    gen = py("gen", "import json; print(json.dumps(['x', 'y']))")
    echo = sh("echo", "echo {{inputs.parameters.v}}", inputs=[Parameter(name="v")])
    with Steps(name="main") as s:
        Step(name="gen", template=gen)
        with s.parallel():
            Step(name="items", template=echo, arguments={"v": "{{item}}"}, with_items=["a", "b"])
            Step(
                name="maps",
                template=echo,
                arguments={"v": "{{item.k}}"},
                with_items=[{"k": "p"}, {"k": "q"}],
            )
            Step(
                name="param",
                template=echo,
                arguments={"v": "got-{{item}}"},
                with_param="{{steps.gen.outputs.result}}",
            )
            Step(
                name="count",
                template=echo,
                arguments={"v": "{{item}}"},
                with_sequence=m.Sequence(count="3"),
            )
            Step(
                name="range",
                template=echo,
                arguments={"v": "{{item}}"},
                with_sequence=m.Sequence(start="2", end="4"),
            )
            Step(
                name="fmt",
                template=echo,
                arguments={"v": "{{item}}"},
                with_sequence=m.Sequence(count="2", start="1", format="v%02d"),
            )
