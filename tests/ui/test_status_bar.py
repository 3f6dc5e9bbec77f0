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
    assert bar.acceptance_length_label.text() == "Accept. length 2.50"
    assert bar.acceptance_rate_label.text() == "Accepted 75%"
    assert bar.context_label.text() == "Context 30 / 4,096"
    assert bar.memory_label.text() == "Engine 300.0 MB"
    assert bar.backend_label.text() == "CPU"
    assert bar.speculation_text == "Draft: Fake-0.1B"
    bar.generation_finished(GenerationResult("x", FinishReason.STOP, stats(20, 1.0, 10, 20, 10), ON))
    assert not bar.timer.isActive()
    assert bar.last_reply_label.text() == "Last reply: 20.0 tok/s, accept. length 2.00"


def test_one_click_toggles_speculation_for_the_next_reply(qtbot) -> None:
    bar = SpeculationStatusBar()
    qtbot.addWidget(bar)
    with qtbot.waitSignal(bar.speculation_toggled) as blocker:
        bar.speculation_button.click()
    assert blocker.args == [False]
    assert "off" in bar.speculation_text
    bar.speculation_button.click()
    assert bar.speculation_enabled


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
    paused = SpeculationState(active=False, drafter="Fake-0.1B", reason=reason, draft_tokens=4, paused=True)
    bar.show_progress(TokenEvent("a", 3, 0, stats(3, 0.2), paused))
    qtbot.waitUntil(lambda: bar.speculation_text.startswith("Speculation paused"), timeout=1000)
    assert bar.speculation_text == "Speculation paused: 0.62x at acceptance 0.55; retrying in 128 tokens"
    assert bar.speculation_button.text().startswith("Speculation paused")
    assert "retrying in 128 tokens" in bar.speculation_button.toolTip()
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
