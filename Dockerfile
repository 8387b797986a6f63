# syntax=docker/dockerfile:1
# K20 (seeds 000 and 001): the project in a container, on a plain Debian base.
# scripts/container.sh builds this image and checks it (the demo, run from the
# image, on the CPU simulator); CI runs that script.
#
# Build (a few minutes per stage; the build stage runs the whole test suite on
# the simulator, as scripts/test.sh does on a machine without a GPU):
#   docker build -t cuda-kernels .
#   podman build -t cuda-kernels .
# Options (--build-arg NAME=VALUE):
#   SKIP_TESTS=1         the set-up and the release build only, not scripts/test.sh
#   BASE=<image>         another Debian-based base image (default debian:bookworm-slim)
#   CARGO_BUILD_JOBS=N   cargo's parallel jobs (default: one per CPU)
# Behind a TLS-inspecting proxy, give the build its CA bundle (podman):
#   podman build -v /etc/ssl/certs/ca-certificates.crt:/usr/local/share/ca-certificates/host-bundle.crt:ro ...
#
# Run on a GPU (the run stage carries no driver: the NVIDIA Container Toolkit
# mounts the host driver's libcuda into the container):
#   docker run --rm --gpus all -v "$PWD/out:/work/out" cuda-kernels               # the demos
#   docker run --rm --gpus all cuda-kernels cuda-kernels bench                    # the benchmarks
#   podman run --rm --device nvidia.com/gpu=all -v "$PWD/out:/work/out" cuda-kernels   # CDI
# (CDI needs `nvidia-ctk cdi generate --output=/etc/cdi/nvidia.yaml` once on the host.)
# Without a GPU the same commands without --gpus/--device run the demos on
# the CPU simulator. Not run on a GPU here: no GPU machine of this project has
# a container engine.

ARG BASE=debian:bookworm-slim

# ---- build stage: toolchain, set-up, test suite, release build ----
FROM ${BASE} AS build
# PATH in full: a base made by mmdebstrap and `podman import` has none.
ENV RUSTUP_HOME=/usr/local/rustup \
    CARGO_HOME=/usr/local/cargo \
    PATH=/usr/local/cargo/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    CI=true \
    DEBIAN_FRONTEND=noninteractive \
    PIP_ROOT_USER_ACTION=ignore

# What scripts/setup.sh expects of the machine: HTTPS (ca-certificates),
# curl for rustup-init, a C compiler (the Rust linker and the C caller test),
# Python with pip (the ptxas wheel) and NumPy (Debian's pip refuses to install
# into the system Python; setup.sh then finds it installed). The downloaded
# packages stay in a cache mount (Debian's images delete them by default).
RUN --mount=type=cache,target=/var/cache/apt \
    --mount=type=cache,target=/var/lib/apt/lists \
    rm -f /etc/apt/apt.conf.d/docker-clean \
    && apt-get update -qq \
    && apt-get install -y -qq --no-install-recommends \
       ca-certificates curl gcc libc6-dev python3 python3-pip python3-numpy >/dev/null

# The pinned toolchain (rust-toolchain.toml, with its components), installed by
# the rustup-init binary from the Rust distribution server, checked against
# its published SHA-256. Its own layer: rebuilt only when the pin changes.
WORKDIR /src
COPY rust-toolchain.toml ./
RUN set -eu; \
    url="https://static.rust-lang.org/rustup/dist/$(uname -m)-unknown-linux-gnu/rustup-init"; \
    curl -sSfL --retry 3 -o /tmp/rustup-init "$url"; \
    echo "$(curl -sSfL --retry 3 "$url.sha256" | cut -d' ' -f1)  /tmp/rustup-init" | sha256sum -c --quiet; \
    chmod +x /tmp/rustup-init; \
    /tmp/rustup-init -y -q --no-modify-path --default-toolchain none --profile minimal; \
    rm /tmp/rustup-init; \
    rustup toolchain install; \
    rustc --version

# The README's test command (scripts/test.sh: the set-up, fmt, clippy,
# rustdoc, the whole suite on the CPU simulator, packaging), or with
# SKIP_TESTS=1 the set-up alone; then the release CLI and the C ABI library.
# Cache mounts, kept by the engine between builds: cargo's registry, pip's
# downloads (the ptxas wheel), apt's packages (libcuda1) and the target folder
# (so a rebuild compiles only what changed); the binaries leave the target
# cache for /out, with the fallback libcuda for running without a GPU
# (Debian's libcuda1, whose cuInit reports "no device").
COPY . .
# Declared here, not above: a build argument's value is part of the cache key
# of every later step, and the packages and the toolchain do not depend on it.
ARG SKIP_TESTS=0
ARG CARGO_BUILD_JOBS=default
RUN --mount=type=cache,target=/usr/local/cargo/registry \
    --mount=type=cache,target=/usr/local/cargo/git \
    --mount=type=cache,target=/root/.cache/pip \
    --mount=type=cache,target=/var/cache/apt \
    --mount=type=cache,target=/src/target,id=cuda-kernels-target \
    set -eu; \
    if [ "$SKIP_TESTS" = 1 ]; then bash scripts/setup.sh; else bash scripts/test.sh; fi; \
    cargo build --release --locked -p cuda-kernels-cli -p cuda-kernels-capi; \
    mkdir -p /out/bin /out/no-driver; \
    cp target/release/cuda-kernels target/release/libcuda_kernels_capi.so /out/bin/; \
    cp -L "$(ldconfig -p | awk '/libcuda\.so\.1 /{print $NF; exit}')" /out/no-driver/libcuda.so.1

# ---- run stage: the CLI, the C ABI library beside it, and the fallback libcuda ----
FROM ${BASE}
COPY --from=build /out/ /opt/cuda-kernels/
ENV PATH=/opt/cuda-kernels/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    NVIDIA_DRIVER_CAPABILITIES=compute,utility
WORKDIR /work
# The driver's libcuda when the container has one (--gpus all or CDI register
# it with ldconfig), else the fallback: cuInit says "no device" and the demos
# run on the CPU simulator.
ENTRYPOINT ["/bin/sh", "-c", "ldconfig -p | grep -q 'libcuda\\.so\\.1 ' || export LD_LIBRARY_PATH=/opt/cuda-kernels/no-driver${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}; exec \"$@\"", "sh"]
CMD ["cuda-kernels", "demo", "--out-dir", "/work/out"]
