from localchat.engine.types import EngineInfo, FinishReason, GenerationResult, SpeculationState, TokenEvent
from localchat.ui.status_bar import REFRESH_MS, SpeculationStatusBar
from tests.ui.fakes import ON, model_info, stats


def test_refreshes_at_least_four_times_a_second_while_generating(qtbot) -> None:
    bar = SpeculationStatusBar(memory_probe=lambda: 300_000_000)
    qtbot.addWidget(bar)
    assert REFRESH_MS <= 250
    bar.show_engine_info(EngineInfo("CPU", model_info(), None, 4096, 2, 0, ON))
    bar.generation_started()
    assert bar.timer.isActive()
    bar.show_progress(TokenEvent("hi", 10, 4, stats(10, 0.5, passes=4, drafted=8, accepted=6), ON))
    qtbot.waitUntil(lambda: bar.rate_label.text() == "20.0 tok/s", timeout=1000)
    assert bar.acceptance_length_label.text() == "Acceptance length 2.50"
    assert bar.acceptance_rate_label.text() == "Acceptance rate 75%"
    assert bar.context_label.text() == "Context 30 / 4,096"
    assert bar.memory_label.text() == "Engine 300.0 MB"
    assert bar.backend_label.text() == "CPU"
    assert bar.speculation_text == "Draft: Fake-0.1B"
    bar.generation_finished(GenerationResult("x", FinishReason.STOP, stats(20, 1.0, 10, 20, 10), ON))
    assert not bar.timer.isActive()
    assert bar.last_reply_label.text() == "Last reply: 20.0 tok/s, acceptance length 2.00"


def test_one_click_toggles_speculation_for_the_next_reply(qtbot) -> None:
    bar = SpeculationStatusBar()
    qtbot.addWidget(bar)
    with qtbot.waitSignal(bar.speculation_toggled) as blocker:
        bar.speculation_button.click()
    assert blocker.args == [False]
    assert "off" in bar.speculation_text
    # It looks like a toggle: framed, and pressed in exactly while speculation is on.
    assert not bar.speculation_button.autoRaise() and bar.speculation_button.isCheckable()
    assert not bar.speculation_button.isChecked()
    bar.speculation_button.click()
    assert bar.speculation_enabled and bar.speculation_button.isChecked()
    bar.set_speculation_enabled(False)
    assert not bar.speculation_button.isChecked()


def test_off_shows_the_reason(qtbot) -> None:
    bar = SpeculationStatusBar()
    qtbot.addWidget(bar)
    state = SpeculationState(active=False, drafter="off", reason="the drafter's vocabulary differs")
    bar.generation_finished(GenerationResult("x", FinishReason.STOP, stats(5), state))
    assert bar.speculation_text == "Speculation: off (the drafter's vocabulary differs)"
    assert bar.speculation_button.sizeHint().width() <= 340


def test_paused_state_is_shown_with_its_reason_and_the_toggle_still_wins(qtbot) -> None:
    bar = SpeculationStatusBar()
    qtbot.addWidget(bar)
    bar.show_engine_info(EngineInfo("CPU", model_info(), None, 4096, 2, 0, ON))
    bar.generation_started()
    reason = "speculation paused: 0.62x at acceptance 0.55; retrying in 128 tokens"
    paused = SpeculationState(
        active=False, drafter="Fake-0.1B", reason=reason, draft_tokens=4, paused=True, speedup=0.62
    )
    bar.show_progress(TokenEvent("a", 3, 0, stats(3, 0.2), paused))
    qtbot.waitUntil(lambda: bar.speculation_text.startswith("Speculation is paused"), timeout=1000)
    sentence = (
        "Speculation is paused: on this computer the drafter costs more than it saves for this model (0.6x)."
    )
    assert bar.speculation_text == sentence
    assert sentence in bar.speculation_button.toolTip()
    bar.resize(1400, 30)
    bar.show()
    qtbot.waitUntil(lambda: bar.speculation_button.text() == "Speculation paused (0.6x)", timeout=1000)
    assert "acceptance 0.55" not in bar.speculation_button.toolTip()  # no jargon
    # The probe succeeds: the next batch says speculation runs again.
    bar.show_progress(TokenEvent("b", 3, 2, stats(6, 0.3, passes=2, drafted=4, accepted=3), ON))
    qtbot.waitUntil(lambda: bar.speculation_text == "Draft: Fake-0.1B", timeout=1000)
    # Paused again, then the user turns speculation off: the user's choice is what shows.
    bar.show_progress(TokenEvent("c", 1, 0, stats(7, 0.4), paused))
    with qtbot.waitSignal(bar.speculation_toggled) as blocker:
        bar.speculation_button.click()
    assert blocker.args == [False]
    assert bar.speculation_text == "Speculation: off (turned off)"


