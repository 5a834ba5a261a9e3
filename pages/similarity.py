"""Similarity: which positions and tokens look alike to the model, and the path training carves."""
import streamlit as st

from lpos import ui
from lpos.analysis.embeddings import token_counts
from lpos.analysis.similarity import nearest_positions, neighbour_sentence, position_rows
from lpos.analysis.lengths import training_length
from lpos.analysis.scheme_views import names
from lpos.positions import schemes_with
from lpos.tokenizer import visible
from lpos.ui import coverage, embeddings, similarity
from lpos.ui.export import chart

NEAREST_POSITIONS = 10  # rows listed for "nearest positions of position"

NO_ROWS = (f"Nearest positions and the PCA path need position rows; this scheme has none (choose "
           f"{names(schemes_with('rows')).replace(' and ', ' or ')}).")

selection = ui.selection()
model, config = selection.model.model, selection.model.model.config
scheme = model.scheme
st.title("Similarity: which rows look alike")
st.caption("Cosine similarity compares the direction of two rows: 1 = same direction, 0 = unrelated, −1 = opposite. "
           "Random rows are all near 0 to each other; training pulls related rows together.")


def rows_never_trained(length: int) -> None:
    """The table's second limit, for a model trained on windows shorter than its table."""
    limit = coverage.trained_rows(selection.model)
    if limit is None:
        short = coverage.short_window_model()
        window = training_length(selection.model.meta, model)
        st.caption((f"Every row of this table was read in every training batch (windows of {window} tokens)."
                    if not config.random_positions else
                    f"Training read this table's {config.block_size:,} rows at random: each window of {window} tokens "
                    f"took a sorted random {window} of them (randomized positions, Ruoss et al. 2023), so rows far "
                    f"past {window} trained too."
                    + (f" The slider shows the first {length}: raise it to {config.block_size:,} to see them all."
                       if length < config.block_size else ""))
                   + (f" Pick {short.label} in the sidebar to see rows that training never reached." if short else ""))
        return
    st.subheader("Rows training never reached")
    fig, reading, source = coverage.drift_view(selection.model, length)
    chart(fig, name="similarity-rows-never-trained", model=selection.model, key="sim_coverage")
    for line in reading:
        st.markdown(f"- {line}")
    st.caption(f"This model trained on windows of at most {limit} tokens, so rows {limit} to {config.block_size - 1} "
               "were never read and got no gradient. Weight decay scales every matrix a little at each step; a row "
               f"with no gradient is only scaled, never turned. Step-0 table: {source}."
               + (f" The slider shows {length} rows: raise it past {limit} to see the rows that never trained."
                  if length <= limit else ""))


@st.fragment
def positions() -> None:
    """The position rows: the slider and everything it drives (no sentence in here)."""
    st.subheader("Position × position")
    if not scheme.adds_rows and not scheme.shows("rotation"):  # nothing here depends on a length: no slider
        where = embeddings.where_it_acts(scheme)
        st.info(where.sentence, icon=":material/info:")
        st.page_link(where.page, label=where.link, icon=where.icon)
        st.info(NO_ROWS, icon=":material/info:")
        return
    limit = model.max_input_length or 1024
    asked = st.query_params.get("positions", "")  # a link may open the map at its own size
    whole = limit if config.random_positions else min(128, limit)  # a randomized table: every row trained
    start = int(asked) if asked.isdigit() and 2 <= int(asked) <= limit else whole
    length = st.slider("Positions", min_value=2, max_value=max(2, limit), value=start, key=f"sim_length_{limit}",
                       help="Above 256 positions the map is block-averaged so the page stays light.")
    if scheme.adds_rows:
        maps = similarity.position_maps(selection.model, length, with_untrained=scheme.has_table and selection.model.trained,
                                        apart=True)
        for column, key, panel in zip(st.columns(len(maps), gap="small"), ("sim_positions", "sim_positions_start"), maps):
            chart(panel, name=f"similarity-{key.replace('sim_positions', 'position-map')}", where=column, model=selection.model, key=key)  # side by side; a phone stacks them
        band, structure = similarity.position_band(selection.model, length)
        length_drawn = len(position_rows(model, length))  # a table stops at its last row
        at = ", ".join(f"{structure[key]:.2f} at distance {key.rsplit('_', 1)[1]}"
                       for key in ("cosine_at_1", "cosine_at_16", "cosine_at_64") if key in structure)
        if scheme.has_table and selection.model.trained:
            st.caption(f"Trained (first map): mean cosine {at}; "
                       f"{neighbour_sentence(structure['neighbour_distance'], length_drawn)}.\n"
                       + similarity.second_map_sentence(selection.model))
        elif scheme.has_table:
            st.caption("Untrained: random rows are nearly orthogonal, so the map is speckle around 0 with a diagonal of 1s.\n"
                       "Pick a trained learned model to see the band training carves.")
        elif scheme.shows("sinusoids"):
            st.caption(f"The {scheme.label.lower()} table has the band by construction (mean cosine {at}): similarity "
                       "depends on distance only, so it is the same along every diagonal.")
        else:
            st.caption(f"{scheme.label}'s rows: mean cosine {at}.")
        chart(band, name="similarity-band", model=selection.model, key="sim_band")
        st.caption("The band along the diagonal, as a line: the mean cosine of all pairs of rows that are that many "
                   "positions apart.")
        if scheme.has_table and selection.model.trained:
            rows_never_trained(length)
    elif scheme.shows("rotation"):
        head_dim = config.n_embd // config.n_head
        kernel_map, kernel_line, kernel_reading = similarity.rope_kernel(length, head_dim, base=config.rope_base)
        chart(kernel_map, name="similarity-position-map", model=selection.model, key="sim_positions")
        st.caption(f"{scheme.label} adds no rows. Its counterpart: the mean of cos((m − n)·ωᵢ) over the {head_dim // 2} pairs of "
                   f"this model's {head_dim}-column heads (base {config.rope_base:,g}, this model's), the cosine between "
                   "one vector rotated to positions m and n when all its pairs have the same length.\n"
                   "Every diagonal is constant: the kernel depends on m − n only.")
        chart(kernel_line, name="similarity-kernel-by-offset", model=selection.model, key="sim_kernel")
        st.caption(kernel_reading)

    if scheme.adds_rows:
        table = position_rows(model, length)
        position = st.number_input("Nearest positions of position", min_value=0, max_value=len(table) - 1,
                                   value=min(10, len(table) - 1), key=f"sim_position_{len(table)}")
        st.dataframe(nearest_positions(table, int(position), k=min(NEAREST_POSITIONS, len(table) - 1)), hide_index=True,
                     key="sim_position_neighbours")
        st.caption(f"Among the first {len(table)} position rows (the slider above); "
                   f"{neighbour_sentence(structure['neighbour_distance'], len(table))}.")

        st.subheader("The path of the position rows (PCA)")
        if len(table) < 4:
            st.info("PCA needs at least 4 positions; raise the slider above.")
        else:
            flat, solid, reading = similarity.position_pca(selection.model, length)
            left, right = st.columns(2)
            chart(flat, name="similarity-pca-2d", where=left, model=selection.model, key="sim_pca2")
            # closed, the 3-D view sends nothing: a WebGL scene costs a browser without a GPU ~0.8 s per slider step
            solid_box = right.expander("The same path in 3-D (drag to turn it)", key="sim_pca3_open", on_change="rerun")
            if solid_box.open:
                chart(solid, name="similarity-pca-3d", where=solid_box, model=selection.model, key="sim_pca3")
            st.caption(reading)
    else:
        st.info(NO_ROWS, icon=":material/info:")


