"""``DrafterKind``: the one vocabulary for where draft tokens come from.

The same words are used from one end to the other: the ``kind`` of a
``[[model.drafter]]`` in drafters.toml, the catalog's pairing, the
``drafter`` setting stored in settings.toml and the engine's
``SpeculationConfig``. The settings layer is the lowest one, so every layer
can import it and no layer needs a table to translate another's words.

Not every layer uses every word: the catalog lists ``draft-model``, ``ngram``
and ``mtp``; the setting offers ``auto``, ``draft-model``, ``ngram`` and
``none``; a pairing is ``draft-model``, ``ngram`` or ``none``.
"""

from __future__ import annotations

import enum


class DrafterKind(enum.StrEnum):
    """Where draft tokens come from. A ``StrEnum``: each member equals the word stored in files."""

    AUTO = "auto"  # per step: n-gram when the context has a match, else the draft model
    MODEL = "draft-model"  # a second, small GGUF with the same vocabulary
    NGRAM = "ngram"  # prompt lookup over the context, no model
    MTP = "mtp"  # multi-token prediction heads or an assistant GGUF (catalog only, experimental)
    NONE = "none"  # plain decoding through the same loop
