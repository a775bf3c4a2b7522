// Shared by every stencil kernel (solver/backends/cupy_kernels.py prepends this file to each variant).
//
// Defines injected at compile time: REAL (float | double), BX, BY (block shape), V (march only).
// Layout: `u` and `out` point at element (0, 0) of a padded (ny + 2) x (nx + 2) field whose rows lie
// `pitch` elements apart (solver/core/decomp.py documents the index convention); a region is the local
// index range [r0, r1) x [c0, c1). The allocation (solver/backends/cupy_backend.py) aligns column 1
// of every row to 128 bytes and leaves at least 4 spare columns after column nx + 1.
//
// The update and its term order are those of solver/core/physics.py. Modules are compiled with
// --fmad=false, so no multiply-add is contracted and each point is rounded exactly as numpy rounds it.

typedef REAL real;
typedef long long idx;

__device__ __forceinline__ real update(real c, real w, real e, real s, real n, real wc, real wx, real wy)
{
    return wc * c + wx * (w + e) + wy * (s + n);
}
