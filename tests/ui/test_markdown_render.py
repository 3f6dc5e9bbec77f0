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


def _text(html_text: str) -> str:
    import re

    return re.sub(r"<[^>]*>", "", html_text)


def test_drafted_text_is_coloured_without_changing_the_markdown() -> None:
    import random

    from localchat.ui.markdown_render import mark_drafted

    md = (
        "# Title line\n\n- item **bold** and [a link](https://example.org/x)\n1. first `code`\n\n"
        "| a | b |\n|---|---|\n| 1 | 2 |\n\n```python\ndef f(x):\n    return x * 2\n```\n> quoted"
    )
    plain_blocks: list[str] = []
    plain = render_message(md, COLORS, plain_blocks)
    rng = random.Random(3)
    for _ in range(200):
        flags = [rng.random() < 0.5 for _ in md]
        blocks: list[str] = []
        html_text = render_message(mark_drafted(md, flags), COLORS, blocks)
        assert _text(html_text) == _text(plain)  # same words, same structure
        assert blocks == plain_blocks  # "Copy" copies the code without marks
        assert html_text.count("<h1") == 1 and "font-weight:700" in html_text
        assert 'href="https://example.org/x"' in html_text
        assert "\ue000" not in html_text and "\ue001" not in html_text
    all_drafted = render_message(mark_drafted(md, [True] * len(md)), COLORS, [])
    assert f"color:{COLORS.drafted};" in all_drafted
    assert f"color:{COLORS.drafted};" not in plain


def test_code_in_a_known_language_is_coloured_in_each_theme() -> None:
    import dataclasses
    import re

    from pygments.styles import get_style_by_name
    from pygments.token import Keyword

    from localchat.ui.markdown_render import DARK_CODE_STYLE, LIGHT_CODE_STYLE

    md = "```python\ndef greet(name):\n    return f'hi {name}' if name < 3 else None\n```"
    light = render_message(md, COLORS, blocks := [])
    dark = render_message(md, dataclasses.replace(COLORS, dark=True), [])
    assert blocks == ["def greet(name):\n    return f'hi {name}' if name < 3 else None"]
    keyword = {
        name: "#" + get_style_by_name(name).style_for_token(Keyword)["color"].lower()
        for name in (LIGHT_CODE_STYLE, DARK_CODE_STYLE)
    }
    assert keyword[LIGHT_CODE_STYLE] != keyword[DARK_CODE_STYLE]
    assert f'<span style="color: {keyword[LIGHT_CODE_STYLE]}' in light.lower()
    assert f'<span style="color: {keyword[DARK_CODE_STYLE]}' in dark.lower()
    assert "&lt;" in light and " < " not in light  # still escaped
    assert re.sub(r"<[^>]+>", "", light.split("<pre")[1].split(">", 1)[1].split("</pre>")[0]).startswith(
        "def greet(name):\n"
    )


def test_an_unknown_or_unnamed_language_stays_plain() -> None:
    for md in ("```\nx = 1\n```", "```nosuchlanguage\nx = 1\n```"):
        html = render_message(md, COLORS, [])
        assert "<pre" in html and "x = 1" in html
        assert "<span style=\"color: #" not in html


def _plain(html: str) -> str:
    """The HTML's tags and text with the styles left out, for asserting the structure."""
    import re

    return re.sub(r' style="[^"]*"', "", html)


def test_a_poems_single_line_breaks_stay_line_breaks(qapp) -> None:
    """A poem showed as two paragraphs, each of its lines run into the next."""
    poem = "Roses are red,\nViolets are blue,\nSugar is sweet.\n\nAnd so are you,\nsaid the poem."
    html = _plain(render_message(poem, COLORS, []))
    assert html.count("<p>") == 2  # the blank line still parts the stanzas
    assert "<p>Roses are red,<br />Violets are blue,<br />Sugar is sweet.</p>" in html
    assert "<p>And so are you,<br />said the poem.</p>" in html


def test_lists_headings_tables_and_code_keep_their_shape_with_line_breaks(qapp) -> None:
    md = ("Steps:\n- one\n- two\n  more of two\n1. first\n2. second\n\n# Heading\nText under it\n"
          "\n| a | b |\n|---|---|\n| 1 | 2 |\n\nSetext\n---\n\n```python\nx = 1\ny = 2\n```\nAfter.")
    blocks: list[str] = []
    html = _plain(render_message(md, COLORS, blocks))
    assert "<p>Steps:</p>" in html  # the list was not swallowed into the line above
    assert "<li>one</li>" in html and "<li>two<br />more of two</li>" in html
    assert "<li>first</li>" in html and "<li>second</li>" in html
    assert "Heading</span></h1>" in html and "<p>Text under it</p>" in html
    assert html.split("Setext")[0].count("<td>") == 4  # the table's rows are not cut by a break
    assert "Setext</span></h2>" in html
    assert blocks == ["x = 1\ny = 2"]
    assert "<br />" not in html.split("<pre")[1].split("</pre>")[0]  # code keeps its own lines
