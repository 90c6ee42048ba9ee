#!/usr/bin/env bash
# Runs the CUDA image (deploy/container/build.sh --cuda) on a GPU machine that has no container
# runtime, as the NVIDIA container toolkit would run it: the image's root filesystem unpacked, the
# host's driver library (libcuda) and /dev (the GPU's device nodes) put into it, the services run
# inside it by chroot as the image's user (10001). Indexes Cranfield with the image's warp-indexer,
# answers every query with warp-search on the GPU and on the CPU (the runs must be identical), and
# starts warp-leaf --processor auto to show its start-up line. Prints what it saw.
# usage (as root): deploy/container/gpu-node-check.sh ROOTFS.tar.zst CRANFIELD_DIR [ZSTD]
set -euo pipefail
rootfs_archive=$1 cranfield=$2 zstd=${3:-zstd}
root=$(mktemp -d /tmp/warp-rootfs.XXXXXX)
cleanup() { umount "$root/proc" "$root/dev" "$root/sys" 2> /dev/null || true; }
trap cleanup EXIT
"$zstd" -dc "$rootfs_archive" | tar -C "$root" -xf -
echo "image root filesystem: $(du -sh "$root" | cut -f1)"
# The driver, as the NVIDIA container runtime injects it: libcuda and the libraries it loads.
libdir=$root/usr/lib/x86_64-linux-gnu
for lib in $(ldconfig -p | awk '/libcuda\.so\.1 |libnvidia-ptxjitcompiler\.so\.1 |libnvidia-nvvm\.so\.4 /{print $NF}'); do
  cp -L "$lib" "$libdir/"
done
chroot "$root" /sbin/ldconfig
mount --bind /dev "$root/dev"; mount -t proc proc "$root/proc"; mount --bind /sys "$root/sys"
mkdir -p "$root/work/cranfield"; cp "$cranfield"/{docs.jsonl,queries.tsv} "$root/work/cranfield/"
chown -R 10001:10001 "$root/work"
in_image() { chroot --userspec=10001:10001 "$root" /usr/bin/env HOME=/work "$@"; }
in_image ldd /usr/local/bin/warp-leaf | grep -E "cuda|not found" || echo "warp-leaf: no shared CUDA library (cudart is static)"
in_image warp-indexer build --input /work/cranfield/docs.jsonl --out /work/index --partitions 2 --quiet
for mode in or and; do
  for processor in cpu gpu; do
    in_image warp-search --index /work/index --queries /work/cranfield/queries.tsv --mode $mode --processor $processor \
      -k 100 --threads 4 --run /work/run.$mode.$processor 2> "$root/work/search.log" || { cat "$root/work/search.log"; exit 1; }
  done
  cmp "$root/work/run.$mode.cpu" "$root/work/run.$mode.gpu"
  echo "$mode: GPU run identical to CPU run ($(wc -l < "$root/work/run.$mode.gpu") lines)"
done
grep -m1 "processor" "$root/work/search.log" || true
in_image timeout 20 warp-leaf --index /work/index --listen tcp://127.0.0.1:15799 --http 127.0.0.1:19299 --processor auto \
  > "$root/work/leaf.log" 2>&1 &
for _ in $(seq 100); do curl -sf http://127.0.0.1:19299/readyz > /dev/null 2>&1 && break; sleep 0.2; done
curl -sf http://127.0.0.1:19299/readyz > /dev/null && echo "warp-leaf from the image ready on the GPU node"
curl -s http://127.0.0.1:19299/metrics | grep -E "^warpsearch_leaf_(gpu_bytes_resident|scheduler_gpu_usable)" || true
kill %1 2> /dev/null || true; wait || true
head -5 "$root/work/leaf.log"
