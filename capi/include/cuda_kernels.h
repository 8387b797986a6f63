/*
 * cuda_kernels.h: the C ABI of libcuda_kernels_capi.so (crate capi/ of
 * cuda-kernels). The kernels are written in Rust and compiled to PTX; this
 * library embeds that PTX and launches it through the CUDA driver.
 *
 * Every function returns a status code (CK_OK = 0, negative on failure) and
 * never lets an error unwind into the caller. After a failure,
 * cuda_kernels_last_error() says what happened.
 *
 * Thread safety: the functions may be called from any thread; calls are
 * serialized inside the library. The GPU (device 0, its primary context and
 * the module) is opened by the first call and kept for the next ones, until
 * cuda_kernels_reset().
 */
#ifndef CUDA_KERNELS_H
#define CUDA_KERNELS_H

#ifdef __cplusplus
extern "C" {
#endif

#define CK_OK            0  /* success */
#define CK_NULL_POINTER (-1) /* a pointer argument is NULL */
#define CK_BAD_SIZE     (-2) /* lattice_size <= 0, or lattice_size^2 overflows int */
#define CK_NO_GPU       (-3) /* no usable CUDA driver, or no CUDA device */
#define CK_CUDA_ERROR   (-4) /* a CUDA call failed (allocation, copy, launch, ...) */
#define CK_BAD_ARGUMENT (-5) /* another bad argument (max_iters < 0, overlapping buffers) */
#define CK_INTERNAL     (-6) /* internal error (caught; the library stays usable) */

/*
 * The Mandelbrot host wrapper: allocates device memory, copies `lattice` in,
 * launches mandelbrot_ker with blocks of 32 threads, copies the graph out,
 * frees. `lattice` holds `lattice_size` floats (the real and imaginary
 * axis, e.g. linspace(-2, 2, 512)); `mandelbrot_graph` receives
 * lattice_size * lattice_size floats, row-major: 1.0 inside the set, 0.0
 * outside, row 0 at the top (largest imaginary part). `upper_bound` is the
 * escape radius, NOT squared (the wrapper squares it). The content of
 * `mandelbrot_graph` is unspecified unless CK_OK is returned.
 */
int launch_mandelbrot(const float *lattice, float *mandelbrot_graph, int max_iters,
                      float upper_bound, int lattice_size);

/* The hello kernel on <<<1, 3>>>: "Hello World From GPU!" three times
 * on stdout, then returns. */
int launch_hello(void);

/* Releases the GPU the library holds (its module, stream and reference to
 * the primary context), as cudaDeviceReset() ends a C program;
 * the next call opens it again. Returns CK_OK. */
int cuda_kernels_reset(void);

/* The message of the calling thread's last failed call, "" if none. The
 * string stays valid until the next call into the library on this thread. */
const char *cuda_kernels_last_error(void);

/* A short, static description of a status code. */
const char *cuda_kernels_status_string(int status);

/* Function pointer types, for dlsym(). */
typedef int (*launch_mandelbrot_fn)(const float *, float *, int, float, int);
typedef int (*launch_hello_fn)(void);
typedef int (*cuda_kernels_reset_fn)(void);
typedef const char *(*cuda_kernels_last_error_fn)(void);
typedef const char *(*cuda_kernels_status_string_fn)(int);

#ifdef __cplusplus
}
#endif

#endif /* CUDA_KERNELS_H */
