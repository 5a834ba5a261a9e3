"""lpos.analysis.coverage: which texts the loss by position is read from."""
from __future__ import annotations


def test_no_developer_remark_about_the_corpus_reaches_a_learner():
    from lpos.analysis.coverage import position_loss_streams  # noqa: PLC0415

    streams = position_loss_streams({"data_files": ["nowhere.txt"]}, length=32)
    assert [name for _, name in streams] == ["the built-in story"]