def test_says_where_the_target_runs_when_workers_share_it(qtbot) -> None:
    bar = SpeculationStatusBar(memory_probe=lambda: None)
    qtbot.addWidget(bar)
    bar.show_engine_info(EngineInfo("CPU", model_info(), None, 4096, 2, 0, ON, placement="local + 2 workers"))
    assert bar.backend_label.text() == "CPU · target: local + 2 workers"


PAUSED = SpeculationState(active=False, drafter="Fake-0.1B", draft_tokens=4, paused=True, speedup=0.75)


def test_the_pause_is_said_in_plain_words() -> None:
    from localchat.ui import formatting

    assert formatting.speculation_text(PAUSED, True) == (
        "Speculation is paused: on this computer the drafter costs more than it saves for this model (0.8x)."
    )
    assert formatting.speculation_short(PAUSED, True) == "Speculation paused (0.8x)"
    unmeasured = SpeculationState(active=False, drafter="Fake-0.1B", paused=True)
    assert formatting.speculation_text(unmeasured, True).endswith("saves for this model.")
    assert formatting.format_speedup(0.97) == "0.97x"  # never "1.0x" for a loss


def test_turning_speculation_back_on_in_a_paused_chat_says_it_resumes(qtbot) -> None:
    bar = SpeculationStatusBar()
    qtbot.addWidget(bar)
    bar.show_engine_info(EngineInfo("CPU", model_info(), None, 4096, 2, 0, ON))
    bar.generation_finished(GenerationResult("x", FinishReason.STOP, stats(5), PAUSED))
    assert bar.speculation_text.startswith("Speculation is paused")
    bar.speculation_button.click()  # off
    assert bar.speculation_text == "Speculation: off (turned off)"
    bar.speculation_button.click()  # on again: not the stale "paused" of the last reply
    assert bar.speculation_text == "Speculation: on from the next reply"
    bar.generation_started()
    bar.show_progress(TokenEvent("b", 3, 2, stats(6, 0.3, passes=2, drafted=4, accepted=3), ON))
    qtbot.waitUntil(lambda: bar.speculation_text == "Draft: Fake-0.1B", timeout=1000)


def test_the_drafter_and_target_are_named_from_the_catalog(qtbot) -> None:
    bar = SpeculationStatusBar()
    qtbot.addWidget(bar)
    draft = model_info("Qwen2.5 Coder 0.5B Instruct AWQ", "/m/draft.gguf")
    on = SpeculationState(active=True, drafter=draft.name, draft_tokens=4)
    info = EngineInfo("CPU", model_info(), draft, 4096, 2, 0, on)
    bar.show_engine_info(info, "Qwen2.5-Coder 1.5B Instruct · Q4_K_M", "Qwen2.5-Coder 0.5B Instruct · Q4_K_M")
    assert bar.target_label.text() == "Qwen2.5-Coder 1.5B Instruct · Q4_K_M"
    assert bar.speculation_text == "Draft: Qwen2.5-Coder 0.5B Instruct · Q4_K_M"
    assert "AWQ" not in bar.speculation_button.toolTip()


def test_the_same_names_and_explanations_everywhere(qtbot) -> None:
    from localchat.ui import bench_dialog, formatting

    bar = SpeculationStatusBar()
    qtbot.addWidget(bar)
    bar.resize(2000, 30)
    bar.show()
    bar.show_progress(TokenEvent("a", 4, 2, stats(4, 0.2, passes=2, drafted=4, accepted=2), ON))
    bar.generation_finished(GenerationResult("x", FinishReason.STOP, stats(4, 0.2, 2, 4, 2), ON))
    names = {formatting.ACCEPTANCE_LENGTH: formatting.ACCEPTANCE_LENGTH_TIP,
             formatting.ACCEPTANCE_RATE: formatting.ACCEPTANCE_RATE_TIP}
    assert bar.acceptance_length_label.text() == "Acceptance length 2.00"
    assert bar.acceptance_rate_label.text() == "Acceptance rate 50%"
    length = bar.acceptance_length_label
    qtbot.waitUntil(lambda: length.toolTip() == formatting.ACCEPTANCE_LENGTH_TIP, timeout=1000)
    assert bar.acceptance_rate_label.toolTip() == formatting.ACCEPTANCE_RATE_TIP
    assert "acceptance length 2.00" in bar.last_reply_label.text()
    for name, tip in names.items():
        column = bench_dialog.COLUMNS.index(name)
        assert bench_dialog.COLUMN_TIPS[column] == tip
        assert tip.startswith(name + ": ") and tip.count(".") <= 3 and tip.endswith(".")  # one sentence


