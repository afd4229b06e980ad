"""The generator's self-evaluation: an LLM judge reads each step's reasoning summary and finds the
first step where the editing model acknowledges the noise it is accumulating."""
