#!/bin/bash
# The sessions of this directory's README: the hugepages script (same
# method, order rotated each session) writing raw/ and run_log.txt here.
# Usage: BIN_DIR=... run_sessions.sh FIRST LAST main now mainB
here=$(cd "$(dirname "$0")" && pwd)
OUT_DIR=$here exec bash "$here/../2026-11-24-hugepages/run_sessions.sh" "$@"
