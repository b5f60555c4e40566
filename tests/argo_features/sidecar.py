"""A sidecar next to the main container: the sidecar serves HTTP on 127.0.0.1, the main
container polls it until it answers; the sidecar is stopped when the main container exits."""

from hera.workflows import UserContainer, Workflow

from tests.argo_features._build import IMAGE, py

PORT = 18432

SIDECAR = f"""\
import http.server


class Hello(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        body = b"sidecar-says-hi"
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


http.server.HTTPServer(("127.0.0.1", {PORT}), Hello).serve_forever()
"""

MAIN = f"""\
import time, urllib.request
for _ in range(100):
    try:
        print(urllib.request.urlopen("http://127.0.0.1:{PORT}/", timeout=1).read().decode())
        break
    except OSError:
        time.sleep(0.1)
else:
    raise SystemExit("the sidecar never answered")
"""

with Workflow(name="sidecar", entrypoint="main") as w:
    py(
        "main",
        MAIN,
        sidecars=[UserContainer(name="hello", image=IMAGE, command=["python", "-c", SIDECAR])],
    )
