"""The sinusoidal table taken apart: its frequency bands, their wavelengths, and why the dot
product of two rows depends only on their distance.

Row t holds, for every pair i, (sin(t w_i), cos(t w_i)) with w_i = base^(-2i/width). The dot
product of rows t and t+k is sum_i [sin(t w_i) sin((t+k) w_i) + cos(t w_i) cos((t+k) w_i)]
= sum_i cos(k w_i): t has cancelled, only the distance k is left.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd
import torch

from lpos.checkpoints.families import bases_by_layer_words
from lpos.positions import PositionScheme, pair_frequencies, sinusoidal_table, wavelengths


@dataclass(frozen=True)
class TableView:
    values: np.ndarray  # (rows, columns) shown, block-averaged when the table is larger than the limits
    row_block: int  # table rows averaged into one shown row (1: every row shown as it is)
    column_block: int  # table columns averaged into one shown column
    length: int  # rows of the full table
    width: int  # columns of the full table


def block_average(matrix: np.ndarray, *, max_rows: int, max_columns: int) -> tuple[np.ndarray, int, int]:
    """Average square-ish blocks so the result has at most max_rows x max_columns cells.

    Returns the averaged matrix and the block size along each axis; a last, partial block is the
    mean of the cells it has.
    """
    rows, columns = matrix.shape
    row_block, column_block = max(1, math.ceil(rows / max_rows)), max(1, math.ceil(columns / max_columns))
    if row_block == column_block == 1:
        return matrix, 1, 1
    row_starts, column_starts = np.arange(0, rows, row_block), np.arange(0, columns, column_block)
    sums = np.add.reduceat(np.add.reduceat(matrix.astype(np.float64), row_starts, axis=0), column_starts, axis=1)
    counts = np.outer(np.diff(np.append(row_starts, rows)), np.diff(np.append(column_starts, columns)))
    return (sums / counts).astype(np.float32), row_block, column_block


def table_view(length: int, width: int, *, base: float = 10000.0, max_rows: int = 256, max_columns: int = 256) -> TableView:
    """The sinusoidal table [length, width], block-averaged down to the given size for drawing."""
    table = sinusoidal_table(length, width, base).numpy()  # (length, width)
    values, row_block, column_block = block_average(table, max_rows=max_rows, max_columns=max_columns)
    return TableView(values, row_block, column_block, length, width)


def frequency_bands(length: int, width: int, *, pairs: list[int], base: float = 10000.0) -> pd.DataFrame:
    """Long table of the sin and cos columns of the chosen pairs: position, pair, part, value."""
    table = sinusoidal_table(length, width, base).numpy()  # (length, width)
    frames = []
    for pair in pairs:
        if not 0 <= pair < width // 2:
            raise ValueError(f"pair {pair} is out of range; width {width} has pairs 0 to {width // 2 - 1}")
        for part, column in (("sin", 2 * pair), ("cos", 2 * pair + 1)):
            frames.append(pd.DataFrame({"position": np.arange(length), "pair": pair, "part": part,
                                        "column": column, "value": table[:, column]}))
    return pd.concat(frames, ignore_index=True)


def wavelength_frame(width: int, *, base: float = 10000.0) -> pd.DataFrame:
    """Per pair: its columns, angular frequency (radians per position) and wavelength (positions per turn)."""
    pairs = np.arange(width // 2)
    return pd.DataFrame({
        "pair": pairs,
        "columns": [f"{2 * i}, {2 * i + 1}" for i in pairs],
        "frequency": pair_frequencies(width, base).numpy(),
        "wavelength": wavelengths(width, base).numpy(),
    })


def offset_dot_products(width: int, *, starts: list[int], max_offset: int, base: float = 10000.0) -> pd.DataFrame:
    """Dot product of rows t and t+k for each start t and offsets k = 0..max_offset, from the table itself.

    Columns: start, offset, dot. The curves for different starts coincide (see the module docstring).
    """
    if min(starts, default=0) < 0 or max_offset < 0:
        raise ValueError("starts and max_offset must not be negative")
    length = max(starts) + max_offset + 1
    table = sinusoidal_table(length, width, base).to(torch.float64)  # (length, width)
    offsets = np.arange(max_offset + 1)
    frames = []
    for start in starts:
        rows = table[start : start + max_offset + 1]  # (max_offset+1, width)
        frames.append(pd.DataFrame({"start": start, "offset": offsets, "dot": (rows @ table[start]).numpy()}))
    return pd.concat(frames, ignore_index=True)


def slowest_wavelength(width: int, *, base: float = 10000.0) -> float:
    """The last pair's wavelength, 2π·base^((width−2)/width): 87% of 2π·base at width 128, 10% at width 8."""
    return 2 * math.pi * base ** ((width - 2) / width)


def base_help(width: int, *, base: float) -> str:
    """The Base box's help, computed for the width shown (the slowest wavelength is not 2π·base)."""
    slowest = slowest_wavelength(width, base=base)
    return (f"10000 in the original paper. It sets the slowest wavelength, 2π·base^((width−2)/width): at width {width} "
            f"and this base, {slowest:,.0f} positions, {slowest / (2 * math.pi * base):.0%} of 2π·base.")


