"""The problem itself, with no third-party imports beyond numpy: physics (weights, exact modes), decomposition,
initial fields, the padded field, the run's layout, the time loop, timers, errors, machine facts.
Imports nothing from the rest of solver.
"""
