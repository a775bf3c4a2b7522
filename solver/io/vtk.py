"""VTK output for ParaView: image data per snapshot, one piece per rank, a .pvd time series.

Geometry (the same as fields.h5 and fields.xdmf): interior points only, point (i, j) at
x = x0 + j*dx, y = y0 + i*dy, i.e. whole extent [0, nx-1] x [0, ny-1] x [0, 0], origin (x0, y0, 0)
(= (dx, dy) with Dirichlet sides; half a spacing next to Neumann and periodic ones), spacing (dx, dy, 1).
The boundary is not part of the data set.

Files, for snapshot step s (8 digits):
- one rank:  vtk/u_s.vti
- N ranks:   vtk/u_s.pvti (written by rank 0) and vtk/u_s/u_s_R.vti, written by rank R itself.
  VTK pieces of one image share the points on their common faces (a one-point overlap), otherwise
  ParaView shows a gap one cell wide between them. So each piece holds its owned block plus one row
  from its north neighbour and one column from its east neighbour (and the north-east corner): its
  extent is [c0, c1 - 1 + east] x [r0, r1 - 1 + north]. These values travel by MPI at snapshot time
  (the padded arrays' ghost layers are not current then, and have no corners).
- u.pvd (in the output directory, written by rank 0): every snapshot with its physical time
  (rewritten whole when the caller says; see solver.io.outputs for the schedule).
Each file is written under a temporary name and renamed. Each .vti also carries the time as field
data `TimeValue`. pyvista is imported here only, so runs without VTK output never need it.
"""

from __future__ import annotations

import errno
import re
import shutil
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np

from ..core.errors import InputError
from .safeio import replaced, write_text

PVD = "u.pvd"
NAME = re.compile(r"^u_(\d{8})(\.vti|\.pvti)?$")
VTK_TYPES = {"float32": "Float32", "float64": "Float64"}


COMPRESSION_LEVEL = 1  # zlib's fastest: floats compress little (10-20%), and higher levels barely gain


def available() -> bool:
    import importlib.util

    return importlib.util.find_spec("pyvista") is not None


def stem(step: int) -> str:
    return f"u_{step:08d}"


def piece_with_overlap(comm, block, mine: np.ndarray) -> np.ndarray:
    """Collective: mine plus one row from the north neighbour and one column from the east one.

    Columns first (from the east neighbour), then rows including that new column (from the north
    neighbour), so the north-east corner arrives through the north neighbour.
    """
    near = block.inner  # pieces next to this one in space (a periodic wrap is no overlap)
    north, east = near["north"] is not None, near["east"] is not None
    ny, nx = mine.shape
    p = np.empty((ny + north, nx + east), dtype=mine.dtype)
    p[:ny, :nx] = mine
    if comm.mpi is None:
        return p
    from ..parallel.comm import TAGS, sendrecv

    col = np.empty(ny, dtype=mine.dtype)
    sendrecv(comm.mpi, np.ascontiguousarray(mine[:, 0]), near["west"], col, near["east"], TAGS["vtk_column"])
    if east:
        p[:ny, nx] = col
    row = np.empty(nx + east, dtype=mine.dtype)
    sendrecv(comm.mpi, np.ascontiguousarray(p[0]), near["south"], row, near["north"], TAGS["vtk_row"])
    if north:
        p[ny] = row
    return p


def write_image(path: Path, values: np.ndarray, offset: tuple[int, int], spacing, time: float, origin=None,
                extra: dict | None = None) -> None:
    """One .vti: values (rows, cols) at global point offset (column, row), written then renamed.

    pyvista builds the image; VTK's XML writer writes it (appended binary, zlib-compressed at level
    COMPRESSION_LEVEL: ParaView reads it as usual) and its error code is checked (pyvista's save()
    does not raise when a write fails, e.g. on a full disk).
    """
    import pyvista as pv

    dx, dy = spacing
    x0, y0 = origin if origin is not None else spacing
    rows, cols = values.shape
    img = pv.ImageData(dimensions=(cols, rows, 1), spacing=(dx, dy, 1.0), origin=(x0, y0, 0.0),
                       offset=(offset[0], offset[1], 0))
    img.point_data["u"] = values.reshape(-1)  # C order: x (columns) varies fastest, as VTK wants
    for name, a in (extra or {}).items():  # alpha and q where the case has them (data_arrays)
        img.point_data[name] = np.ascontiguousarray(a, dtype=values.dtype).reshape(-1)
    img.field_data["TimeValue"] = np.array([time])
    with replaced(path) as tmp:
        _write_xml(img, tmp)


