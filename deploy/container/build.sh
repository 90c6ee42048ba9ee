#!/usr/bin/env bash
# Builds the Warpsearch image with podman on this machine, with no registry: a Debian bookworm
# base made by mmdebstrap and imported as localhost/debian:bookworm, then the Dockerfile on it
# (--network host: the build's apt-get reaches the Debian mirror). Prints the image size and the
# build time. usage: deploy/container/build.sh [IMAGE] [extra podman build args, e.g. --build-arg CUDA=1]
set -euo pipefail
cd "$(dirname "$0")/../.."
image=${1:-localhost/warpsearch:latest}; shift || true
sudo=""; [ "$(id -u)" -eq 0 ] || sudo="sudo"
for p in podman runc mmdebstrap uidmap; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="${missing:-} $p"
done
[ -z "${missing:-}" ] || { $sudo apt-get update -qq; DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends $missing; }
podman=(podman --runtime runc)  # crun cannot run here (cgroups in hybrid mode)
if ! "${podman[@]}" image exists localhost/debian:bookworm; then
  base=$(mktemp -d)
  mmdebstrap --quiet --variant=minbase bookworm "$base/base.tar"
  "${podman[@]}" import "$base/base.tar" localhost/debian:bookworm
  rm -rf "$base"
fi
start=$(date +%s)
"${podman[@]}" build --network host --ulimit nofile=1024:1024 --ulimit nproc=4096:4096 \
  --build-arg BASE_IMAGE=localhost/debian:bookworm --build-arg REVISION="$(git rev-parse --short HEAD)" \
  -t "$image" "$@" .
echo "built $image in $(( $(date +%s) - start )) s, $("${podman[@]}" image inspect "$image" --format '{{.Size}}' | awk '{printf "%.0f MB", $1 / 1e6}')"
