import streamlit as st

st.title("extrapolation")
st.info("This page is being built.")
