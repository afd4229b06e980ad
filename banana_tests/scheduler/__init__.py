"""xdist scheduling: a metric's cases spread over the workers a seed image at a time, each
worker building each model once (`--dist loadgroup` is broken on pytest 9.2).
"""