def motion(radians: float) -> str:
    """How far a pair turns, as a learner reads it: "turns 84°" under one turn, "goes round 20.2 times" past it."""
    turns = radians / (2 * math.pi)
    return f"turns {math.degrees(radians):.0f}°" if turns < 1 else f"goes round {turns:,.1f} times"


def bands_sentence(length: int, width: int, *, pairs: list[int], base: float = 10000.0) -> str:
    """How far the fastest and the slowest drawn pair turn over positions 0 … length−1 (at the defaults
    pair 31 turns 84°: it has not "barely started")."""
    frequencies = pair_frequencies(width, base).numpy()
    span, low, high = max(length - 1, 0), min(pairs), max(pairs)
    if span == 0:
        return "One position: no pair has turned yet. Drag Length up to see them turn."
    said = f"From position 0 to {span}, pair {low} {motion(span * float(frequencies[low]))}"
    return said + (f" and pair {high} {motion(span * float(frequencies[high]))}." if high != low else ".")


def table_sentence(length: int, width: int, *, base: float = 10000.0, max_rows: int = 256,
                   max_columns: int = 256) -> str:
    """The table's caption from its own wavelengths (at base 2 the last pair repeats every 12.4 positions: it
    does not "barely change over thousands"), and what a drawn cell averages when the table is block-averaged."""
    slowest, span = slowest_wavelength(width, base=base), max(length - 1, 0)
    turned = span * float(pair_frequencies(width, base).numpy()[-1])
    said = (f"Pair 0 (the left two columns) repeats every 2π ≈ 6.3 positions; the right-most pair, columns "
            f"{width - 2} and {width - 1}, every {slowest:,.1f}, so from position 0 to {span:,} it {motion(turned)}"
            + (": next to the left columns it barely changes." if turned < math.pi / 4 else ".")
            + "\nEach row is a different barcode, so the model can read off where a token sits.")
    if span == 0:
        said = (f"One position, so one row. Pair 0 (the left two columns) repeats every 2π ≈ 6.3 positions and the "
                f"right-most pair every {slowest:,.1f}: drag Length up to see them turn.")
    rows, columns = max(1, math.ceil(length / max_rows)), max(1, math.ceil(width / max_columns))
    if rows > 1 or columns > 1:
        parts = [f"{n} {what}" for n, what in ((rows, "rows"), (columns, "columns")) if n > 1]
        said += (f" The table is too large to draw cell by cell: each drawn cell is the mean of {' by '.join(parts)}, "
                 "so columns that change faster than a block fade towards white.")
    return said


def _number(value: float) -> str:
    """10,000; 1,000,000,000; 2.5."""
    return f"{value:,.0f}" if float(value).is_integer() else f"{value:,g}"


def ordinal(n: int) -> str:
    return f"{n}{'th' if 10 <= n % 100 <= 20 else {1: 'st', 2: 'nd', 3: 'rd'}.get(n % 10, 'th')}"


def model_bases_clause(model_bases: tuple[float, ...], base: float) -> str:
    """What the sidebar model's own RoPE bases (one per layer) mean for the ladder at `base`: "" when every layer
    uses `base`."""
    distinct = sorted(set(model_bases))
    if not distinct or distinct == [base]:
        return ""
    if len(distinct) == 1:
        return (f" (this model's own RoPE base is {_number(distinct[0])}, not the {_number(base)} set here, so its "
                "heads' wavelengths are not these)")
    return (f" (this model's layers turn with {len(distinct)} RoPE bases: {bases_by_layer_words(model_bases)}; "
            + (f"only those with base {_number(base)} turn at these wavelengths)" if base in distinct else
               f"none with the {_number(base)} set here)"))


def rope_sentence(width: int, head_columns: int, *, base: float = 10000.0, model_bases: tuple[float, ...] = (),
                  model_rotation: PositionScheme | None = None) -> str:
    """How RoPE's wavelengths relate to this table's: a RoPE head of d columns uses base^(−2i/d) over its
    d/2 pairs, which are every (width/d)-th pair of a width-column table when d divides width and both use
    the same base. `model_bases`: the sidebar model's RoPE base in each of its layers; `model_rotation`: its own
    rotating scheme (as configured: a share of columns or pairs), when it rotates."""
    if head_columns % 2 or head_columns < 2:
        return "RoPE uses the same formula over a head's columns."
    if width == head_columns:
        same = "; at the base set here, exactly these wavelengths"
    elif width % head_columns == 0:
        same = (f"; at the base set here, those are the wavelengths of every {ordinal(width // head_columns)} of these "
                f"{width // 2} pairs")
    else:
        same = (f"; at the base set here, a ladder of {head_columns // 2} wavelengths from 2π to "
                f"{slowest_wavelength(head_columns, base=base):,.0f}, not this table's {width // 2}")
    same += model_bases_clause(model_bases, base)
    if model_rotation is not None:
        turning = int((model_rotation.head_frequencies(head_columns, None, base) > 0).sum())
        rotated = model_rotation.rotated_width(head_columns)
        if turning < head_columns // 2:
            same += (f"; this model's {model_rotation.label} turns only {turning} of them"
                     + (f", by base^(−2i/{rotated}) over its first {rotated} columns" if rotated < head_columns else
                        ", the fastest") + ", and the rest never")
    return (f"RoPE uses the same formula over one head's columns: this model's heads have {head_columns} columns, "
            f"so a RoPE head turns {head_columns // 2} pairs by base^(−2i/{head_columns}){same}.")
