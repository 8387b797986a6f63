#!/usr/bin/env python3
"""Seed 002's `mandelbrot_ctypes.py`: the Mandelbrot set through the C ABI of
cuda-kernels (libcuda_kernels_capi.so, kernels written in Rust), called with
ctypes on NumPy arrays, exactly as the seed calls its nvcc-built .so.

    python3 mandelbrot_ctypes.py [--lib PATH] [--size 512] [--iters 256]
                                 [--out mandelbrot_ctypes.png] [--verify]

Writes the graph as a PNG (the seed shows it with matplotlib's imshow; here
plain zlib, no matplotlib), prints the time, the number of points inside the
set and the CRC-32 of the graph's bytes (the `cuda-kernels mandelbrot`
command prints the same fingerprint). Without a GPU, or without the library,
it prints a clear error and exits with status 1; without NumPy, status 3.
"""
import argparse
import os
import struct
import sys
import zlib
from ctypes import CDLL, POINTER, c_char_p, c_float, c_int
from time import time

try:
    import numpy as np
except ImportError as e:  # the test harness reads this exit status
    print(f"error: NumPy is required ({e})", file=sys.stderr)
    sys.exit(3)

LIB_NAME = "libcuda_kernels_capi.so"


def find_library(explicit):
    """--lib, then $CUDA_KERNELS_CAPI, then next to this script, then the
    cargo target folders of the repository this script lives in."""
    if explicit:
        return explicit
    if os.environ.get("CUDA_KERNELS_CAPI"):
        return os.environ["CUDA_KERNELS_CAPI"]
    here = os.path.dirname(os.path.abspath(__file__))
    candidates = [os.path.join(here, LIB_NAME)]
    root = os.path.dirname(os.path.dirname(here))
    for profile in ("release", "debug"):
        candidates.append(os.path.join(root, "target", profile, LIB_NAME))
    for c in candidates:
        if os.path.isfile(c):
            return c
    return candidates[0]


def load(path):
    mandel_dll = CDLL(path)
    mandel_c = mandel_dll.launch_mandelbrot
    # As the seed: float*, float*, int, float, int (plus the status it returns).
    mandel_c.argtypes = [POINTER(c_float), POINTER(c_float), c_int, c_float, c_int]
    mandel_c.restype = c_int
    last_error = mandel_dll.cuda_kernels_last_error
    last_error.argtypes = []
    last_error.restype = c_char_p
    status_string = mandel_dll.cuda_kernels_status_string
    status_string.argtypes = [c_int]
    status_string.restype = c_char_p
    reset = mandel_dll.cuda_kernels_reset
    reset.argtypes = []
    reset.restype = c_int
    return mandel_c, last_error, status_string, reset


class GpuError(RuntimeError):
    pass


def mandelbrot(lib, breadth, low, high, max_iters, upper_bound):
    mandel_c, last_error, status_string, _ = lib
    lattice = np.linspace(low, high, breadth, dtype=np.float32)
    out = np.empty(shape=(lattice.size, lattice.size), dtype=np.float32)
    status = mandel_c(
        lattice.ctypes.data_as(POINTER(c_float)),
        out.ctypes.data_as(POINTER(c_float)),
        c_int(max_iters),
        c_float(upper_bound),
        c_int(lattice.size),
    )
    if status != 0:
        raise GpuError(
            f"launch_mandelbrot returned {status} ({status_string(status).decode()}): "
            f"{last_error().decode(errors='replace')}"
        )
    return out


def numpy_reference(breadth, low, high, max_iters, upper_bound):
    """The seed's algorithm vectorized in NumPy float32 (without fused
    multiply-adds, so a few boundary points may differ from the GPU)."""
    lattice = np.linspace(low, high, breadth, dtype=np.float32)
    c_re = np.broadcast_to(lattice[None, :], (breadth, breadth))
    c_im = np.broadcast_to(lattice[::-1][:, None], (breadth, breadth))
    z_re = np.zeros((breadth, breadth), np.float32)
    z_im = np.zeros((breadth, breadth), np.float32)
    alive = np.ones((breadth, breadth), bool)
    ub2 = np.float32(upper_bound) * np.float32(upper_bound)
    with np.errstate(over="ignore", invalid="ignore"):
        for _ in range(max_iters):
            temp = z_re * z_re - z_im * z_im + c_re
            z_im = np.float32(2) * z_re * z_im + c_im
            z_re = temp
            alive &= ~(z_re * z_re + z_im * z_im > ub2)
    return alive.astype(np.float32)


def write_png(path, graph):
    """A two-colour PNG (matplotlib's default viridis ends, as the seed's
    imshow shows it): yellow inside the set, dark purple outside."""
    h, w = graph.shape
    inside = np.array([253, 231, 37], np.uint8)
    outside = np.array([68, 1, 84], np.uint8)
    rgb = np.where(graph[..., None] == 1.0, inside, outside).astype(np.uint8)
    raw = b"".join(b"\x00" + rgb[r].tobytes() for r in range(h))

    def chunk(kind, data):
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))

    png = b"\x89PNG\r\n\x1a\n"
    png += chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0))
    png += chunk(b"IDAT", zlib.compress(raw, 9))
    png += chunk(b"IEND", b"")
    with open(path, "wb") as f:
        f.write(png)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lib", help=f"path to {LIB_NAME}")
    ap.add_argument("--size", type=int, default=512)
    ap.add_argument("--low", type=float, default=-2.0)
    ap.add_argument("--high", type=float, default=2.0)
    ap.add_argument("--iters", type=int, default=256)
    ap.add_argument("--upper-bound", type=float, default=2.0)
    ap.add_argument("--out", default="mandelbrot_ctypes.png")
    ap.add_argument("--verify", action="store_true",
                    help="compare with a NumPy float32 reference")
    args = ap.parse_args()

    path = find_library(args.lib)
    try:
        lib = load(path)
    except (OSError, AttributeError) as e:  # not loadable, or a symbol is missing
        print(f"error: cannot load the cuda-kernels C ABI library {path}: {e}", file=sys.stderr)
        print("hint: cargo build --release -p cuda-kernels-capi, or pass --lib", file=sys.stderr)
        return 1

    t1 = time()
    try:
        mandel = mandelbrot(lib, args.size, args.low, args.high, args.iters, args.upper_bound)
    except GpuError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    finally:
        t2 = time()
        lib[3]()  # cuda_kernels_reset(): the library releases its GPU
    print(f"It took {t2 - t1:.6f} seconds to calculate the Mandelbrot graph "
          f"({args.size}x{args.size}, {args.iters} iterations) through {os.path.basename(path)}.")
    inside = int(np.count_nonzero(mandel == 1.0))
    print(f"inside points: {inside}, graph crc32: {zlib.crc32(mandel.tobytes()):#010x}")
    write_png(args.out, mandel)
    print(f"wrote {args.out}")
    if args.verify:
        ref = numpy_reference(args.size, args.low, args.high, args.iters, args.upper_bound)
        differ = int(np.count_nonzero(ref != mandel))
        share = differ / mandel.size
        print(f"NumPy float32 reference: {differ} of {mandel.size} points differ ({share:.4%})")
        if share > 1e-3:
            print("error: the GPU graph is not the Mandelbrot set", file=sys.stderr)
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
