/* Parallel HDF5 with checksums: the calls stencil's mpio writer makes (solver/io/fields.py ParallelFieldFile,
   solver/io/checkpoint.py _write_block) on fletcher32 datasets, without h5py (for a machine that has a parallel
   HDF5 but no parallel h5py). Build and run (Debian: apt-get install libhdf5-openmpi-dev):
     mpicc -o /tmp/phdf5_fletcher32 tools/phdf5_fletcher32.c $(pkg-config --cflags --libs hdf5-openmpi)
     cd /tmp && mpirun.openmpi --oversubscribe -n 3 ./phdf5_fletcher32        # prints "ok: ..." or MISMATCH

   rank 0 makes the file serially (u: (0,ny,nx) unlimited, early alloc, fletcher32; step; cp: (ny,nx) fletcher32,
   default alloc); then every rank opens with mpio, grows u/step by one, writes step (same value, every rank)
   and its rows of u collectively, writes its rows of cp collectively; close; rank 0 reads back and checks. */
#include <hdf5.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#define NY 64
#define NX 23
static hid_t dcpl(int rank, hsize_t *chunk, int early) {
  hid_t p = H5Pcreate(H5P_DATASET_CREATE);
  H5Pset_chunk(p, rank, chunk); H5Pset_fletcher32(p);
  if (early) H5Pset_alloc_time(p, H5D_ALLOC_TIME_EARLY);
  return p;
}
int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int r, n; MPI_Comm_rank(MPI_COMM_WORLD, &r); MPI_Comm_size(MPI_COMM_WORLD, &n);
  if (r == 0) {
    hid_t f = H5Fcreate("t.h5", H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    hsize_t d3[3] = {0, NY, NX}, m3[3] = {H5S_UNLIMITED, NY, NX}, c3[3] = {1, 8, NX};
    hid_t s = H5Screate_simple(3, d3, m3);
    H5Dclose(H5Dcreate(f, "u", H5T_NATIVE_DOUBLE, s, H5P_DEFAULT, dcpl(3, c3, 1), H5P_DEFAULT));
    hsize_t d1[1] = {0}, m1[1] = {H5S_UNLIMITED}, c1[1] = {64};
    hid_t s1 = H5Screate_simple(1, d1, m1);
    H5Dclose(H5Dcreate(f, "step", H5T_NATIVE_LLONG, s1, H5P_DEFAULT, dcpl(1, c1, 1), H5P_DEFAULT));
    hsize_t d2[2] = {NY, NX}, c2[2] = {8, NX};
    hid_t s2 = H5Screate_simple(2, d2, NULL);
    H5Dclose(H5Dcreate(f, "cp", H5T_NATIVE_DOUBLE, s2, H5P_DEFAULT, dcpl(2, c2, 0), H5P_DEFAULT));
    H5Fclose(f);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  hid_t fa = H5Pcreate(H5P_FILE_ACCESS); H5Pset_fapl_mpio(fa, MPI_COMM_WORLD, MPI_INFO_NULL);
  hid_t xf = H5Pcreate(H5P_DATASET_XFER); H5Pset_dxpl_mpio(xf, H5FD_MPIO_COLLECTIVE);
  hid_t f = H5Fopen("t.h5", H5F_ACC_RDWR, fa);
  int r0 = r * NY / n, r1 = (r + 1) * NY / n;
  double *buf = malloc(sizeof(double) * NY * NX);
  for (int k = 0; k < 2; k++) {  /* two snapshots */
    hid_t u = H5Dopen(f, "u", H5P_DEFAULT), st = H5Dopen(f, "step", H5P_DEFAULT);
    hsize_t e3[3] = {k + 1, NY, NX}, e1[1] = {k + 1};
    if (H5Dset_extent(u, e3) < 0 || H5Dset_extent(st, e1) < 0) { printf("extent failed\n"); MPI_Abort(MPI_COMM_WORLD, 1); }
    long long sv = 10 * k;
    hid_t fs1 = H5Dget_space(st); hsize_t o1[1] = {k}, one[1] = {1};
    H5Sselect_hyperslab(fs1, H5S_SELECT_SET, o1, NULL, one, NULL);
    hid_t ms1 = H5Screate_simple(1, one, NULL);
    if (H5Dwrite(st, H5T_NATIVE_LLONG, ms1, fs1, xf, &sv) < 0) { printf("step write failed\n"); MPI_Abort(MPI_COMM_WORLD, 1); }
    for (int i = 0; i < (r1 - r0) * NX; i++) buf[i] = k * 1000 + r0 * NX + i;
    hid_t fs = H5Dget_space(u); hsize_t o3[3] = {k, r0, 0}, c3[3] = {1, r1 - r0, NX};
    H5Sselect_hyperslab(fs, H5S_SELECT_SET, o3, NULL, c3, NULL);
    hid_t ms = H5Screate_simple(3, c3, NULL);
    if (H5Dwrite(u, H5T_NATIVE_DOUBLE, ms, fs, xf, buf) < 0) { printf("u write failed\n"); MPI_Abort(MPI_COMM_WORLD, 1); }
    H5Dclose(u); H5Dclose(st); H5Fflush(f, H5F_SCOPE_GLOBAL);
  }
  hid_t cp = H5Dopen(f, "cp", H5P_DEFAULT);
  hid_t fs = H5Dget_space(cp); hsize_t o2[2] = {r0, 0}, c2[2] = {r1 - r0, NX};
  H5Sselect_hyperslab(fs, H5S_SELECT_SET, o2, NULL, c2, NULL);
  hid_t ms = H5Screate_simple(2, c2, NULL);
  for (int i = 0; i < (r1 - r0) * NX; i++) buf[i] = r0 * NX + i + 0.5;
  if (H5Dwrite(cp, H5T_NATIVE_DOUBLE, ms, fs, xf, buf) < 0) { printf("cp write failed\n"); MPI_Abort(MPI_COMM_WORLD, 1); }
  H5Dclose(cp); H5Fclose(f);
  MPI_Barrier(MPI_COMM_WORLD);
  if (r == 0) {  /* read back serially: checksums verified by every read */
    hid_t g = H5Fopen("t.h5", H5F_ACC_RDONLY, H5P_DEFAULT);
    double *all = malloc(sizeof(double) * 2 * NY * NX); long long s[2];
    hid_t u = H5Dopen(g, "u", H5P_DEFAULT), st = H5Dopen(g, "step", H5P_DEFAULT), c = H5Dopen(g, "cp", H5P_DEFAULT);
    int bad = H5Dread(u, H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, all) < 0;
    bad |= H5Dread(st, H5T_NATIVE_LLONG, H5S_ALL, H5S_ALL, H5P_DEFAULT, s) < 0;
    for (int k = 0; k < 2; k++) for (int i = 0; i < NY * NX; i++) bad |= all[k * NY * NX + i] != k * 1000 + i;
    bad |= s[0] != 0 || s[1] != 10;
    bad |= H5Dread(c, H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, all) < 0;
    for (int i = 0; i < NY * NX; i++) bad |= all[i] != i + 0.5;
    printf(bad ? "MISMATCH\n" : "ok: parallel fletcher32 writes on %d ranks read back\n", n);
  }
  MPI_Finalize();
  return 0;
}
