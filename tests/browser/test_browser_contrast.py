"""Captions carry key explanations: their effective colour, as the browser draws them, reads at WCAG AA."""
import re

import pytest
from conftest import open_url

pytestmark = [pytest.mark.browser, pytest.mark.slow]

# Each caption's text colour composited over its ancestors' opacity onto the first opaque background
# behind it: Streamlit 1.67 draws st.caption as the theme's textColor at opacity 0.6.
EFFECTIVE_COLOURS = """() => [...document.querySelectorAll('[data-testid="stCaptionContainer"] p')].map(p => {
  let opacity = 1, node = p, background = 'rgb(255, 255, 255)';
  for (let e = p; e; e = e.parentElement) opacity *= parseFloat(getComputedStyle(e).opacity);
  for (; node; node = node.parentElement) {
    const bg = getComputedStyle(node).backgroundColor;
    if (bg && !bg.startsWith('rgba(0, 0, 0, 0)') && !/rgba\\(.*, 0\\)$/.test(bg)) { background = bg; break; }
  }
  return [getComputedStyle(p).color, opacity, background, p.textContent.slice(0, 40)];
})"""


def luminance(rgb) -> float:
    channels = [c / 255 for c in rgb]
    r, g, b = [c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4 for c in channels]
    return 0.2126 * r + 0.7152 * g + 0.0722 * b


def contrast(fg, bg) -> float:
    light, dark = sorted([luminance(fg), luminance(bg)], reverse=True)
    return (light + 0.05) / (dark + 0.05)


def rgb(css: str) -> tuple[float, ...]:
    return tuple(float(v) for v in re.findall(r"[\d.]+", css)[:3])


def test_the_old_text_colour_was_below_aa_and_the_theme_colour_is_above():
    """The theme values alone: #1f2933 at opacity 0.6 on white was 4.07:1, the reported 4.1."""
    def caption(text, bg):
        return tuple(0.6 * t + 0.4 * b for t, b in zip(text, bg))
    assert contrast(caption((0x1f, 0x29, 0x33), (255,) * 3), (255,) * 3) == pytest.approx(4.07, abs=0.01)
    for bg in ((255, 255, 255), (0xf3, 0xf5, 0xf8)):  # the page and the sidebar
        assert contrast(caption((0x0b, 0x12, 0x20), bg), bg) >= 4.5


def test_every_caption_on_the_first_page_reads_at_aa(running_app, page):
    open_url(page, running_app.url)
    captions = page.evaluate(EFFECTIVE_COLOURS)
    assert len(captions) >= 2
    for colour, opacity, background, text in captions:
        bg = rgb(background)
        drawn = tuple(opacity * c + (1 - opacity) * b for c, b in zip(rgb(colour), bg))
        assert contrast(drawn, bg) >= 4.5, (text, colour, opacity, background, contrast(drawn, bg))
