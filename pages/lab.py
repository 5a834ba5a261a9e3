"""Lab: train a tiny model of any scheme on a task that needs positions, watch it learn, test it past its window."""
import streamlit as st

from lpos import ui
from lpos.ui import lab

ui.selection()
st.title("Lab: train your own, test it longer")
st.caption("Pick a scheme and a task, train a tiny model for a few seconds, then see how it does on inputs up to "
           "four times longer than any it trained on. Each run joins the chart below, so you build your own "
           "length-generalization experiment (as Kazemnejad et al. 2023 and the ALiBi paper did), and its model "
           "joins the sidebar's Model box, so every other page can draw it.")

args = lab.run_form()
if args is not None:
    lab.start(args)
if lab.pending():
    st.subheader("Training")
    st.caption("Runs train in a worker process, one at a time per worker; yours goes on if you open another page.")
    lab.live()
lab.results()
