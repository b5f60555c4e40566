"""Output artifacts, a file and a directory, passed with ``from`` to the input artifacts of the
next task, which echoes what it received."""

from hera.workflows import DAG, Artifact, Task, Workflow

from tests.argo_features._build import py, sh

LIST_TREE = (
    "import pathlib; root = pathlib.Path('/tmp/gw-tree-in');"
    " print(' '.join(f'{p.relative_to(root)}={p.read_text().strip()}'"
    " for p in sorted(root.rglob('*')) if p.is_file()))"
)

with Workflow(name="artifacts-passing", entrypoint="main") as w:
    make = sh(
        "make",
        "mkdir -p /tmp/gw-make/tree/sub && echo hello-file > /tmp/gw-make/note.txt"
        " && echo alpha > /tmp/gw-make/tree/a.txt && echo beta > /tmp/gw-make/tree/sub/b.txt",
        outputs=[
            Artifact(name="note", path="/tmp/gw-make/note.txt"),
            Artifact(name="tree", path="/tmp/gw-make/tree"),
        ],
    )
    read_note = sh(
        "read-note",
        "cat /tmp/gw-note-in/note.txt",
        inputs=[Artifact(name="note", path="/tmp/gw-note-in/note.txt")],
    )
    read_tree = py("read-tree", LIST_TREE, inputs=[Artifact(name="tree", path="/tmp/gw-tree-in")])
    with DAG(name="main"):
        Task(name="make", template=make)
        Task(
            name="read-note",
            template=read_note,
            depends="make",
            arguments=[Artifact(name="note", from_="{{tasks.make.outputs.artifacts.note}}")],
        )
        Task(
            name="read-tree",
            template=read_tree,
            depends="make",
            arguments=[Artifact(name="tree", from_="{{tasks.make.outputs.artifacts.tree}}")],
        )
