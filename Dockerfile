# One image for every Warpsearch service (warp-indexer, warp-leaf, warp-broker, warp-search): the
# services share every library, so one build and one tag to roll out; a pod picks its binary with
# `command`. Multi-stage: a Debian bookworm build stage with the packages deploy/install-deps.sh
# installs, and a slim runtime stage with only the runtime libraries, the binaries and a non-root
# user. The base is a build argument: docker build . builds on the public debian:bookworm-slim;
# deploy/container/build.sh builds on a local base made by mmdebstrap (no registry needed).
# CUDA: with --build-arg CUDA=1 the build stage takes the CUDA toolkit from CUDA_IMAGE (its
# /usr/local/cuda; docker: e.g. nvidia/cuda:13.0.0-devel-ubuntu24.04; deploy/container/build.sh --cuda
# makes localhost/cuda-toolkit from this machine's toolkit) and the leaf links the CUDA runtime
# statically (cudart_static): the same image runs on GPU nodes (the NVIDIA container runtime injects
# the driver) and on CPU nodes (--processor auto logs "no usable GPU" once and answers on the CPU).
# CUDA=0, the default, builds without the GPU paths and needs no CUDA image.
ARG BASE_IMAGE=debian:bookworm-slim
# Without CUDA this stage is the base image itself: only its (empty) /usr/local is copied.
ARG CUDA_IMAGE=${BASE_IMAGE}

FROM ${CUDA_IMAGE} AS cuda

FROM ${BASE_IMAGE} AS build
ARG CUDA=0
ARG CUDA_ARCH=90
RUN apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
      build-essential cmake ninja-build pkg-config ca-certificates \
      librocksdb-dev libzstd-dev zlib1g-dev libsnappy-dev liblz4-dev libbz2-dev libstemmer-dev \
      nlohmann-json3-dev libsimdjson-dev libzmq3-dev libsodium-dev cppzmq-dev capnproto libcapnp-dev prometheus-cpp-dev libboost-dev \
      libc-ares-dev libgoogle-perftools-dev libgtest-dev \
 && rm -rf /var/lib/apt/lists/*
COPY --from=cuda /usr/local/ /opt/toolkit/
COPY . /src
RUN if [ "$CUDA" = 1 ]; then \
      test -x /opt/toolkit/cuda/bin/nvcc || { echo "CUDA=1 needs CUDA_IMAGE with /usr/local/cuda/bin/nvcc" >&2; exit 1; }; \
      export CUDACXX=/opt/toolkit/cuda/bin/nvcc; fi \
 && cmake -S /src -B /build -G Ninja -DCMAKE_BUILD_TYPE=Release -DWARP_BUILD_TESTS=OFF -DWARP_BUILD_BENCH=OFF \
      -DWARP_ENABLE_CUDA=$([ "$CUDA" = 1 ] && echo ON || echo OFF) -DCMAKE_CUDA_ARCHITECTURES=${CUDA_ARCH} \
 && cmake --build /build --target warp-indexer warp-leaf warp-broker warp-search \
 && mkdir -p /out && cp /build/indexer/warp-indexer /build/leaf/warp-leaf /build/broker/warp-broker /build/leaf/warp-search /out/ \
 && strip /out/*

FROM ${BASE_IMAGE}
ARG VERSION=dev
ARG REVISION=unknown
LABEL org.opencontainers.image.title="warpsearch" \
      org.opencontainers.image.description="Warpsearch: distributed BM25 search on CPUs and GPUs (indexer, leaf, broker)" \
      org.opencontainers.image.source="https://github.com/warpsearch/warpsearch" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}" \
      org.opencontainers.image.licenses="Apache-2.0"
RUN apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
      librocksdb7.8 libzmq5 libcapnp-0.9.2 libprometheus-cpp-core1.0 libstemmer0d libsimdjson14 \
      libc-ares2 libsnappy1v5 libtcmalloc-minimal4 \
 && rm -rf /var/lib/apt/lists/* \
 && useradd --system --uid 10001 --user-group --home-dir /data --no-create-home warp
COPY --from=build /out/ /usr/local/bin/
USER 10001:10001
WORKDIR /data
# Metrics and health: leaf 9201, broker 8080 (8081 admin), indexer 9101; ZeroMQ: leaf 5701, indexer 5601-5602.
EXPOSE 5601 5602 5701 8080 8081 9101 9201
CMD ["warp-broker", "--help"]
