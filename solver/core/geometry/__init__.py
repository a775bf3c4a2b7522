"""Geometry on tensor grids (issues 42 and 43), pure vectorised numpy on plain frozen shapes; nothing here knows
the case model (the caller builds the shapes).

- shapes: Rectangle, Disk, Polygon, Mask; transpose, bbox, area, rim_distance.
- checks: problem (why the solver refuses a shape), self_crossing, smallest_feature, thickness, unresolved.
- fractions: cell_fractions, the exact covered fraction of every cell.
- paint: paint, materials laid in order, each cell's area shares (Painting.mean: area-weighted means).
- faces: face_conductance, series along each face's segment and parallel across its cross-section.
- rims: crossings (Shortley-Weller / Gibou distances) and cut_cells (volume, apertures, rim length and normal).
- lines, quadrature: shapes along lines, and integrals across boxes of what the lines meet (used by the above).
"""

from .faces import face_conductance
from .fractions import cell_fractions
from .paint import Painting, cut_counts, paint
from .rims import Crossings, CutCells, crossings, cut_cells
from .checks import problem, self_crossing, smallest_feature, thickness, unresolved
from .shapes import Disk, Mask, Polygon, Rectangle, area, bbox, rim_distance, transpose

__all__ = ["Crossings", "CutCells", "Disk", "Mask", "Painting", "Polygon", "Rectangle", "area", "bbox",
           "cell_fractions", "crossings", "cut_cells", "cut_counts", "face_conductance", "paint", "problem", "rim_distance",
           "self_crossing", "smallest_feature", "thickness", "transpose", "unresolved"]
