# K20 (seeds 000 and 001): build the crate on an NVIDIA CUDA base image and run
# the demos on the GPU:
#
#   docker build -t cuda-kernels .
#   docker run --rm --gpus all -v "$PWD/out:/work/out" cuda-kernels            # the demos
#   docker run --rm --gpus all cuda-kernels cuda-kernels bench                 # the benchmarks
#
# (Not run on our machines: they have no Docker engine. The build stage needs
# no GPU; `--gpus all` hands the driver's libcuda to the run stage.)
FROM nvidia/cuda:12.6.3-devel-ubuntu24.04 AS build
RUN apt-get update && apt-get install -y --no-install-recommends curl ca-certificates build-essential python3 \
    && rm -rf /var/lib/apt/lists/*
RUN curl -sSf https://sh.rustup.rs | sh -s -- -y --default-toolchain none --profile minimal
ENV PATH=/root/.cargo/bin:$PATH
WORKDIR /src
COPY . .
# rust-toolchain.toml pins the toolchain and its components (rust-src, llvm-tools, llvm-bitcode-linker).
RUN rustup toolchain install && cargo build --release --bin cuda-kernels

FROM nvidia/cuda:12.6.3-runtime-ubuntu24.04
COPY --from=build /src/target/release/cuda-kernels /usr/local/bin/cuda-kernels
WORKDIR /work
CMD ["cuda-kernels", "demo", "--out-dir", "/work/out"]
