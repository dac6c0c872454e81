#!/usr/bin/env bash
# Bazel workspace status command: exports the git commit for
# furrballs_build_info. A STABLE_ key, so a new commit rebuilds the stamp.
#   bazel build --workspace_status_command=metrics/workspace_status.sh ...
if commit=$(git rev-parse --short=12 HEAD 2>/dev/null); then
  git diff --quiet HEAD 2>/dev/null || commit="${commit}-dirty"
  echo "STABLE_GIT_COMMIT ${commit}"
fi
