from __future__ import annotations

import pytest

from localchat.settings import OPTIONS, OPTIONS_BY_NAME, SECTIONS, InvalidValueError, Settings, option


@pytest.mark.parametrize("opt", OPTIONS, ids=lambda o: o.name)
def test_every_default_fits_its_own_declaration(opt) -> None:
    assert type(opt.default) is opt.type
    assert opt.validate(opt.default) == opt.default
    if opt.choices:
        assert opt.type is str
        assert opt.default in opt.choice_values
    if opt.minimum is not None or opt.maximum is not None:
        assert opt.type in (int, float)
    if opt.minimum is not None and opt.maximum is not None:
        assert opt.minimum <= opt.maximum
    assert opt.label and opt.description.strip()
    assert opt.section in SECTIONS


def test_names_are_unique() -> None:
    assert len(OPTIONS_BY_NAME) == len(OPTIONS)


def test_the_issue_list_is_declared() -> None:
    for name in (
        "speculation",
        "drafter",
        "draft_tokens",
        "adaptive",
        "temperature",
        "top_k",
        "top_p",
        "min_p",
        "repeat_penalty",
        "context_length",
        "threads",
        "gpu_layers",
        "models_folder",
        "colour_accepted_tokens",
        "theme",
    ):
        assert option(name).visible
    assert option("draft_tokens").default == 4
    assert (option("draft_tokens").minimum, option("draft_tokens").maximum) == (1, 16)
    assert option("speculation").default is True
    assert option("colour_accepted_tokens").default is False
    assert option("threads").default == 0
    assert option("gpu_layers").default == -1
    assert set(option("drafter").choice_values) == {"auto", "draft-model", "ngram", "none"}


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("draft_tokens", 0),
        ("draft_tokens", 17),
        ("draft_tokens", 4.0),
        ("draft_tokens", True),
        ("draft_tokens", "4"),
        ("speculation", 1),
        ("temperature", float("nan")),
        ("temperature", -0.1),
        ("drafter", "fast"),
        ("models_folder", 3),
    ],
)
def test_bad_values_are_refused(name: str, value: object) -> None:
    with pytest.raises(InvalidValueError, match=name):
        option(name).validate(value)


def test_int_is_accepted_for_a_float_option() -> None:
    assert option("temperature").validate(1) == 1.0
    assert isinstance(option("temperature").validate(1), float)


def test_settings_set_get_reset() -> None:
    s = Settings()
    assert s.get_int("draft_tokens") == 4
    s.set("draft_tokens", 8)
    assert s.get_int("draft_tokens") == 8
    assert s.non_defaults() == {"draft_tokens": 8}
    with pytest.raises(InvalidValueError):
        s.set("draft_tokens", 99)
    assert s.get_int("draft_tokens") == 8
    s.set("draft_tokens", 4)
    assert s.non_defaults() == {}
    s.set("temperature", 0)
    assert s.get_float("temperature") == 0.0
    assert s.reset("temperature") == 0.7
    assert s.is_default("temperature")
    with pytest.raises(KeyError):
        s.get("nope")


def test_drafter_choices_are_the_shared_vocabulary() -> None:
    from localchat.settings.drafter_kind import DrafterKind

    assert {DrafterKind(v) for v in option("drafter").choice_values} == set(DrafterKind) - {DrafterKind.MTP}
    # Settings files written before the vocabulary was shared said "model".
    assert option("drafter").validate("model") == "draft-model"
    assert Settings({"drafter": "model"}).drafter is DrafterKind.MODEL


@pytest.mark.parametrize("opt", OPTIONS, ids=lambda o: o.name)
def test_every_option_has_a_typed_property(opt) -> None:
    import typing

    from localchat.settings import OptionReader
    from localchat.settings.drafter_kind import DrafterKind

    prop = getattr(OptionReader, opt.name, None)
    assert isinstance(prop, property), f"OptionReader has no property {opt.name}"
    returns = typing.get_type_hints(prop.fget)["return"]
    assert returns is (DrafterKind if opt.name == "drafter" else opt.type)
    value = getattr(Settings(), opt.name)
    assert value == opt.default and isinstance(value, opt.type)
