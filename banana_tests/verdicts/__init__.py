"""Verdicts: normalise scores, take the gaps Δi, decide each case and trend, aggregate the
failure matrix and compare it with a baseline. Hands verdicts to the session and the reports.
"""
