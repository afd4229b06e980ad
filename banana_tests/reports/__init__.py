"""Reports: read JUnit XML back into verdicts and render the failure matrix for people: CSV,
Markdown, the paper's figures and one HTML page. The last stage; nothing imports it but commands.
"""