def _write_xml(img, path: Path) -> None:
    from vtkmodules.vtkCommonCore import vtkObject
    from vtkmodules.vtkCommonMisc import vtkErrorCode
    from vtkmodules.vtkIOXML import vtkXMLImageDataWriter

    w = vtkXMLImageDataWriter()
    w.SetFileName(str(path))
    w.SetInputData(img)
    w.SetDataModeToAppended()
    w.EncodeAppendedDataOff()
    w.SetCompressorTypeToZLib()
    w.SetCompressionLevel(COMPRESSION_LEVEL)
    shown = vtkObject.GetGlobalWarningDisplay()
    vtkObject.GlobalWarningDisplayOff()  # VTK would print the failure itself; it is reported once, below
    try:
        ok = w.Write()
    finally:
        vtkObject.SetGlobalWarningDisplay(shown)
    if not ok:
        code = w.GetErrorCode()
        raise OSError(code or errno.EIO, vtkErrorCode.GetStringFromErrorCode(code) or "VTK writer failed", str(path))


def extent(block) -> tuple[int, int, int, int]:
    """(x0, x1, y0, y1) point extent of a rank's piece, with the one-point overlap north and east."""
    (r0, r1), (c0, c1) = block.rows, block.cols
    return c0, c1 - 1 + (block.inner["east"] is not None), r0, r1 - 1 + (block.inner["north"] is not None)


def pvti_text(step: int, blocks, shape, spacing, dtype: str, origin=None, names: tuple = ()) -> str:
    ny, nx = shape
    dx, dy = spacing
    x0, y0 = origin if origin is not None else spacing
    root = ET.Element("VTKFile", type="PImageData", version="1.0", byte_order="LittleEndian", header_type="UInt64")
    img = ET.SubElement(root, "PImageData", WholeExtent=f"0 {nx - 1} 0 {ny - 1} 0 0", GhostLevel="0",
                        Origin=f"{x0!r} {y0!r} 0", Spacing=f"{dx!r} {dy!r} 1", Direction="1 0 0 0 1 0 0 0 1")
    pd = ET.SubElement(img, "PPointData", Scalars="u")
    for name in ("u", *names):
        ET.SubElement(pd, "PDataArray", type=VTK_TYPES[dtype], Name=name)
    for b in blocks:
        x0, x1, y0, y1 = extent(b)
        ET.SubElement(img, "Piece", Extent=f"{x0} {x1} {y0} {y1} 0 0", Source=f"{stem(step)}/{stem(step)}_{b.rank}.vti")
    ET.indent(root)
    return '<?xml version="1.0"?>\n' + ET.tostring(root, encoding="unicode") + "\n"


def pvd_text(entries: list[tuple[int, float, str]]) -> str:
    root = ET.Element("VTKFile", type="Collection", version="0.1", byte_order="LittleEndian")
    coll = ET.SubElement(root, "Collection")
    for _, time, file in entries:
        ET.SubElement(coll, "DataSet", timestep=repr(float(time)), group="", part="0", file=file)
    ET.indent(root)
    return '<?xml version="1.0"?>\n' + ET.tostring(root, encoding="unicode") + "\n"


def read_pvd(path: Path) -> list[tuple[int, float, str]]:
    """(step, time, file) of each data set listed in a .pvd this module wrote (step from the file name).

    InputError (exit 2) naming the file when it is not such a listing: a restart continues it, and checks
    it with this reader before anything is written (solver.io.continued)."""
    try:
        root = ET.parse(path).getroot()
        if root.tag != "VTKFile" or root.get("type") != "Collection":
            raise ValueError("not a VTK collection")
        out = []
        for ds in root.iter("DataSet"):
            file = ds.get("file", "")
            m = NAME.match(Path(file).name)
            if m:
                out.append((int(m.group(1)), _finite(ds.get("timestep")), file))
        return out
    except (OSError, ET.ParseError, ValueError, TypeError) as exc:
        raise InputError(f"{path}: cannot be read as the VTK series listing ({str(exc).splitlines()[0][:80]}); "
                         f"move it away (the continued run then lists only its own snapshots) or restart into "
                         f"another --output directory") from None


