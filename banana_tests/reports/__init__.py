"""Rendering the failure matrix for people: CSV, Markdown, figures and one HTML page."""
