"""fields.xdmf: a light XML description of fields.h5, so ParaView (both its XDMF readers) and VisIt open it.

One temporal collection with a uniform grid per snapshot. The grid is a 3DCoRectMesh of
1 x ny x nx points (XDMF orders dimensions slowest first: z y x), origin (0, y0, x0) and spacing
(1, dy, dx) in the same order, so points sit where fields.h5 says: interior points only, x = x0 + j*dx,
y = y0 + i*dy (x0 = dx next to Dirichlet sides, dx/2 next to Neumann and periodic ones: solver.core.boundary),
the same geometry as the VTK files.

Each snapshot's `u` is a plain HDF DataItem naming one dataset: /u/<k> of fields_views.h5 (VIEWS), an
HDF5 virtual dataset of shape (1, ny, nx) that maps to fields.h5:/u[k] (no data copied; a few kB).
Why not a HyperSlab DataItem over fields.h5:/u: ParaView's default reader (Xdmf3, 5.11) skips it
("Skipping unrecognized array type [None]") and shows the mesh without `u`; only the legacy reader
read it. Virtual datasets need HDF5 >= 1.10 in the reader (ParaView, VisIt and VTK have it).
"""

from __future__ import annotations

from pathlib import Path
from xml.sax.saxutils import escape

import numpy as np

from .safeio import replaced, write_text

VIEWS = "fields_views.h5"
GRID = """\
      <Grid Name="u_step_{step}" GridType="Uniform">
        <Time Value="{time!r}"/>
        <Topology TopologyType="3DCoRectMesh" Dimensions="1 {ny} {nx}"/>
        <Geometry GeometryType="ORIGIN_DXDYDZ">
          <DataItem Dimensions="3" Format="XML" NumberType="Float" Precision="8">0 {y0!r} {x0!r}</DataItem>
          <DataItem Dimensions="3" Format="XML" NumberType="Float" Precision="8">1 {dy!r} {dx!r}</DataItem>
        </Geometry>
        <Attribute Name="u" AttributeType="Scalar" Center="Node">
          <DataItem Dimensions="1 {ny} {nx}" Format="HDF" NumberType="Float" Precision="{precision}">{views}:/u/{k}</DataItem>
        </Attribute>
      </Grid>
"""
HEAD = """\
<?xml version="1.0" ?>
<Xdmf Version="2.0">
  <Domain>
    <Grid Name="u" GridType="Collection" CollectionType="Temporal">
"""
TAIL = """\
    </Grid>
  </Domain>
</Xdmf>
"""


def xdmf_text(steps: list[int], times: list[float], shape, dtype, spacing, views: str = VIEWS, origin=None) -> str:
    """The whole file (plain string formatting: it is rewritten as snapshots are added). origin: the
    first interior point (x0, y0); None = (dx, dy), all sides Dirichlet."""
    (ny, nx), (dx, dy) = shape, spacing
    x0, y0 = origin if origin is not None else spacing
    common = {"ny": ny, "nx": nx, "dx": float(dx), "dy": float(dy), "x0": float(x0), "y0": float(y0),
              "views": escape(views),
              "precision": np.dtype(dtype).itemsize}
    grids = [GRID.format(k=k, step=int(s), time=float(t), **common) for k, (s, t) in enumerate(zip(steps, times))]
    return HEAD + "".join(grids) + TAIL


def write_views(path: Path, h5name: str, count: int, shape, dtype) -> None:
    """`path`: /u/<k> for k < count, each a virtual dataset (1, ny, nx) over h5name:/u[k] (a path relative
    to `path`'s directory, where readers look for it); written then renamed."""
    import h5py

    ny, nx = shape
    source = h5py.VirtualSource(h5name, "u", shape=(count, ny, nx), dtype=dtype)
    with replaced(path) as tmp, h5py.File(tmp, "w") as f:
        f.attrs["about"] = f"one view per snapshot of {h5name}:/u, for fields.xdmf (HDF5 virtual datasets)"
        for k in range(count):
            layout = h5py.VirtualLayout(shape=(1, ny, nx), dtype=dtype)
            layout[0] = source[k]
            f.create_virtual_dataset(f"u/{k}", layout)


def write_xdmf(path: Path, fields) -> None:
    """Describe the snapshots now in `fields` (a FieldFile or ParallelFieldFile) in `path` and its views
    file beside it, each written then renamed (the views first, so the XML never names a missing one)."""
    write_views(Path(path).with_name(VIEWS), Path(fields.path).name, len(fields.steps), fields.shape, fields.dtype)
    text = xdmf_text(fields.steps, fields.times, fields.shape, fields.dtype, fields.spacing,
                     origin=getattr(fields, "origin", None))
    write_text(path, text)
