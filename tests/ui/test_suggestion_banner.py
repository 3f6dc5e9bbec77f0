"""ui.suggestion_banner: the offer's text is escaped, "Get" asks for the entry, "Not now" hides it."""

from __future__ import annotations

from localchat.ui.suggestion_banner import SuggestionBanner


def test_get_asks_for_the_entry_and_not_now_hides(qtbot) -> None:
    banner = SuggestionBanner()
    qtbot.addWidget(banner)
    asked: list[str] = []
    banner.model_requested.connect(asked.append)
    banner.offer("Faster <here> & bigger.", "entry-32b", "Big <32B>")
    assert not banner.isHidden()
    assert "&lt;here&gt; &amp; bigger." in banner.text() and "Get Big &lt;32B&gt;" in banner.text()
    banner.linkActivated.emit("dismiss")
    assert banner.isHidden() and asked == []
    banner.offer("Again.", "entry-32b", "Big")
    banner.linkActivated.emit("get")
    assert banner.isHidden() and asked == ["entry-32b"]
