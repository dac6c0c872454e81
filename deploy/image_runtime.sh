#!/usr/bin/env bash
# Collects what the runtime image needs from the build stage (deploy/Dockerfile):
#
#   deploy/image_runtime.sh <furrballs_server> <out-dir>
#
# writes <out-dir>/furrballs_server (the binary) and
# <out-dir>/runtime-packages.txt: the Debian packages that own the shared
# libraries the binary loads (ldd), one per line, without libc6, which every
# Debian image has. The runtime stage installs exactly those, so the package
# list follows the binary instead of being kept by hand beside setup.sh's
# -dev packages. Fails if a library belongs to no package (it would be
# missing at run time). tests/deploy runs this on the built server.
set -euo pipefail

server=${1:?usage: image_runtime.sh <furrballs_server> <out-dir>}
out=${2:?usage: image_runtime.sh <furrballs_server> <out-dir>}
mkdir -p "$out"
install -m 0755 "$server" "$out/furrballs_server"

# dpkg's database may list a library under /lib or /usr/lib (usrmerge), so
# ask for the path ldd printed and for the resolved one, in one dpkg call
# (each call reads the whole database).
mapfile -t libs < <(ldd "$server" | grep -o '/[^ ]*' | sort -u)
paths=()
for lib in "${libs[@]}"; do paths+=("$lib" "$(readlink -f "$lib")"); done
owners=$(dpkg -S "${paths[@]}" 2>/dev/null || true)   # "pkg[:arch]: path"
packages=()
unowned=()
for lib in "${libs[@]}"; do
  owner=$(awk -v a="$lib" -v b="$(readlink -f "$lib")" \
    '{ p = $0; sub(/^[^ ]*: /, "", p) } p == a || p == b { sub(/:.*/, ""); print; exit }' <<<"$owners")
  if [ -z "$owner" ]; then
    unowned+=("$lib")
  else
    packages+=("$owner")
  fi
done

if [ ${#unowned[@]} -gt 0 ]; then
  echo "image_runtime.sh: no Debian package owns: ${unowned[*]}" >&2
  exit 1
fi
printf '%s\n' "${packages[@]}" | grep -vx 'libc6' | sort -u >"$out/runtime-packages.txt"
