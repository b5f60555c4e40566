"""Ctrl-C at any moment of a ``gangway`` command — also while its modules still load, the first
second or so — is one ``interrupted`` line and exit 130, never a traceback."""

from __future__ import annotations

import signal
import subprocess
import sys
import time

from tests.helpers import REPO

# The console script's own entry: `gangway = "gangway.cli:main"` (pyproject [project.scripts]).
_SCRIPT = [sys.executable, "-c", "import sys; from gangway.cli import main; sys.exit(main())"]


def test_ctrl_c_while_the_modules_load_is_one_line_and_exit_130() -> None:
    proc = subprocess.Popen(
        [*_SCRIPT, "queues", "--snapshot", "example"],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        # a child of a non-interactive shell may inherit SIGINT ignored: restore the default
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.default_int_handler),
    )
    time.sleep(0.3)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=30)
    assert "Traceback" not in err, err
    assert proc.returncode == 130, (proc.returncode, out, err)
    assert err.strip() == "interrupted", err
