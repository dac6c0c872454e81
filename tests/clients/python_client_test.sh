#!/usr/bin/env bash
# Runs python_client_test.py with Debian's python3, which has python3-grpcio
# and python3-protobuf (a python3 earlier on PATH, e.g. pyenv's, may not).
#
# usage: python_client_test.sh SERVER_BINARY
set -eu
here=$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")
root=$(cd "$here/../.." && pwd)
python=${FURRBALLS_PYTHON:-/usr/bin/python3}
export PYTHONPATH="$root/clients/python${PYTHONPATH:+:$PYTHONPATH}"
export PYTHONDONTWRITEBYTECODE=1
exec "$python" "$here/python_client_test.py" "$@"
