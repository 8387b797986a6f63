/*
 * Seed 004's C caller: loads the cuda-kernels C ABI library with dlopen and
 * calls the hello launcher through dlsym (three "Hello World From GPU!"
 * lines), then launch_mandelbrot on a 512 x 512 lattice.
 *
 *   gcc -I capi/include -o hello_dlopen examples/c/hello_dlopen.c -ldl
 *   ./hello_dlopen [path/to/libcuda_kernels_capi.so]
 *
 * Exits 0 on success; 1, with the library's message, when there is no GPU
 * or a call fails; 2 when the library cannot be loaded.
 */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>

#include "cuda_kernels.h"

int main(int argc, char **argv)
{
    const char *path = argc > 1 ? argv[1] : "./libcuda_kernels_capi.so";
    void *handle = dlopen(path, RTLD_LAZY);
    if (!handle) {
        fprintf(stderr, "error: cannot load %s: %s\n", path, dlerror());
        return 2;
    }
    launch_hello_fn hello_from_gpu = (launch_hello_fn)dlsym(handle, "launch_hello");
    launch_mandelbrot_fn mandelbrot = (launch_mandelbrot_fn)dlsym(handle, "launch_mandelbrot");
    cuda_kernels_last_error_fn last_error =
        (cuda_kernels_last_error_fn)dlsym(handle, "cuda_kernels_last_error");
    cuda_kernels_reset_fn reset = (cuda_kernels_reset_fn)dlsym(handle, "cuda_kernels_reset");
    if (!hello_from_gpu || !mandelbrot || !last_error || !reset) {
        fprintf(stderr, "error: %s lacks a symbol: %s\n", path, dlerror());
        dlclose(handle);
        return 2;
    }

    int status = hello_from_gpu();
    fflush(stdout);
    if (status != CK_OK) {
        fprintf(stderr, "error: launch_hello returned %d: %s\n", status, last_error());
        fprintf(stderr, "Failed to load cuda function.\n");
        reset();
        dlclose(handle);
        return 1;
    }
    printf("Load cuda function successfully!\n");

    enum { N = 512 };
    float *lattice = malloc(sizeof(float) * N);
    float *graph = malloc(sizeof(float) * N * N);
    if (!lattice || !graph) {
        fprintf(stderr, "error: out of memory\n");
        free(lattice);
        free(graph);
        dlclose(handle);
        return 1;
    }
    for (int k = 0; k < N; k++) /* np.linspace(-2, 2, 512) as float */
        lattice[k] = (k == N - 1) ? 2.0f : (float)(k * (4.0 / (N - 1)) - 2.0);
    status = mandelbrot(lattice, graph, 256, 2.0f, N);
    if (status == CK_OK) {
        long inside = 0;
        for (long p = 0; p < (long)N * N; p++)
            inside += graph[p] == 1.0f;
        printf("launch_mandelbrot: %d x %d, %ld points inside the set\n", N, N, inside);
    } else {
        fprintf(stderr, "error: launch_mandelbrot returned %d: %s\n", status, last_error());
    }
    /* Bad input comes back as a status code, not a crash. */
    int bad = mandelbrot(NULL, graph, 256, 2.0f, N);
    printf("launch_mandelbrot(NULL, ...) = %d (CK_NULL_POINTER = %d)\n", bad, CK_NULL_POINTER);
    free(lattice);
    free(graph);
    reset(); /* seed 004 ends with cudaDeviceReset() */
    dlclose(handle);
    return status == CK_OK && bad == CK_NULL_POINTER ? 0 : 1;
}
