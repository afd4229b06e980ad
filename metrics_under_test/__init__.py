"""Metric adapters: the registry of metrics on trial, their backends and the custom-metric protocol."""
