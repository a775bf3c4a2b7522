"""The built-in materials: conductivity k, density rho and specific heat c_p of common solids near 300 K, in SI, with
where each value comes from. A case names them in `physics.material` and its regions without defining them; a
case's own `materials:` table adds others (or overrides one of these by its name). docs/materials.md lists them."""

from __future__ import annotations

INCROPERA = "Incropera, DeWitt, Bergman, Lavine, Fundamentals of Heat and Mass Transfer, 6th ed., Table A.1 (300 K)"
INCROPERA_A2 = "Incropera et al., 6th ed., Table A.2 (300 K)"
INCROPERA_A3 = "Incropera et al., 6th ed., Table A.3 (300 K)"

# name: (k W/(m K), rho kg/m^3, c_p J/(kg K), source)
LIBRARY = {
    "copper": (401.0, 8933.0, 385.0, f"pure copper; {INCROPERA}"),
    "aluminium": (237.0, 2702.0, 903.0, f"pure aluminium; {INCROPERA}"),
    "aluminium_2024": (177.0, 2770.0, 875.0, f"aluminium alloy 2024-T6; {INCROPERA}"),
    "silicon": (148.0, 2330.0, 712.0, f"silicon; {INCROPERA}"),
    "steel": (63.9, 7832.0, 434.0, f"plain carbon steel (AISI 1010); {INCROPERA}"),
    "stainless_steel": (14.9, 7900.0, 477.0, f"stainless steel AISI 304; {INCROPERA}"),
    "brass": (110.0, 8530.0, 380.0, f"cartridge brass (70 Cu, 30 Zn); {INCROPERA}"),
    "gold": (317.0, 19300.0, 129.0, f"gold; {INCROPERA}"),
    "silver": (429.0, 10500.0, 235.0, f"silver; {INCROPERA}"),
    "titanium": (21.9, 4500.0, 522.0, f"titanium; {INCROPERA}"),
    "alumina": (36.0, 3970.0, 765.0, f"aluminium oxide, polycrystalline; {INCROPERA_A2}"),
    "glass": (1.4, 2225.0, 835.0, f"borosilicate glass (Pyrex); {INCROPERA_A3}"),
    "fr4": (0.81, 1850.0, 1100.0, "FR4 laminate in plane: k from Azar and Graebner, Experimental determination of "
                                  "thermal conductivity of printed wiring boards, SEMI-THERM XII (1996), 0.81 W/(m K) "
                                  "in plane (0.29 through it); rho and c_p typical of laminate datasheets"),
    "tim": (3.0, 2500.0, 1000.0, "a thermal interface material (gap filler or grease): typical datasheet values "
                                 "(1 to 6 W/(m K)); give your part's own values in `materials:`"),
}

# what solids have near room temperature, SI (a value outside is noted before a run: solver.case.model.Case.notes):
# conductivities from aerogels and foams (0.01) to diamond (2200), heat capacities from foams (1e4) to water-like
# solids (5e6)
PLAUSIBLE = {"k": (0.01, 3000.0), "C": (1e4, 6e6), "h": (0.1, 1e6)}  # SI; h: still air's few W/(m^2 K) to
# boiling and condensation's 1e5
