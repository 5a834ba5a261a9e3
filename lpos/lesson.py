"""The lesson: ten short steps from "a row lookup" to "why ALiBi extrapolates".

Content only (titles, plain sentences, what to notice, what kind of scheme a step is about); the
figures come from lpos.figures through the page, so the lesson adds no maths of its own. A step
names the kind of scheme it is about by a view (lpos.positions.VIEWS) or NO_POSITIONS, and the
registry says which scheme that is: the lesson never names a scheme to pick it.
"""
from __future__ import annotations

from dataclasses import dataclass

from lpos.pages import page_named
from lpos.positions import REGISTRY, schemes_with

NO_POSITIONS = "no positions"  # a step about the scheme with no rows and nothing inside attention


def _names(items: list[str]) -> str:
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


@dataclass(frozen=True)
class Step:
    title: str
    text: str  # 2-4 plain sentences
    notice: str  # "what to notice"
    about: str | None  # a view the step's scheme shows, or NO_POSITIONS; None = the sidebar's scheme
    further: tuple[str, str] | None = None  # (page file, link text): the app page that takes the step further

    @property
    def scheme(self) -> str | None:
        """The scheme this step is about: the first registered one of its kind; None = the sidebar's."""
        if self.about is None:
            return None
        if self.about == NO_POSITIONS:
            return next(name for name, s in REGISTRY.items() if not s.adds_rows and not s.in_attention)
        return schemes_with(self.about)[0]


def _what_each_does(schemes: list) -> str:
    return "; ".join(f"{s.label} {s.acts}" for s in schemes)


BIASES = [REGISTRY[name] for name in schemes_with("bias")]  # step 7's schemes, in registry order
MORE_IN_ATTENTION = [s for s in REGISTRY.values() if s.in_attention and not s.shows("bias") and not s.shows("rotation")]


STEPS: tuple[Step, ...] = (
    Step(
        "Text becomes token ids",
        "The model's tokenizer (GPT-2's for the shipped models) splits your sentence into tokens and gives "
        "each one an id. Each id picks one row of the "
        "token table: a lookup, not a multiplication. Nothing in those rows says where the token sits.",
        "With GPT-2's tokenizer a space belongs to the token after it (“␣dog”), and “The” and “␣the” are "
        "different ids; a character-level model's tokens are single characters, and a model on its own BPE "
        "splits by its own merges (the chips show the model's own tokens). "
        "Red chips are tokens the model never saw in training: their rows are still random.",
        None,
    ),
    Step(
        "Attention without positions is blind to order",
        "Attention lets the last token look back at every earlier token and take a weighted average of "
        "what it finds. With no position information, that average does not care about order: shuffle the "
        "earlier tokens and the first layer's output for the last token is the same, up to float rounding.",
        "Under “none” the bars keep their heights and move with their tokens, and the change is zero up "
        "to rounding: the sentence and the shuffle drawn, which keeps its last token, look alike to the first "
        "layer.",
        NO_POSITIONS,
    ),
    Step(
        "Add a second table, indexed by position",
        "GPT-2's fix is a learned table with one row per position. The input to the model is the token "
        "row plus the position row, so the same token at two positions gets two different inputs.",
        "Look at a token that occurs more than once: its token rows are identical, its summed rows are not.",
        "table",
    ),
    Step(
        "A learned table has two limits",
        "First, it stops at its last row. A table has as many rows as it was built with (128 for the shipped "
        "learned model; the line under the figure gives this one's). One token past the last row there is simply no row "
        "to add, and the model cannot run at all. Second, a row only learns from positions "
        "training actually reaches: a model trained on shorter windows keeps its later rows, but they never get a "
        "gradient and stay near their random starting values. Randomized positions (Ruoss et al. 2023) answer both: a "
        "table far longer than the training windows, each window reading a sorted random subset of its rows, so every "
        "row trains and a longer input still finds rows. Finding a row is not reading it well: Length extrapolation "
        "shows how far the shipped randomized table's loss still rises at 1,024 tokens.",
        "The error message names the first limit; the other schemes run at any length. The figure shows the second: "
        "compare the two lines left and right of the shaded edge, where the short-window model starts reading rows "
        "it never trained.",
        "table",
    ),
    Step(
        "A formula instead of a table: sinusoids",
        "The original Transformer computed position rows from sines and cosines of many frequencies. Left "
        "columns turn fast, right columns slowly, so every position gets its own pattern, at any length.",
        "The dot product of rows t and t+k is the same curve for every t: it depends only on the distance k.",
        "sinusoids",
    ),
    Step(
        "RoPE: rotate queries and keys",
        "RoPE adds nothing to the embeddings. Inside attention it rotates each pair of query and key "
        "columns by an angle proportional to the position.",
        "After rotation, the score q·k depends only on m − n: the lines for fixed offsets are flat.",
        "rotation",
    ),
    Step(
        "Relative positions: a bias on every score",
        f"{_names([s.label for s in BIASES])} add no vectors at all. Each adds a number to every attention score that "
        f"depends on how far back the key sits: {_what_each_does(BIASES)}. A score lowered by distance gives far-away "
        "tokens less attention."
        + (f" More schemes act inside attention: {_what_each_does(MORE_IN_ATTENTION)}." if MORE_IN_ATTENTION else ""),
        "Each line is one head. ALiBi's lines are straight and fixed before any training: a steep head marks far keys "
        "down most, so it leans hardest towards recent tokens, though what it attends to still depends on its scores; "
        "a gentle head hardly minds distance. T5's bias is flat within each distance bucket, so it steps where a "
        "bucket ends; FIRE's is a learned curve of the log distance. Those two are learned: an untrained model's are "
        "close to zero.",
        "bias",
        further=(page_named("attention").file, "Every scheme that acts inside attention, on your sentence"),
    ),
    Step(
        "What training learned",
        "An untrained table is random noise. Training on text tends to give neighbouring positions similar rows, "
        "and tokens used alike similar token rows.",
        "Compare the table with the same table at step 0: where training shaped the rows it draws a band along the "
        "diagonal. The line under the figure says how alike neighbouring rows and rows far apart are in this model, "
        "and which rows never trained.",
        "table",
    ),
    Step(
        "Train short, test long",
        "The shipped models were trained on windows of a fixed length. Read on longer text than that, a scheme "
        "may keep its loss, lose some of what it learned, or not run at all; the sentences under the figure say "
        "which does what, measured.",
        "A line that ends in an × is a table that has run out of rows. Look at which curve stays flattest at the "
        "right edge, and how far the steepest one still sits below the grey unigram line.",
        None,
    ),
    Step(
        "The twist: the mask leaks order",
        "A model with no positions is order-blind only in its first layer. Each earlier token can see only "
        "the tokens before it, so from layer 2 on the model knows something about order after all.",
        "Under “none”, the full model's next-token probabilities shift after the shuffle, though layer 1 did not "
        "move; the top guess may or may not change.",
        NO_POSITIONS,
        further=(page_named("inside").file, "Inside the model: where that order ends up, layer by layer"),
    ),
)
