"""examples/tour.ipynb runs top to bottom in a fresh kernel (nbclient), committed without outputs,
and what it draws stays small enough to keep."""
import json

import nbformat
import pytest
from nbclient import NotebookClient

from conftest import ROOT

TOUR = ROOT / "examples" / "tour.ipynb"
OUTPUTS_LIMIT = 1_000_000  # bytes of outputs once executed


def test_tour_is_committed_without_outputs():
    notebook = nbformat.read(TOUR, as_version=4)
    code = [cell for cell in notebook.cells if cell.cell_type == "code"]
    assert code and all(not cell.outputs and cell.execution_count is None for cell in code)


@pytest.mark.slow
def test_tour_runs_top_to_bottom():
    notebook = nbformat.read(TOUR, as_version=4)
    NotebookClient(notebook, timeout=170, kernel_name="python3", resources={"metadata": {"path": str(ROOT)}}).execute()
    outputs = [output for cell in notebook.cells if cell.cell_type == "code" for output in cell.outputs]
    assert not [o for o in outputs if o.output_type == "error"]
    figures = [o for o in outputs if "application/vnd.plotly.v1+json" in o.get("data", {})]
    assert len(figures) >= 6  # the sum of rows, the bands, the maps, two shuffles, the curves
    assert len(json.dumps([dict(o) for o in outputs])) < OUTPUTS_LIMIT


def test_readme_and_tour_install_lpos_before_jupyter():
    """The kernel starts in examples/, where an uninstalled checkout's lpos cannot be imported: the
    instructions install the package before they open the notebook."""
    intro = "".join(nbformat.read(TOUR, as_version=4).cells[0].source)
    readme = " ".join((ROOT / "README.md").read_text(encoding="utf-8").split())
    for text in (intro, readme):
        opened = text.index("jupyter lab examples/tour.ipynb")
        assert "pip install -e ." in text[:opened][-300:]
