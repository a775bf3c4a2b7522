"""Conductivity that depends on temperature: a material's k(T) as plain data, evaluated on any array module.

A material's `k` (solver.case.materials) is a number, a table [[T, k], ...] (linear between its points, held at the
end values beyond them, as the sides' tables are) or a power law k0 (T / T0)^b with T absolute (kelvin: a case in
degC adds 273.15). Temperatures are levels in the case's units; conductivities in its units.

Every such material also has a reference conductivity k_ref, its k at REFERENCE_T kelvin (the built-in library's
values are at 300 K; a table's k there, held beyond its ends): the geometry of the faces (solver.core.plate: materials
in series along a face, in parallel across it, apertures) is computed once with k_ref, and a face's conductance at a
field u is that times the harmonic mean of its two points' factors kappa = k(u) / k_ref (solver.nonlinear.operator).
Within one material this is exactly the harmonic mean of the two points' k at their own temperatures, whatever k_ref
is; between two materials whose interface lies half-way it is the series conductance of the two half-links.

The functions take an array module `xp` (numpy or cupy) so that every backend evaluates the same expressions, term by
term (numpy and numba share numpy's; CuPy's power may differ from numpy's in the last bit).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

REFERENCE_T = 300.0  # kelvin: where a k(T) material's reference conductivity k_ref is taken


@dataclass(frozen=True)
class Law:
    """k(T) of one material (case units). kind "table": temps (strictly increasing levels) and values (k > 0);
    kind "power": k0, t0 (kelvin, > 0) and b. offset: case temperature + offset = kelvin."""

    kind: str
    temps: tuple = ()
    values: tuple = ()
    k0: float = 0.0
    t0: float = 0.0
    b: float = 0.0
    offset: float = 0.0

    @property
    def slopes(self) -> tuple:
        """dk/dT of each interval of a table."""
        t, v = self.temps, self.values
        return tuple((v[i + 1] - v[i]) / (t[i + 1] - t[i]) for i in range(len(t) - 1))

    def reference(self) -> float:
        """k at REFERENCE_T kelvin (held beyond a table's ends), case units."""
        k, _ = self.evaluate(np.array([REFERENCE_T - self.offset]), np)
        return float(k[0])

    def evaluate(self, u, xp):
        """(k, dk/dT) at the temperatures u (an array of the module xp), in the case's units. A table: linear between
        its points, held beyond them (derivative 0 there); a power law: NaN where u is not above absolute zero."""
        if self.kind == "power":
            theta = u + self.offset
            k = self.k0 * (theta / self.t0) ** self.b
            return k, (self.b * k) / theta
        t, v, s = (xp.asarray(np.array(a, dtype=np.float64)) for a in (self.temps, self.values, self.slopes or (0.0,)))
        n = len(self.temps)
        if n == 1:
            return xp.full(u.shape, self.values[0], dtype=u.dtype), xp.zeros_like(u)
        held = xp.minimum(xp.maximum(u, self.temps[0]), self.temps[-1])
        i = xp.minimum(xp.searchsorted(t, held, side="right") - 1, n - 2)
        k = v[i] + s[i] * (held - t[i])
        inside = (u > self.temps[0]) & (u < self.temps[-1])
        return k.astype(u.dtype, copy=False), xp.where(inside, s[i], 0.0).astype(u.dtype, copy=False)

    def factors_into(self, u, kref: float, kap, dkap, tmp) -> None:
        """kap = k(u) / kref and dkap = k'(u) / kref into numpy arrays of u's shape (tmp: scratch of that shape): the
        terms and order of `evaluate` followed by the two divisions, so the same bits, without a temporary per term
        (a caller may hand it rows of a field in blocks and threads: every term is elementwise)."""
        if self.kind != "power":
            k, dk = self.evaluate(u, np)
            np.divide(k, kref, out=kap)
            np.divide(dk, kref, out=dkap)
            return
        theta = np.add(u, self.offset, out=tmp)
        np.divide(theta, self.t0, out=kap)
        np.power(kap, self.b, out=kap)
        np.multiply(self.k0, kap, out=kap)
        np.multiply(self.b, kap, out=dkap)
        np.divide(dkap, theta, out=dkap)
        np.divide(kap, kref, out=kap)
        np.divide(dkap, kref, out=dkap)

    def largest(self, lo: float, hi: float) -> float:
        """The largest k over temperatures [lo, hi] (the explicit step's stability limit)."""
        if self.kind == "power":
            ends = [self.k0 * ((x + self.offset) / self.t0) ** self.b for x in (lo, hi)]
            return max(ends) if all(math.isfinite(e) for e in ends) else math.inf
        pts = [lo, hi] + [t for t in self.temps if lo < t < hi]
        k, _ = self.evaluate(np.array(pts, dtype=np.float64), np)
        return float(np.max(k))

    def describe(self, unit: str = "") -> str:
        """In words, temperatures in the case's `unit` (the power law's T0 in kelvin)."""
        if self.kind == "power":
            return f"k0 (T / T0)^b: k0 = {self.k0:g}, T0 = {self.t0:g} K, b = {self.b:g}"
        return f"a table of {len(self.temps)} points, T = {self.temps[0]:g} .. {self.temps[-1]:g} {unit}".rstrip()


def laws(case) -> dict:
    """name -> Law of every k(T) material the case uses (constant ones left out)."""
    return dict(getattr(case, "conductivity_laws", lambda: {})())


def law_names(case) -> tuple[str, ...]:
    """The k(T) materials, in a fixed order (index + 1 is a point's law code: law_index)."""
    return tuple(sorted(laws(case)))


def law_index(case, rows: np.ndarray, cols: np.ndarray) -> np.ndarray:
    """Each point's law code (int32): 0 for a material of constant k, 1 + its place in law_names otherwise; the point's
    own material at its centre, later regions winning (as solver.core.plate.conductivity paints k)."""
    from .plate import inside, points, roles, span, take

    names = law_names(case)
    code = {name: i + 1 for i, name in enumerate(names)}
    r0, r1 = span(rows)
    c0, c1 = span(cols)
    y, x = points(case, r0, r1, "y"), points(case, c0, c1, "x")
    out = np.full((r1 - r0, c1 - c0), code.get(case.physics.material, 0), dtype=np.int32)
    for _, s, name in roles(case).materials:
        out[inside(s, x, y)] = code.get(name, 0)
    return take(out, rows, cols, r0, c0)
