import streamlit as st

st.title("lesson")
st.info("This page is being built.")
