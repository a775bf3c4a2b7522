"""Every check's figures are shown where people look: record.md and the run table printed at the end, not
only record.json (the conservation of the sum with insulated walls, the reference comparison)."""

import json
import re

from conftest import stencil, write_case


def test_conservation_and_the_reference_figures_in_record_md_and_the_run_table(tmp_path):
    case = write_case(tmp_path / "box.yaml", grid={"nx": 31, "ny": 23}, initial={"kind": "random", "seed": 5},
                      boundary={side: {"kind": "neumann", "flux": 0.0} for side in ("top", "bottom", "left", "right")},
                      run={"steps": 40, "check_every": 10}, output={"dir": str(tmp_path / "out")})
    res = stencil(["run", str(case), "--verify", "-q"], env={"COLUMNS": "250"})
    assert res.returncode == 0, res.stderr
    c = json.loads((tmp_path / "out" / "record.json").read_text())["correctness"]
    k = c["conservation"]
    assert c["passed"] and k["passed"]
    md = (tmp_path / "out" / "record.md").read_text()
    line = f"- conservation: PASS: sum(u) = {k['sum']:.10g}, expected {k['expected_sum']:.10g}"
    assert line in md and f"error {k['error']:.3e} (tolerance {k['tolerance']:.1e})" in md, md
    assert f"max |u - ref| {c['max_abs_error']:.3e}" in md and "0 point(s) differ" in md
    table = " ".join(res.stdout.split())
    total = re.escape(format(k["sum"], ".10g"))
    assert re.search(rf"conservation │ PASS: sum\(u\) = {total}", table), res.stdout
    assert "against the numpy reference on 1 rank(s)" in table
