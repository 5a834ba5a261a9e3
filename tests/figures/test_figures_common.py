"""lpos.figures.common.subplots: make_subplots' grid, copied from one built per set of arguments."""
import plotly.graph_objects as go
import pytest
from plotly.subplots import make_subplots

from lpos.figures import common
from lpos.figures.common import subplots

GRIDS = [dict(rows=2, cols=1, shared_yaxes=True, vertical_spacing=0.3, subplot_titles=["before", "after"]),
         dict(rows=1, cols=3, shared_yaxes=True, horizontal_spacing=0.03),
         dict(rows=2, cols=2, specs=[[{"colspan": 2}, None], [{}, {}]], row_heights=[0.7, 0.3])]


@pytest.mark.parametrize("grid", GRIDS)
def test_a_copied_grid_is_the_grid_make_subplots_builds(grid):
    for _ in range(2):  # built, then copied from the kept one
        fig, made = subplots(**grid), make_subplots(**grid)
        assert fig.to_dict() == made.to_dict()
        assert fig._grid_ref == made._grid_ref
        fig.add_trace(go.Bar(x=[1], y=[2]), row=grid["rows"], col=1)
        made.add_trace(go.Bar(x=[1], y=[2]), row=grid["rows"], col=1)
        fig.update_yaxes(title_text="weight", row=grid["rows"], col=1)
        made.update_yaxes(title_text="weight", row=grid["rows"], col=1)
        assert fig.to_dict() == made.to_dict()


def test_a_copy_changed_leaves_the_next_copy_alone():
    grid = GRIDS[0]
    first = subplots(**grid)
    first.layout.annotations[0].text = "changed"
    first.update_xaxes(domain=[0, 0.5], row=1, col=1)
    first.add_trace(go.Bar(x=[1], y=[1]), row=1, col=1)
    second = subplots(**grid)
    assert second.layout.annotations[0].text == "before"
    assert tuple(second.layout.xaxis.domain) == (0.0, 1.0) and not second.data


def test_a_copy_still_refuses_a_property_plotly_does_not_have():
    fig = subplots(**GRIDS[0])
    with pytest.raises(ValueError):
        fig.update_layout(titel="a typo")
    with pytest.raises(ValueError):
        fig.update_xaxes(tickangel=45, row=1, col=1)


def test_the_kept_grids_are_bounded():
    for n in range(common.GRIDS + 5):
        subplots(rows=1, cols=2, subplot_titles=[f"panel {n}", "other"])
    assert len(common._grids) <= common.GRIDS
