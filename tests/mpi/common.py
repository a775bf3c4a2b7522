"""Helpers shared by the MPI check scripts (run as scripts: this folder is on sys.path)."""

import sys
import traceback
from contextlib import contextmanager
from pathlib import Path

from solver.case import validate_case
from solver.parallel.comm import Comm
from solver.run import Options, Run


def make_case(data: dict, **sections):
    """`data` with each section in `sections` merged over its own, validated."""
    data = dict(data)
    for k, v in sections.items():
        data[k] = {**data.get(k, {}), **v}
    return validate_case(data)


def serial(c):
    """The same case on one process (output beside it, in DIR-serial): (owned field, steps, output dir)."""
    c1 = c.model_copy(deep=True)
    c1.output.dir = c.output.dir + "-serial"
    r = Run(c1, Comm(), Options(ceiling=False, quiet=True))
    r.execute()
    return r.state.u[1:-1, 1:-1].copy(), r.state.step, Path(c1.output.dir)


@contextmanager
def abort_on_error(mpi):
    """An exception on any rank prints its traceback and aborts the whole job (no rank left waiting)."""
    try:
        yield
    except Exception:
        traceback.print_exc()
        sys.stdout.flush()
        mpi.Abort(1)
