"""The report's HTML page and its figures (matplotlib, imported inside the functions that draw):
what `banana-tests report` writes for people beside the CSV and Markdown. No suite run imports it.
"""
