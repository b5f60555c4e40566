#!/usr/bin/env bash
# Regenerate the runtime image's lock files from pyproject.toml:
#
#   docker/lock.sh
#
# Both locks hold the project's runtime dependencies (the `train` and `tracking` extras, no dev
# tools) resolved for the image's platform — CPython 3.11 on x86_64 glibc (manylinux_2_28) —
# with the sha256 of every file, without installing or downloading the wheels:
#   docker/requirements-cuda.lock  torch from PyPI, whose Linux x86_64 build is the CUDA one
#                                  (with the nvidia-* CUDA wheels and triton)
#   docker/requirements-cpu.lock   the same with torch==X+cpu (docker/overrides-cpu.txt) from
#                                  the PyTorch CPU index: no CUDA wheels at all
# It needs uv (`pip install uv`; UV=/path/to/uv to use another) and PyPI; the cpu lock also the
# PyTorch CPU index, or GANGWAY_TORCH_FIND_LINKS=DIR holding the same torch wheel.
# Commit both locks with the pyproject.toml change; tests/e2e/test_image.py checks they agree.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cd "$(dirname "$here")"
uv="${UV:-uv}"
torch_find_links="${GANGWAY_TORCH_FIND_LINKS:-https://download.pytorch.org/whl/cpu/torch/}"

common=(
    pyproject.toml --extra train --extra tracking
    --generate-hashes --python-version 3.11 --python-platform x86_64-manylinux_2_28
    --custom-compile-command docker/lock.sh --quiet
)
"$uv" pip compile "${common[@]}" --output-file docker/requirements-cuda.lock
"$uv" pip compile "${common[@]}" --override docker/overrides-cpu.txt \
    --find-links "$torch_find_links" --output-file docker/requirements-cpu.lock
