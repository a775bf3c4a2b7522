"""TR-BDF2's numbers (gamma = 2 - sqrt(2)): the stages' shares and its error estimate's weights.

The method and why it was chosen: solver.multigrid.adaptive; the controller that uses its estimate:
solver.core.controller. Here as plain numbers so that the energy balance (solver.core.balance) integrates the
sides' fluxes as the method integrates f, with the quadrature weights (W, W, D) at t_n, t_n + gamma dt, t_n + dt.
"""

from __future__ import annotations

import math

GAMMA = 2.0 - math.sqrt(2.0)
D = GAMMA / 2.0  # the implicit share of both stages: (1 - gamma) / (2 - gamma) = gamma / 2 for this gamma
W = math.sqrt(2.0) / 4.0  # (1 - D) / 2: the weights of f_n and f_g in the step
A2 = 1.0 / (GAMMA * (2.0 - GAMMA))  # BDF2 stage: u_1 = A2 u_g - B2 u_n + D dt f(u_1)
B2 = (1.0 - GAMMA) ** 2 / (GAMMA * (2.0 - GAMMA))
E0, E1, E2 = 4.0 * W / 3.0, 2.0 / 3.0, (1.0 + 2.0 * W) / (3.0 * D)  # e = E0 dt f_n + E1 (u_1 - u_n) - E2 (u_g - u_n)
