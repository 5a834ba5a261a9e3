import streamlit as st

st.title("rope_alibi")
st.info("This page is being built.")
