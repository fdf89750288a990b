#!/bin/sh
# `make bench`'s first step: the peer allocators (jemalloc, tcmalloc, mimalloc) from the
# distribution, installed when that needs no question (as root, or with sudo that needs no
# password), with one line saying what; otherwise one line with the command, and the
# comparison goes on without them. LOCUS_INSTALL_PEERS=no: never install, only say.
packages="libjemalloc2 libtcmalloc-minimal4 libmimalloc2.0"
if ! command -v dpkg-query >/dev/null 2>&1 || ! command -v apt-get >/dev/null 2>&1; then
  echo "peers: not a Debian-like system: install jemalloc, tcmalloc and mimalloc with your package manager to compare against them (docs/lab.md)"
  exit 0
fi
need=""
for p in $packages; do
  [ "$(dpkg-query -W -f '${Status}' "$p" 2>/dev/null)" = "install ok installed" ] || need="$need $p"
done
[ -z "$need" ] && exit 0
if [ "${LOCUS_INSTALL_PEERS:-yes}" = no ]; then
  as=none
elif [ "$(id -u)" -eq 0 ]; then
  as=""
elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
  as="sudo -n"
else
  as=none
fi
if [ "$as" = none ]; then
  echo "peers: not installed:$need; to compare against them: sudo apt-get install$need"
  exit 0
fi
echo "peers: installing$need (apt-get install, as $([ -z "$as" ] && echo root || echo sudo))"
install() { $as env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $need >/dev/null 2>&1; }
# The package lists of a fresh machine may be missing or stale: update them only if needed.
if ! install && ! { $as apt-get update -qq >/dev/null 2>&1 && install; }; then
  echo "peers: apt-get could not install$need; going on without them"
fi
exit 0
