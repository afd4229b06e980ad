"""Scoring: run a metric over the planned images in batches, with the score cache and the
process tuning that keeps memory flat. Hands raw scores to the verdicts.
"""
