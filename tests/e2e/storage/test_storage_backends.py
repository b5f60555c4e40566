"""The storage backends behind one protocol: one backend per URI, chosen by its scheme, and
boto3 left unimported by ``file://`` work."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from gangway.errors import PermanentError
from gangway.storage._backend import backend_for
from gangway.storage._local import LocalBackend
from gangway.storage._s3 import S3Backend
from tests.helpers import REPO


def test_backend_for_picks_one_backend_per_scheme(tmp_path: Path) -> None:
    local = backend_for(f"file://{tmp_path}/a")
    assert isinstance(local, LocalBackend) and local.local_dir() == tmp_path / "a"
    bare = backend_for(str(tmp_path / "b"))
    assert isinstance(bare, LocalBackend) and bare.local_dir() == tmp_path / "b"
    s3 = backend_for("s3://bucket-1/prefix/x")
    assert isinstance(s3, S3Backend) and s3.local_dir() is None
    assert (s3.location.bucket, s3.location.key) == ("bucket-1", "prefix/x")


def test_backend_for_refuses_what_parse_refuses() -> None:
    with pytest.raises(PermanentError, match="unsupported scheme 'gs'"):
        backend_for("gs://bucket/x")


def test_file_uris_do_not_import_boto3(tmp_path: Path) -> None:
    code = (
        "import sys; from pathlib import Path; from gangway import storage\n"
        f"root = {str(tmp_path)!r}\n"
        "storage.write_bytes(f'file://{root}/x/one', b'1')\n"
        "assert storage.read_bytes(f'file://{root}/x/one') == b'1'\n"
        "storage.publish_dir(Path(root, 'x'), f'file://{root}/ds')\n"
        "storage.fetch_dir(f'file://{root}/ds', Path(root, 'copy'))\n"
        "assert 'boto3' not in sys.modules and 'gangway.storage._s3' not in sys.modules\n"
    )
    res = subprocess.run(
        [sys.executable, "-c", code],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert res.returncode == 0, res.stderr
