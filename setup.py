"""Only for pip's legacy editable install (pyproject.toml says why); the metadata is
pyproject.toml's."""
from setuptools import setup

setup()
