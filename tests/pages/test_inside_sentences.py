"""Inside the model's computed sentences on the cases where they used to be wrong (issue 25): a sink
gain inside its noise band was called a help, and texts were named by the choice, not by what was read."""
from __future__ import annotations

import numpy as np

from lpos.analysis import streaming
from lpos.ui.inside import Text, first_tokens, windows_used

STORY_AND_HELD_OUT = Text((("the built-in story", tuple(range(1399))), ("held-out stories", tuple(range(3072)))))


def sink_test_with_gain(gain: float, spread: float, *, window: int = 64, scored: int = 497) -> streaming.SinkTest:
    """A SinkTest whose per-token differences past the window have exactly this mean and standard deviation."""
    rng = np.random.default_rng(0)
    noise = rng.normal(size=scored)
    difference = gain + spread * (noise - noise.mean()) / noise.std(ddof=1)
    alone = 4 + rng.normal(0, 0.5, window + scored)
    kept = alone.copy()
    kept[window:] -= difference
    return streaming.SinkTest(window=window, sink=4, alone=alone, with_sink=kept)


def test_a_gain_inside_its_noise_band_is_within_noise():
    """The shipped rope model at W = 64: 0.012 nats per token, standard error 0.005 over 497 predictions.
    Two standard errors (0.010) called it a help; it is inside the noise band of three (0.015)."""
    summary = streaming.sink_summary(sink_test_with_gain(0.0122, 0.0050 * np.sqrt(497)))
    assert abs(summary["gain"] - 0.0122) < 1e-12
    assert 2 * summary["error"] < summary["gain"] < summary["noise"] == streaming.NOISE_ERRORS * summary["error"]
    assert streaming.sink_verdict(summary) == "no clear change"
    text = " ".join(streaming.sink_reading({"rope": summary, "alibi": streaming.sink_summary(
        sink_test_with_gain(0.0038, 0.0036 * np.sqrt(497)))}, window=64))
    assert "helps only" not in text
    assert "the gain nearest to leaving its band, rope's 0.012 nats per token, is within noise (± 0.015)" in text
    assert "**rope**: " in text and "noise band ± 0.015 over 497 predictions): **no clear change** (within noise)" in text


def test_a_gain_beyond_its_noise_band_says_the_band():
    summary = streaming.sink_summary(sink_test_with_gain(0.05, 0.0050 * np.sqrt(497)))
    assert streaming.sink_verdict(summary) == "helps"
    assert ("helps only **rope**, by 0.050 nats per token, beyond its noise band of ± 0.015"
            in " ".join(streaming.sink_reading({"rope": summary}, window=64)))


def test_no_gain_at_all_is_said_so():
    text = " ".join(streaming.sink_reading({"rope": streaming.sink_summary(sink_test_with_gain(-0.01, 0.3))}, window=8))
    assert "no scheme gains at all" in text and "within noise" not in text.split("Keeping")[1]


def test_the_streamed_tokens_are_named_by_the_part_they_come_from():
    """577 streamed tokens of "the built-in story + held-out stories" all come from the story."""
    assert first_tokens(STORY_AND_HELD_OUT, 577) == "the first 577 tokens of the built-in story"
    assert first_tokens(STORY_AND_HELD_OUT, 1500) == ("all 1,399 tokens of the built-in story and the first 101 of "
                                                      "held-out stories")
    assert first_tokens(Text((("held-out stories", tuple(range(40))),)), 577) == "all 40 tokens of held-out stories"


def test_the_probe_windows_are_named_by_the_part_they_come_from():
    """34 windows of 128: 10 from the story's 1,399 tokens, 24 from the held-out 3,072; a wide, deep
    model affords 7, all from the story."""
    assert windows_used(STORY_AND_HELD_OUT, windows=34, length=128) == "10 of the built-in story and 24 of held-out stories"
    assert windows_used(STORY_AND_HELD_OUT, windows=7, length=128) == "7 of the built-in story"
