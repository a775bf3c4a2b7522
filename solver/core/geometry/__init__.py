"""Geometry on tensor grids (issues 42 and 43): exact area fractions, painting in order, face conductances,
embedded-boundary data; pure vectorised numpy on plain frozen shapes (shapes.py), nothing of the case model."""

from .fractions import cell_fractions
from .shapes import Disk, Mask, Polygon, Rectangle, area, problem, self_crossing, smallest_feature, transpose

__all__ = ["Disk", "Mask", "Polygon", "Rectangle", "area", "cell_fractions", "problem", "self_crossing",
           "smallest_feature", "transpose"]
