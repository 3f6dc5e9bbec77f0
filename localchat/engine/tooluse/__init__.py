"""Tool calls and reasoning at the engine level: pure Python, no llama.cpp, so the HTTP API may import it.

- ``formats``: the output formats of the catalog's families, told from the chat template.
- ``validate``: a request's tools and tool_choice checked, each problem a sentence.
- ``render``: messages, tool calls and results as chat templates expect them, and the
  generic fallback (tools described in the system message) for templates that do not know tools.
- ``jsonscan`` and ``parser``: the reply read as it streams into content, reasoning and calls.
- ``grammar``: the Lark grammar (llguidance's dialect) a call must follow, for the grammar engine.
- ``plan``: what one request asks of its reply (the tools rendered, the calls read, the reader).
"""
