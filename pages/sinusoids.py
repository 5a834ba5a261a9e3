import streamlit as st

st.title("sinusoids")
st.info("This page is being built.")
