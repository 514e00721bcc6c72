"""The systemd units and their configuration templates, installed as package data with primacy.

``primacy systemd install`` (``cli/systemd_units.py``) writes them from here: ``systemd/`` of a
checkout, ``primacy/systemd/`` of an installed package.
"""
