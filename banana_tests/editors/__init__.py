"""Editors: editing models and the generator that turn a seed image into a trajectory, step by
step, and write it as a canonical set. Hands trajectory sets to the trajectories stage.
"""
