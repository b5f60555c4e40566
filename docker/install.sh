#!/usr/bin/env bash
# Build the runtime image's Python environment: the one place its install steps live.
#
#   docker/install.sh [--dry-run] VARIANT [STEP...]
#
# VARIANT is cpu or cuda: which lock file (docker/requirements-VARIANT.lock) is installed.
# STEPs, run in the order given (default: deps project check):
#   deps     create the virtual environment and install the locked dependencies: wheels only,
#            no resolver (--no-deps), every file checked against the lock's sha256
#   project  build gangway (packages gangway, components, pipelines) from a clean copy of the
#            source and install it without dependencies: the lock holds them all
#   check    import what the steps import, run `gangway --help` and `pip check`, and find the
#            compilers torch.compile needs
#   compile  torch.compile a small function on the CPU, proving that the C++ compiler and the
#            Python headers work for inductor (about 30 s: the Dockerfile runs it, the test
#            suite only under -m slow)
# --dry-run prints each command instead of running it (the commands go to stderr either way).
#
# Environment:
#   GANGWAY_VENV              the virtual environment to create and fill (default /opt/venv)
#   GANGWAY_PYTHON            the interpreter that creates it (default python3); must be 3.11,
#                             the version the locks are resolved for
#   GANGWAY_TORCH_FIND_LINKS  where the cpu variant's torch wheel is found (default: the
#                             PyTorch CPU index's page for torch). The lock's hash is checked
#                             wherever it comes from.
#
# The Dockerfile runs this script; tests/e2e/test_image.py runs it in a fresh venv.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(dirname "$here")"
venv="${GANGWAY_VENV:-/opt/venv}"
python="${GANGWAY_PYTHON:-python3}"
torch_find_links="${GANGWAY_TORCH_FIND_LINKS:-https://download.pytorch.org/whl/cpu/torch/}"
variants="cpu cuda"
all_steps="deps project check compile"

die() {
    echo "docker/install.sh: $*" >&2
    exit 2
}

dry_run=0
if [[ "${1-}" == "--dry-run" ]]; then
    dry_run=1
    shift
fi

variant="${1-}"
case "$variant" in
    cpu | cuda) ;;
    "") die "missing VARIANT: must be one of: $variants (docker build --build-arg VARIANT=...)" ;;
    *) die "unknown VARIANT '$variant': must be one of: $variants (docker build --build-arg VARIANT=...)" ;;
esac
shift
steps=("$@")
[[ ${#steps[@]} -gt 0 ]] || steps=(deps project check)
for s in "${steps[@]}"; do
    [[ " $all_steps " == *" $s "* ]] || die "unknown STEP '$s': must be one of: $all_steps"
done

lock="$here/requirements-$variant.lock"
[[ -f "$lock" ]] || die "no lock file $lock: generate it with docker/lock.sh"

run() {
    echo "+ ${*@Q}" >&2
    [[ $dry_run -eq 1 ]] || "$@"
}

scratch_dir() {
    if [[ $dry_run -eq 1 ]]; then
        echo "/tmp/gangway-$1.XXXXXX"
    else
        mktemp -d -t "gangway-$1.XXXXXX"
    fi
}

deps() {
    if [[ $dry_run -eq 0 ]] && ! "$python" -c 'import sys; sys.exit(sys.version_info[:2] != (3, 11))'; then
        die "$python is not Python 3.11, the version the locks are resolved for (set GANGWAY_PYTHON)"
    fi
    run "$python" -m venv "$venv"
    local torch_source=()
    # Only the cpu torch comes from elsewhere than PyPI. A find-links page that lists torch and
    # nothing else (rather than an extra index) keeps every other package on PyPI.
    if [[ "$variant" == cpu ]]; then
        torch_source=(--find-links "$torch_find_links")
    fi
    run "$venv/bin/python" -m pip install --require-hashes --no-deps --only-binary=:all: \
        "${torch_source[@]}" -r "$lock"
}

project() {
    # Built from a copy of exactly what the package needs: a leftover build/ in the checkout
    # cannot leak stale modules into the wheel, and a read-only source (the Dockerfile's bind
    # mount) is fine. setuptools comes from the lock (--no-build-isolation): nothing unpinned
    # is fetched.
    local work
    work="$(scratch_dir source)"
    run tar -C "$root" --exclude=__pycache__ --exclude='*.pyc' -cf "$work/source.tar" \
        pyproject.toml README.md platform components pipelines
    run mkdir "$work/tree"
    run tar -C "$work/tree" -xf "$work/source.tar"
    run "$venv/bin/python" -m pip install --no-deps --no-build-isolation --no-index --no-cache-dir \
        "$work/tree"
    run rm -rf "$work"
}

check() {
    run "$venv/bin/python" -c "import gangway, components, pipelines, torch, mlflow, hera"
    run "$venv/bin/gangway" --help >/dev/null
    run "$venv/bin/python" -m pip check
    # torch.compile: inductor builds CPU kernels with a C++ compiler (g++), Triton builds its
    # GPU kernel launchers with a C compiler (gcc).
    run g++ --version >/dev/null
    run gcc --version >/dev/null
}

compile() {
    # A cache of its own, removed after: nothing of the smoke test stays behind.
    local cache
    cache="$(scratch_dir inductor)"
    run env TORCHINDUCTOR_CACHE_DIR="$cache" "$venv/bin/python" -c \
        "import torch; f = torch.compile(lambda x: (x.sin() + 1).sum()); assert f(torch.zeros(8)).item() == 8.0"
    run rm -rf "$cache"
}

for s in "${steps[@]}"; do
    "$s"
done
