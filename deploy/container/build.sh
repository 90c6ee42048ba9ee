#!/usr/bin/env bash
# Builds the Warpsearch image with podman on this machine, with no registry: a Debian bookworm
# base made by mmdebstrap and imported as localhost/debian:bookworm, then the Dockerfile on it
# (--network host: the build's apt-get reaches the Debian mirror). Prints the image size and the
# build time. usage: deploy/container/build.sh [--cuda] [IMAGE] [extra podman build args]
# --cuda builds the CUDA variant: the toolkit of this machine ($CUDA_HOME, default /usr/local/cuda;
# only nvcc, its headers and the static runtime) is imported as localhost/cuda-toolkit:VERSION and
# given to the Dockerfile as CUDA_IMAGE; the default image name becomes localhost/warpsearch:cuda.
set -euo pipefail
cd "$(dirname "$0")/../.."
cuda=0; [ "${1:-}" = --cuda ] && { cuda=1; shift; }
image=${1:-localhost/warpsearch:$([ $cuda = 1 ] && echo cuda || echo latest)}; shift || true
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
cuda_args=()
if [ $cuda = 1 ]; then
  cuda_home=$(readlink -f "${CUDA_HOME:-/usr/local/cuda}")
  [ -x "$cuda_home/bin/nvcc" ] || { echo "build.sh --cuda: no nvcc under $cuda_home (set CUDA_HOME)" >&2; exit 1; }
  version=$("$cuda_home/bin/nvcc" --version | sed -n 's/.*release \([0-9.]*\),.*/\1/p')
  toolkit=localhost/cuda-toolkit:$version
  if ! "${podman[@]}" image exists "$toolkit"; then
    # What a build needs, not the 2.7 GB of libraries: compiler, headers, static runtime, CMake files.
    stage=$(mktemp -d); mkdir -p "$stage/usr/local/cuda/lib"
    cp -a "$cuda_home"/{bin,nvvm,include} "$stage/usr/local/cuda/"
    cp -a "$cuda_home"/lib/{cmake,stubs,libcudart_static.a,libcudadevrt.a,libculibos.a,libcudart.so*} "$stage/usr/local/cuda/lib/"
    ln -s lib "$stage/usr/local/cuda/lib64"
    mkdir -p "$stage/usr/local/cuda/targets/x86_64-linux"
    ln -s ../../include "$stage/usr/local/cuda/targets/x86_64-linux/include"
    ln -s ../../lib "$stage/usr/local/cuda/targets/x86_64-linux/lib"
    tar -C "$stage" -cf "$stage.tar" usr
    "${podman[@]}" import "$stage.tar" "$toolkit"
    rm -rf "$stage" "$stage.tar"
  fi
  cuda_args=(--build-arg CUDA=1 --build-arg CUDA_IMAGE="$toolkit")
fi
start=$(date +%s)
"${podman[@]}" build --network host --ulimit nofile=1024:1024 --ulimit nproc=4096:4096 \
  --build-arg BASE_IMAGE=localhost/debian:bookworm --build-arg REVISION="$(git rev-parse --short HEAD)" \
  "${cuda_args[@]}" -t "$image" "$@" .
echo "built $image in $(( $(date +%s) - start )) s, $("${podman[@]}" image inspect "$image" --format '{{.Size}}' | awk '{printf "%.0f MB", $1 / 1e6}')"
