"""Reports: read JUnit XML back into verdicts and render the failure matrix for people: CSV,
Markdown, the paper's figures and one HTML page. The last stage of the data flow: only the
scheduler, the core, the session and the commands sit above it.
"""
