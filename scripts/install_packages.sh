#!/usr/bin/env bash
# Installs those of the named Debian packages that are missing (apt-get update first), as root or
# through sudo. Usage: scripts/install_packages.sh WHO PACKAGE...   (WHO prefixes the message)
set -euo pipefail
who="$1"
shift
missing=()
for p in "$@"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "$who: installing ${missing[*]}"
  SUDO=""
  if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
  $SUDO apt-get update
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y --no-install-recommends "${missing[@]}"
fi
