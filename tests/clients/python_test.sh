#!/usr/bin/env bash
# Runs a Python test script with Debian's python3, which has python3-grpcio,
# python3-protobuf and python3-xxhash (a python3 earlier on PATH, e.g.
# pyenv's, may not), with the client package (clients/python) and the shared
# test helpers (tests/clients: python_client_test's ServerProcess and
# run_cases) on the import path.
#
# usage: python_test.sh SCRIPT [ARGS...]   (SCRIPT relative to the runfiles root)
set -eu
here=$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")
root=$(cd "$here/../.." && pwd)
python=${FURRBALLS_PYTHON:-/usr/bin/python3}
export PYTHONPATH="$root/clients/python:$root/tests/clients${PYTHONPATH:+:$PYTHONPATH}"
export PYTHONDONTWRITEBYTECODE=1
script=$1
shift
exec "$python" "$script" "$@"
