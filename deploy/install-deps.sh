#!/usr/bin/env bash
# Installs, from Debian/Ubuntu packages, everything Warpsearch builds, tests and benchmarks with.
# Used by the README's two commands and by CI. Idempotent; needs root or sudo.
set -euo pipefail
pkgs=(
  build-essential cmake ninja-build pkg-config git ca-certificates
  librocksdb-dev libzstd-dev zlib1g-dev libsnappy-dev liblz4-dev libbz2-dev
  libstemmer-dev nlohmann-json3-dev libsimdjson-dev
  libzmq3-dev libsodium-dev cppzmq-dev capnproto libcapnp-dev prometheus-cpp-dev libboost-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  libxapian-dev
  clang libclang-rt-dev
  dict-gcide python3 curl
  iproute2 iptables
  libc-ares-dev dnsmasq-base prometheus python3-yaml
  libgoogle-perftools-dev
  chromium chromium-driver python3-selenium  # the search page's test in a headless browser
)
sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#pkgs[@]} packages present"
  exit 0
fi
echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