positions()

ids = ui.usable_ids(selection)
tokenizer = selection.model.tokenizer  # the model's own: a character model's chips are characters
tokens = [visible(t) for t in tokenizer.token_strings(ids)]
view = embeddings.embedding_view(selection.model, ids)


@st.fragment
def token_map() -> None:
    """The sentence's token x token map and its own choice of rows."""
    st.subheader("Token × token, for your sentence")
    options = ["token rows"] + (["token + position rows"] if view.position_rows is not None else [])
    if len(options) > 1:
        which = st.radio("Rows", options, horizontal=True, key="sim_rows")
    else:  # one choice is no choice: say it instead of offering it
        which = options[0]
        st.markdown(f"Rows: **{which}** ({selection.scheme} adds no position rows).")
    rows = view.token_rows if which == "token rows" else view.summed_rows
    chart(similarity.token_map(rows, title=which, tokens=tokens), name="similarity-token-map", model=selection.model, key="sim_tokens")
    st.caption("A repeated token has cosine 1 with itself in token rows; adding position rows makes the copies differ.\n"
               + ("This scheme adds no position rows, so only token rows exist here." if view.position_rows is None else
                  "Switch between token rows and summed rows to see the position rows at work."))


@st.fragment
def neighbours() -> None:
    """Nearest tokens: the word, how many, and the table they drive."""
    st.subheader("Nearest neighbours")
    left, right = st.columns([2, 1])
    typed = left.text_input("Type a word (its first token is used), or leave empty to pick from your sentence",
                            key="sim_word", max_chars=100)
    k = right.slider("How many", min_value=1, max_value=50, value=10, key="sim_k")
    typed_ids, dropped = tokenizer.encode_known(typed) if typed.strip() else ([], 0)
    if dropped:
        st.caption(f"{dropped} character{'s' if dropped != 1 else ''} of that text {'are' if dropped != 1 else 'is'} "
                   f"not in {tokenizer.name} and {'were' if dropped != 1 else 'was'} left out"
                   + ("." if typed_ids else "; picking from your sentence instead."))
    if typed_ids:
        token_id = typed_ids[0]
        if len(typed_ids) > 1:
            st.caption(f"That text is {len(typed_ids)} tokens; showing the first, “{visible(tokenizer.token_strings(typed_ids[:1])[0])}”.")
    else:
        # keyed by the sentence: a new sentence gets a new box, so its label cannot keep the old sentence's token
        position = st.selectbox("Token from your sentence", range(len(ids)),
                                key=f"sim_token_position_{hash(tuple(ids)) & 0xFFFFFFFF:08x}",
                                format_func=lambda p: f"{p}: {tokens[p]}")
        token_id = ids[position]
    counts = token_counts(selection.model.meta)
    st.dataframe(similarity.nearest_tokens(selection.model, token_id, k=k), hide_index=True, key="sim_neighbours")
    if not selection.model.trained:
        st.warning("Untrained model: every token row is still random, so these neighbours are random too.", icon=":material/casino:")
    elif counts is None:
        st.caption("This model has no training counts: how often each token was trained on is not known for this model.")
    elif counts.get(token_id, 0) == 0:
        st.warning(f"“{visible(tokenizer.token_strings([token_id])[0])}” was never seen in training: its row is still random, "
                   "so its neighbours mean nothing.", icon=":material/casino:")
    st.caption(f"Search runs over all {tokenizer.vocab_size:,} tokens of {tokenizer.name}, the tokenizer's vocabulary."
               + (" “count” is how often the token occurs in the training stories; training drew random windows from "
                  "them, so a rare token may never have been in a batch.\nRows of tokens that never occur (count 0) are "
                  "still their random initial rows, so they can turn up by chance." if counts is not None else ""))


token_map()
neighbours()
