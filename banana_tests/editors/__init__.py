"""Editors turn one image into the next step of a trajectory."""
