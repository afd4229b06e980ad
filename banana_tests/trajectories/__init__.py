"""Trajectories: read a trajectory set from any source into canonical records, select and plan
which records the cases need, and decode their images. Hands records and images to scoring.
"""
