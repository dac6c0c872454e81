#!/bin/bash
# run probe with LD_BIND_NOW=1 exported
export LD_BIND_NOW=1
exec /tmp/fs_probe/probe.sh "$@"
