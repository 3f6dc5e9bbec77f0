from localchat.ui.markdown_render import Colors, render_message, split_fences

COLORS = Colors("#000000", "#777777", "#eeeeee", "#cccccc", "#0000ff", "#f5f5f5")


def test_split_fences_separates_prose_and_code() -> None:
    md = "Here:\n\n```python\nprint('hi')\n```\n\nDone."
    segments = split_fences(md)
    assert [s.kind for s in segments] == ["text", "code", "text"]
    assert segments[1].text == "print('hi')"
    assert segments[1].language == "python"


def test_unclosed_fence_runs_to_the_end_while_streaming() -> None:
    segments = split_fences("Look:\n```js\nlet a = 1;\nlet b")
    assert segments[-1].kind == "code"
    assert segments[-1].text == "let a = 1;\nlet b"


def test_code_blocks_get_copy_links_and_escaped_text() -> None:
    blocks: list[str] = []
    html = render_message("**bold**\n\n```\na < b && c\n```", COLORS, blocks)
    assert blocks == ["a < b && c"]
    assert 'href="copy:0"' in html
    assert "a &lt; b &amp;&amp; c" in html
    assert "font-weight:700" in html


def test_user_text_is_shown_as_typed() -> None:
    html = render_message("**not bold** <b>", COLORS, [], plain=True)
    assert "**not bold** &lt;b&gt;" in html
