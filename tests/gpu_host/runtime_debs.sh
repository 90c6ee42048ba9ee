#!/usr/bin/env bash
# Downloads into DIR the Debian runtime packages that a GPU host without this project's libraries
# lacks (ZeroMQ, Cap'n Proto, prometheus-cpp, libstemmer, ...), so that binaries built on a Debian
# machine run there once unpacked (tests/gpu_host/env.sh does that). Idempotent.
# usage: tests/gpu_host/runtime_debs.sh DIR   (EXTRA_DEBS: more package names)
set -euo pipefail
dir=${1:?usage: runtime_debs.sh DIR}
mkdir -p "$dir"
pkgs=(libcapnp-0.9.2 libprometheus-cpp-core1.0 libprometheus-cpp-pull1.0 libcivetweb1 libstemmer0d
      libzmq5 libsodium23 libpgm-5.3-0 libnorm1 libsnappy1v5 libgflags2.2 libc-ares2 libxapian30
      libsimdjson14 libtcmalloc-minimal4 ${EXTRA_DEBS:-})
cd "$dir"
missing=()
for p in "${pkgs[@]}"; do ls "${p}"_*.deb > /dev/null 2>&1 || missing+=("$p"); done
if [ ${#missing[@]} -gt 0 ]; then
  apt-get download "${missing[@]}" 2> /dev/null || { apt-get update -qq && apt-get download "${missing[@]}"; }
fi
echo "runtime_debs: $(ls -1 ./*.deb | wc -l) packages in $dir"
