"""Nonlinear heat: a conductivity that depends on temperature and radiating walls, solved by Newton's method with the
multigrid inside (docs/nonlinear.md): the operator as data (operator, films), the linear case that preconditions it
(linear), GMRES (gmres), the forcing terms (forcing), the iteration the time loop runs (newton), the energy balance's
rates (energy)."""
