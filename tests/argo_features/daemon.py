"""A daemon template (``daemon: true``) serving HTTP on 127.0.0.1 with a readinessProbe; the
next task starts once it is ready and reaches it at ``{{tasks.server.ip}}``. The daemon is
stopped when the DAG ends."""

from hera.workflows import DAG, Parameter, Script, Task, Workflow
from hera.workflows import models as m

from tests.argo_features._build import IMAGE, py

PORT = 18431

SERVER = f"""\
import http.server


class Pong(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        body = b"pong" if self.path == "/ping" else b"ready"
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


http.server.HTTPServer(("127.0.0.1", {PORT}), Pong).serve_forever()
"""

CLIENT = (
    "import urllib.request;"
    f" print(urllib.request.urlopen('http://{{{{inputs.parameters.ip}}}}:{PORT}/ping', timeout=5)"
    ".read().decode())"
)
"""The daemon's address comes in as an argument: Argo fills a template's body from its inputs
and the workflow's variables only, not from its caller's ``tasks.*``."""

with Workflow(name="daemon", entrypoint="main") as w:
    server = Script(
        name="server",
        image=IMAGE,
        command=["python"],
        source=SERVER,
        daemon=True,
        readiness_probe=m.Probe(
            http_get=m.HTTPGetAction(path="/", port=PORT), period_seconds=1, timeout_seconds=1
        ),
    )
    with DAG(name="main"):
        Task(name="server", template=server)
        client = py("client", CLIENT, inputs=[Parameter(name="ip")])
        Task(
            name="client",
            template=client,
            depends="server",
            arguments={"ip": "{{tasks.server.ip}}"},
        )
