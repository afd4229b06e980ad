"""xdist scheduling: keeps one metric's cases on one worker, so each model loads once
(`--dist loadgroup` is broken on pytest 9.2).
"""
