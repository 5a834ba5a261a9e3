"""The package's file list, which pyproject.toml cannot say: every lpos package, and the shipped models.

The top-level checkpoints/ folder is installed as lpos/checkpoints/shipped (its *.pt models and views and
its model card; never a training run's *.resume.pt), so `pip install .` carries the models and
lpos.checkpoints.available() finds them outside the checkout. Everything else is in pyproject.toml.
"""
from setuptools import find_packages, setup

SHIPPED = "lpos.checkpoints.shipped"

setup(packages=[*find_packages(include=["lpos*"]), SHIPPED], package_dir={SHIPPED: "checkpoints"})