def _finite(text) -> float:
    value = float(text)
    if not np.isfinite(value):
        raise ValueError(f"timestep {text!r} is not a finite number")
    return value


def check_folder(outdir: Path) -> None:
    """The vtk folder is a folder, or absent (set-up's checks, before anything is written)."""
    folder = Path(outdir) / "vtk"
    if folder.exists() and not folder.is_dir():
        raise InputError(f"output.dir: {folder} is a file, where stencil writes its VTK folder; move it away, set "
                         "output.vtk: false or choose another --output")


def data_arrays(case, block, shape: tuple[int, int], time: float) -> dict:
    """The data the update reads, as point arrays beside u (ParaView colours by any of them): alpha where it is a
    field, q (the source terms on at `time`; every term for laplace) where there is a source. A piece's points:
    the block's, plus the overlap row and column (shape), from global data: no message."""
    from ..core import sources
    from ..core.materials import alpha_at

    rows = np.arange(block.rows[0], block.rows[0] + shape[0])
    cols = np.arange(block.cols[0], block.cols[0] + shape[1])
    out = {}
    if case.alpha_field:
        out["alpha"] = alpha_at(case, rows, cols)
    if case.physics.source:
        terms = sources.active(case, time) if case.physics.equation == "heat" else sources.every_term(case)
        out["q"] = sources.q_at(case, terms, rows, cols)
    return out


class VtkSeries:
    """The VTK files of one run directory. Collective: every rank calls write() at the same steps."""

    def __init__(self, layout, comm, resume_step: int | None = None):
        """layout: solver.core.layout.Layout; its current blocks are read at each write (they can move)."""
        self.outdir, self.dir = Path(layout.outdir), Path(layout.outdir) / "vtk"
        self.layout, self.case, self.spacing, self.comm = layout, layout.case, layout.spacing, comm
        from ..core.physics import origin

        self.origin = origin(layout.case)
        self.entries: list[tuple[int, float, str]] = []
        self.dir.mkdir(parents=True, exist_ok=True)
        if comm.rank == 0 and resume_step is not None:
            self._resume(resume_step)  # before the first snapshot: set-up ends with a barrier

    def _resume(self, step: int) -> None:
        """Keep what was written up to `step`; forget (and delete) what came after it."""
        pvd = self.outdir / PVD
        if pvd.exists():
            self.entries = [e for e in read_pvd(pvd) if e[0] <= step]
        for p in self.dir.iterdir():
            m = NAME.match(p.name)
            if m and int(m.group(1)) > step:
                shutil.rmtree(p) if p.is_dir() else p.unlink()

    def write(self, step: int, time: float, mine: np.ndarray) -> None:
        """Collective: the MPI part first, then each rank's own file (errors are agreed on by the caller)."""
        block = self.layout.block
        values = piece_with_overlap(self.comm, block, mine)
        extra = data_arrays(self.case, block, values.shape, time)
        if self.comm.size == 1:
            write_image(self.dir / f"{stem(step)}.vti", values, (0, 0), self.spacing, time, self.origin, extra)
            return self._list(step, time, f"vtk/{stem(step)}.vti")
        folder = self.dir / stem(step)
        folder.mkdir(exist_ok=True)
        x0, _, y0, _ = extent(block)
        write_image(folder / f"{stem(step)}_{self.comm.rank}.vti", values, (x0, y0), self.spacing, time, self.origin,
                    extra)
        if self.comm.rank == 0:
            write_text(self.dir / f"{stem(step)}.pvti",
                       pvti_text(step, self.layout.blocks, self.case.shape, self.spacing, self.case.numerics.dtype,
                                 self.origin, tuple(extra)))
            self._list(step, time, f"vtk/{stem(step)}.pvti")

    def _list(self, step: int, time: float, file: str) -> None:
        """Rank 0: remember the snapshot for u.pvd (written by write_pvd, which the caller schedules)."""
        if self.comm.rank == 0:
            self.entries = [e for e in self.entries if e[0] != step] + [(step, time, file)]

    def write_pvd(self) -> None:
        if self.comm.rank == 0:
            write_text(self.outdir / PVD, pvd_text(self.entries))
