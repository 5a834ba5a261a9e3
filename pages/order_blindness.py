import streamlit as st

st.title("order_blindness")
st.info("This page is being built.")
