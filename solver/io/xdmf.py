"""fields.xdmf: a light XML description of fields.h5, so ParaView (and VisIt) open the HDF5 time series.

One temporal collection with a uniform grid per snapshot. The grid is a 3DCoRectMesh of
1 x ny x nx points (XDMF orders dimensions slowest first: z y x), origin (0, y0, x0) and spacing
(1, dy, dx) in the same order, so points sit where fields.h5 says: interior points only, x = x0 + j*dx,
y = y0 + i*dy (x0 = dx next to Dirichlet sides, dx/2 next to Neumann and periodic ones: solver.core.boundary),
the same geometry as the VTK files. Each snapshot's `u` is a hyperslab
[k, 0:ny, 0:nx] of fields.h5:/u, with the time from /time.
"""

from __future__ import annotations

from pathlib import Path
from xml.sax.saxutils import escape

import numpy as np

from .safeio import write_text

GRID = """\
      <Grid Name="u_step_{step}" GridType="Uniform">
        <Time Value="{time!r}"/>
        <Topology TopologyType="3DCoRectMesh" Dimensions="1 {ny} {nx}"/>
        <Geometry GeometryType="ORIGIN_DXDYDZ">
          <DataItem Dimensions="3" Format="XML" NumberType="Float" Precision="8">0 {y0!r} {x0!r}</DataItem>
          <DataItem Dimensions="3" Format="XML" NumberType="Float" Precision="8">1 {dy!r} {dx!r}</DataItem>
        </Geometry>
        <Attribute Name="u" AttributeType="Scalar" Center="Node">
          <DataItem ItemType="HyperSlab" Dimensions="1 {ny} {nx}" Type="HyperSlab">
            <DataItem Dimensions="3 3" Format="XML" NumberType="Int">{k} 0 0 1 1 1 1 {ny} {nx}</DataItem>
            <DataItem Dimensions="{count} {ny} {nx}" Format="HDF" NumberType="Float" Precision="{precision}">{h5}:/u</DataItem>
          </DataItem>
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


def xdmf_text(h5name: str, steps: list[int], times: list[float], shape, dtype, spacing, origin=None) -> str:
    """The whole file (plain string formatting: it is rewritten as snapshots are added). origin: the
    first interior point (x0, y0); None = (dx, dy), all sides Dirichlet."""
    (ny, nx), (dx, dy) = shape, spacing
    x0, y0 = origin if origin is not None else spacing
    common = {"ny": ny, "nx": nx, "dx": float(dx), "dy": float(dy), "x0": float(x0), "y0": float(y0),
              "count": len(steps), "h5": escape(h5name),
              "precision": np.dtype(dtype).itemsize}
    grids = [GRID.format(k=k, step=int(s), time=float(t), **common) for k, (s, t) in enumerate(zip(steps, times))]
    return HEAD + "".join(grids) + TAIL


def write_xdmf(path: Path, fields) -> None:
    """Describe the snapshots now in `fields` (a FieldFile or ParallelFieldFile) in `path`, written then renamed."""
    text = xdmf_text(Path(fields.path).name, fields.steps, fields.times, fields.shape, fields.dtype, fields.spacing,
                     getattr(fields, "origin", None))
    write_text(path, text)