def _long_texts(bar: SpeculationStatusBar) -> None:
    long_name = "A Very Long Model Name That Goes On And On 70B Instruct Preview Edition · Q4_K_M"
    draft = model_info("d", "/m/d.gguf")
    info = EngineInfo("CUDA", model_info(long_name), draft, 131072, 2, 0, ON, placement="local + 3 workers")
    bar.show_engine_info(info, long_name, "An Equally Long Drafter Name 0.5B Instruct · Q4_K_M")
    result = GenerationResult("x", FinishReason.STOP, stats(12345, 0.5, 4000, 9000, 8000), PAUSED)
    bar.generation_finished(result)


def test_long_texts_never_widen_the_window(qtbot) -> None:
    from PySide6.QtWidgets import QMainWindow

    window = QMainWindow()
    qtbot.addWidget(window)
    bar = SpeculationStatusBar(memory_probe=lambda: 12_000_000_000)
    window.setStatusBar(bar)
    window.resize(900, 500)
    window.show()
    qtbot.waitExposed(window)
    _long_texts(bar)
    for _ in range(5):
        bar.flash("Code copied")
        qtbot.wait(20)
    assert window.width() == 900
    assert bar.minimumSizeHint().width() < 500
    assert bar.compact  # narrow: the least needed labels made room
    assert not bar.last_reply_label.isVisible()
    for kept in (bar.target_label, bar.speculation_button, bar.flash_label):
        assert kept.isVisible() and kept.width() > 0
    assert bar.target_label.elided and "Very Long Model Name" in bar.target_label.toolTip()
    window.resize(420, 500)
    qtbot.wait(20)
    assert window.width() == 420
    assert bar.target_label.isVisible() and bar.speculation_button.isVisible()
    window.resize(3000, 500)
    qtbot.waitUntil(lambda: not bar.compact, timeout=1000)
    assert bar.last_reply_label.isVisible()


def test_a_flash_hides_neither_the_model_nor_the_toggle(qtbot) -> None:
    bar = SpeculationStatusBar()
    qtbot.addWidget(bar)
    bar.resize(1200, 30)
    bar.show()
    bar.show_engine_info(EngineInfo("CPU", model_info(), None, 4096, 2, 0, ON), "Fake 1B · Q4_K_M")
    bar.showMessage("Code copied", 100)  # QStatusBar's own call is a flash here too
    assert bar.flash_label.isVisible() and bar.flash_label.text() == "Code copied"
    assert bar.target_label.isVisible() and bar.speculation_button.isVisible()
    assert bar.currentMessage() == ""
    qtbot.waitUntil(lambda: not bar.flash_label.isVisible(), timeout=2000)
    assert bar.target_label.text() == "Fake 1B · Q4_K_M"


def test_lookup_alone_is_named_and_its_tooltip_says_why(qtbot) -> None:
    """Where the draft model cannot pay on this computer, adaptive speculation drafts by lookup:
    the toggle says so, and its tooltip gives the reason in words."""
    from localchat.engine.adaptive import lookup_instead

    bar = SpeculationStatusBar()
    qtbot.addWidget(bar)
    state = SpeculationState(active=True, drafter="n-gram", reason=lookup_instead(0.62), draft_tokens=16)
    bar.generation_finished(GenerationResult("x", FinishReason.STOP, stats(5), state))
    assert bar.speculation_text == "Draft: n-gram"
    tip = bar.speculation_button.toolTip()
    assert "draft model costs more than it saves for this model (0.62x at best)" in tip
    assert "conversation itself" in tip


def test_no_speed_is_shown_before_a_reply_has_tokens(qtbot) -> None:
    bar = SpeculationStatusBar(memory_probe=lambda: 300_000_000)
    qtbot.addWidget(bar)
    bar.show_engine_info(EngineInfo("CPU", model_info(), None, 4096, 2, 0, ON))
    bar.generation_finished(GenerationResult("", FinishReason.STOP, stats(0, 0.0), ON))
    assert bar.rate_label.text() == "\u2013 tok/s", "a reply without tokens reads as 0.0 tok/s"
