#!/usr/bin/env bash
# Download, into ./.whl (git-ignored), the wheels the GPU machine lacks for running `stencil` there:
# pydantic and its dependencies, built for that machine's CPython 3.12 on x86-64.
# Usage, from the project root:  tools/device-wheels.sh [extra-package==version ...]
# On the GPU machine, install them with:
#   python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site
set -euo pipefail
grep -qx '/.whl/' .git/info/exclude 2>/dev/null || echo '/.whl/' >> .git/info/exclude
mkdir -p .whl
pydantic_version=$(python3 -c 'import pydantic; print(pydantic.VERSION)' 2>/dev/null || echo 2.14.3)
pkgs=("pydantic==$pydantic_version" "$@")
dl() {
  python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
    -d .whl "$@" 2>&1 | grep -v '^WARNING' || true
}
dl "${pkgs[@]}"
# pydantic pins its core exactly; take the pin from the wheel itself.
core=$(unzip -p .whl/pydantic-*.whl '*/METADATA' | sed -n 's/^Requires-Dist: pydantic-core==\([0-9.]*\).*/\1/p' | head -1)
dl "pydantic-core==$core" annotated-types typing-inspection "typing-extensions>=4.14"
ls -1 .whl
