"""The case file's JSON Schema (`stencil schema`, editors' completion), every property described."""

from __future__ import annotations

from .boundary import BOUNDARY_KINDS
from .model import Case

EQUATIONS = "heat: u_t = div(alpha grad u) + q; laplace: its steady state 0 = div(alpha grad u) + q"

# Descriptions for the schema where a field gives none (editors show them on hover); Field(description=...)
# takes precedence, and tests/test_cli.py checks that every property of the schema ends up with one.
DESCRIPTIONS = {
    "Case.name": "run name: the output directory's default (output/<name>); default: the case file's stem",
    "Case.grid": "the grid: interior points and domain size (required)",
    "Case.physics": "the equation and its coefficients",
    "Case.initial": "the initial field (heat) or first iterate (laplace), chosen by `kind`",
    "Case.boundary": f"the four sides, each a kind ({', '.join(BOUNDARY_KINDS)}) with its values: numbers, tables in "
                     "time, profiles along the side or files; the kind is fixed for the run",
    "Case.run": "steps, convergence and checks",
    "Case.multigrid": "multigrid cycles (physics.solver: multigrid): cycle type, smoothing, coarsest level",
    "Case.numerics": "floating-point type",
    "Case.backend": "where the steps run: numpy, numba (CPU threads) or cupy (GPU)",
    "Case.parallel": "MPI decomposition, halo exchange and load balance",
    "Case.output": "result directory, snapshots, VTK, checkpoints and trace",
    "BackendSettings.name": "numpy (reference) | numba (CPU threads, SIMD) | cupy (NVIDIA GPU)",
    "Dirichlet.kind": "dirichlet: a fixed value u on the side",
    "Neumann.kind": "neumann: a fixed outward normal derivative du/dn (flux) on the side; flux 0 = insulated",
    "Convective.kind": "convective: Newton cooling, -du/dn = h (u - ambient) at the wall (a Robin condition)",
    "ConstantSource.kind": "constant: q = value everywhere",
    "GaussianSource.kind": "gaussian: q = amplitude exp(-r^2 / (2 width^2)) around center",
    "RectangleSource.kind": "rectangle: q = value on the points inside [lower, upper]",
    "FileSource.kind": "file: q read from a .npy or HDF5 array (one value per point, or a map over extent)",
    "RectangleRegion.kind": "rectangle: alpha = value on the points inside [lower, upper]",
    "DiskRegion.kind": "disk: alpha = value on the points within radius of center",
    "AlphaFile.kind": "file: alpha read from a .npy or HDF5 array of shape (ny, nx)",
    "Periodic.kind": "periodic: the side wraps to the opposite one (give both sides of the axis)",
    "Constant.kind": "constant: the same value everywhere",
    "Constant.value": "the value of every interior point",
    "FromFile.kind": "file: read the field from a .npy or HDF5 file",
    "FromFile.path": "the file: .npy, or HDF5 with `dataset`; relative to the working directory",
    "FromFile.dataset": "HDF5 only: the dataset holding the (ny, nx) array, or a (snapshots, ny, nx) series (its last "
                        "snapshot is read); null = /u, the field of a file stencil wrote (fields.h5, checkpoint.h5)",
    "Hotspot.kind": "hotspot: a hot disc on a uniform background",
    "Hotspot.value": "u inside the disc",
    "Hotspot.radius": "disc radius, physical units",
    "Hotspot.center": "disc centre [x, y], physical units",
    "Hotspot.background": "u outside the disc",
    "Numerics.dtype": "float64 (bitwise equal across backends) or float32 (half the bytes per update)",
    "Output.checkpoint_every": "steps between checkpoints (checkpoint.h5, for --restart); null = none",
    "Output.trace": "write trace.json: every rank's per-step sections (Chrome trace format, open in Perfetto)",
    "Parallel.decomposition": "rows: blocks of whole rows; cart: a 2D process grid (shorter halos per rank)",
    "Parallel.halo": "blocking (Sendrecv) | nonblocking (Isend/Irecv, Waitall) | overlap (interior computed "
                     "while the messages move)",
    "Physics.equation": f"{EQUATIONS} (heat: time steps, physics.scheme; laplace: physics.solver)",
    "Random.kind": "random: uniform values, the same for any rank count",
    "Random.seed": "random generator seed",
    "Random.low": "lower bound (included)",
    "Random.high": "upper bound (excluded)",
    "Sine.kind": "sine: a discrete eigenmode for the boundary kinds, wave numbers k (exact solution known: use it to verify)",
    "DiskSource.kind": "disk: q = value (or power spread over its area) within radius of center",
    "InsulatedRim.kind": "insulated: no heat crosses the rim",
    "FluxRim.kind": "flux: a heat flux into the plate through the rim",
    "ConvectiveRim.kind": "convective: h (and radiation) between the rim and a fluid at ambient",
    "FixedRim.kind": "fixed: the rim held at a temperature",
    "RegionRectangle.kind": "rectangle: the region inside [lower, upper]",
    "RegionDisk.kind": "disk: the region within radius of center",
    "RegionPolygon.kind": "polygon: the region inside the polygon through points",
    "RegionMask.kind": "mask: the region a PNG or .npy mask covers over its extent",
    "OutlineRectangle.kind": "rectangle: the plate is [lower, upper]",
    "OutlineDisk.kind": "disk: the plate is the disk of radius around center",
    "OutlinePolygon.kind": "polygon: the plate is the polygon through points",
    "OutlineMask.kind": "mask: the plate is what a PNG or .npy mask covers over its extent",
    "RectangleShape.kind": "rectangle: the grid points with lower <= (x, y) <= upper",
    "DiskShape.kind": "disk: the grid points within radius of center",
    "PointProbe.kind": "point: u at `at`, bilinear between the plate's grid points around it",
    "RegionProbe.kind": "max | min | mean: of u over the plate's grid points in `region`",
    "SideProbe.kind": "heat_flow: the heat entering through `side` per unit time (W in the material form)",
    "SideProbe.side": "the side: bottom, top, left or right (not a periodic one)",
}


def schema() -> dict:
    """The case file's JSON Schema: every property described; `name` optional (it defaults to the file's stem)."""
    out = Case.model_json_schema()
    for model, section in [("Case", out), *out.get("$defs", {}).items()]:
        for key, prop in section.get("properties", {}).items():
            text = DESCRIPTIONS.get(f"{model}.{key}")
            if text and "description" not in prop:
                prop["description"] = text
    out["required"] = [k for k in out.get("required", []) if k != "name"]
    return out
