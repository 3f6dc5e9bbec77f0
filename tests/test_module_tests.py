"""The pure layers' modules and the tests that test them, as a checked list: every module of
engine, engine.tooluse, catalog, hub, chat, settings, host, bench and toolservers is listed with at
least one test file, each listed file exists and uses the module (imports it, imports a name its
package re-exports from it, names it as a child process's target, or does one of these through a
helper module of tests/ it imports). A new module without a test, a removed module still listed, or
a test that no longer touches its module fails here.
"""

from __future__ import annotations

import ast
import functools
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PURE_LAYERS = (
    "engine", "engine/tooluse", "catalog", "hub", "chat", "settings", "host", "bench", "toolservers",
)

# module: test files, relative to tests/
MODULE_TESTS: dict[str, tuple[str, ...]] = {
    "localchat.engine.adaptive": ("engine/test_adaptive.py", "ui/test_layout.py"),
    "localchat.engine.backend": ("engine/test_grammar.py", "catalog/test_integrity.py"),
    "localchat.engine.calibration": ("engine/test_calibration.py", "engine/test_stop_rule.py"),
    "localchat.engine.chat_format": ("engine/test_chat_format.py", "engine/test_tool_render.py"),
    "localchat.engine.compat": ("engine/test_load_errors.py",),
    "localchat.engine.constrained": ("engine/test_constrained_loop.py", "engine/test_grammar.py"),
    "localchat.engine.costs": ("engine/test_costs.py", "engine/test_profile.py"),
    "localchat.engine.decision_trace": ("engine/test_adaptive.py",),
    "localchat.engine.devices": ("engine/test_placement.py",),
    "localchat.engine.draft_sources": ("engine/test_draft_sources.py", "engine/test_speculative.py"),
    "localchat.engine.engine": ("engine/test_engine.py", "engine/test_exact_real.py"),
    "localchat.engine.errors": ("engine/test_load_errors.py", "engine/test_engine.py"),
    "localchat.engine.grammar": ("engine/test_grammar.py", "engine/test_constrained_loop.py"),
    "localchat.engine.placement": ("engine/test_placement.py",),
    "localchat.engine.profile": ("engine/test_profile.py", "engine/test_profile_real.py"),
    "localchat.engine.quantize": ("engine/test_quantize.py",),
    "localchat.engine.rpc_wire": ("engine/test_rpc_wire.py", "bench/test_routes.py"),
    "localchat.engine.sampling": ("engine/test_sampling.py",),
    "localchat.engine.speculation_modes": ("engine/test_speculation_modes.py", "bench/test_modes.py"),
    "localchat.engine.speculative": ("engine/test_speculative.py", "engine/test_adaptive_real.py"),
    "localchat.engine.state_cache": ("engine/test_state_cache.py", "engine/test_state_exact.py"),
    "localchat.engine.stats": ("engine/test_stats.py", "services/test_shown.py"),
    "localchat.engine.stop_rule": ("engine/test_stop_rule.py",),
    "localchat.engine.textruns": ("engine/test_textruns.py", "engine/test_speculative.py"),
    "localchat.engine.types": ("server/test_api.py", "host/test_jobs.py"),
    "localchat.engine.tooluse.formats": ("engine/test_tool_formats.py", "engine/test_tool_parser.py"),
    "localchat.engine.tooluse.grammar": ("engine/test_tool_grammar.py",),
    "localchat.engine.tooluse.jsonscan": ("engine/test_jsonscan.py",),
    "localchat.engine.tooluse.parser": ("engine/test_tool_parser.py", "engine/test_tool_calls_real.py"),
    "localchat.engine.tooluse.plan": ("engine/test_tool_formats.py", "engine/test_tool_calls_real.py"),
    "localchat.engine.tooluse.render": ("engine/test_tool_render.py",),
    "localchat.engine.tooluse.validate": ("engine/test_tool_formats.py",),
    "localchat.catalog.drafter_payoff": ("catalog/test_drafter_payoff.py",),
    "localchat.catalog.drafters": ("catalog/test_drafters.py", "hub/test_pull.py"),
    "localchat.catalog.errors": ("catalog/test_gguf.py", "catalog/test_drafters.py"),
    "localchat.catalog.gguf": ("catalog/test_gguf.py", "hub/test_pull.py"),
    "localchat.catalog.integrity": ("catalog/test_integrity.py",),
    "localchat.catalog.library": ("catalog/test_library.py", "catalog/test_gguf.py"),
    "localchat.catalog.names": ("catalog/test_names.py",),
    "localchat.catalog.sizes": ("catalog/test_sizes.py", "ui/test_model_manager.py"),
    "localchat.catalog.starter_choice": ("catalog/test_starter_choice.py", "catalog/test_cli_models.py"),
    "localchat.hub.download": ("hub/test_download.py", "hub/test_pull.py"),
    "localchat.hub.errors": ("hub/test_pull.py", "hub/test_token.py"),
    "localchat.hub.pull": ("hub/test_pull.py",),
    "localchat.hub.pypi_models": ("hub/test_pull.py",),
    "localchat.hub.pypi_source": ("hub/test_pull.py",),
    "localchat.hub.search": ("hub/test_search.py",),
    "localchat.hub.token": ("hub/test_token.py", "ui/test_hub_token_page.py"),
    "localchat.chat.attachments": ("chat/test_attachments.py",),
    "localchat.chat.export": ("chat/test_export.py", "chat/test_tool_rounds.py"),
    "localchat.chat.prompt": ("chat/test_prompt.py", "chat/test_tool_rounds.py"),
    "localchat.chat.rounds": ("chat/test_tool_rounds.py", "ui/test_tool_blocks.py"),
    "localchat.chat.store": ("chat/test_store.py", "chat/test_kill.py"),
    "localchat.chat.titles": ("chat/test_titles.py",),
    "localchat.settings.drafter_kind": ("catalog/test_library.py", "settings/test_options.py"),
    "localchat.settings.folders": ("catalog/test_cli_models.py", "ui/test_main_window.py"),
    "localchat.settings.options": ("settings/test_options.py", "settings/test_toml_file.py"),
    "localchat.settings.presets": ("settings/test_presets.py",),
    "localchat.settings.settings": ("ui/test_settings_dialog.py", "settings/test_options.py"),
    "localchat.settings.toml_file": ("settings/test_toml_file.py", "catalog/test_cli_models.py"),
    "localchat.host.bench_child": ("host/test_bench_child.py",),
    "localchat.host.child": ("host/test_child.py", "engine/test_rpc_real.py"),
    "localchat.host.engine_child": ("host/test_engine_child.py", "host/test_batching.py"),
    "localchat.host.events": ("host/test_events.py", "server/test_api.py"),
    "localchat.host.failure_words": ("host/test_failure_words.py", "engine/test_rpc_real.py"),
    "localchat.host.jobs": ("host/test_jobs.py", "host/test_supervisor.py"),
    "localchat.host.protocol": ("host/test_protocol.py", "engine/test_rpc_real.py"),
    "localchat.host.sources": ("server/test_api.py", "server/test_surfaces.py"),
    "localchat.host.supervisor": ("host/test_supervisor.py", "server/test_api.py"),
    "localchat.bench.api_engine": ("bench/test_api_engine.py",),
    "localchat.bench.link_delay": ("bench/test_routes.py",),
    "localchat.bench.memory": ("bench/test_memory.py",),
    "localchat.bench.modelled": ("bench/test_modelled.py",),
    "localchat.bench.modes": ("bench/test_modes.py", "bench/test_report.py"),
    "localchat.bench.oracle": ("bench/test_report.py", "bench/test_routes.py"),
    "localchat.bench.prompts": ("bench/test_report.py", "bench/test_routes.py"),
    "localchat.bench.report": ("bench/test_report.py", "bench/test_routes.py"),
    "localchat.bench.route_facts": ("bench/test_routes.py",),
    "localchat.bench.routes": ("bench/test_routes.py",),
    "localchat.bench.runner": ("bench/test_routes.py", "bench/test_modelled.py"),
    "localchat.toolservers.config": ("toolservers/test_config.py", "toolservers/test_hub.py"),
    "localchat.toolservers.framing": ("toolservers/test_framing.py",),
    "localchat.toolservers.hub": ("toolservers/test_hub.py",),
    "localchat.toolservers.imports": ("toolservers/test_config.py",),
    "localchat.toolservers.stdio_pipe": ("toolservers/test_framing.py",),
    "localchat.toolservers.tools": ("toolservers/test_tools.py",),
}


def modules() -> set[str]:
    found = set()
    for layer in PURE_LAYERS:
        for f in (ROOT / "localchat" / layer).glob("*.py"):
            if f.name != "__init__.py":
                found.add(".".join(f.relative_to(ROOT).with_suffix("").parts))
    return found


@functools.cache
def reexports(package: str) -> dict[str, str]:
    """Names ``package``'s __init__ imports, and the module each comes from."""
    init = ROOT.joinpath(*package.split("."), "__init__.py")
    if not init.exists():
        return {}
    out = {}
    for node in ast.walk(ast.parse(init.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module:
            out.update({a.asname or a.name: node.module for a in node.names})
    return out


@functools.cache
def used(path: Path) -> frozenset[str]:
    """The localchat modules a test file (or a tests/ helper it imports) uses."""
    got: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module:
            if node.module.startswith("tests.") or node.level:
                base = path.parents[node.level - 1] if node.level else ROOT
                helper = base.joinpath(*node.module.split(".")).with_suffix(".py")
                if helper.exists():
                    got |= used(helper)
            elif node.module.startswith("localchat"):
                got.add(node.module)
                package_names = reexports(node.module)
                for a in node.names:
                    got.add(f"{node.module}.{a.name}")
                    if a.name in package_names:
                        got.add(package_names[a.name])
        elif isinstance(node, ast.Import):
            got.update(a.name for a in node.names)
        elif isinstance(node, ast.Constant) and str(node.value).startswith("localchat."):
            got.add(str(node.value).split(":")[0])  # a child process's target, "localchat.host.x:serve"
    return frozenset(got)


def test_every_module_of_the_pure_layers_is_listed_and_nothing_else() -> None:
    listed = set(MODULE_TESTS)
    assert sorted(modules() - listed) == [], "new modules need a test file listed here"
    assert sorted(listed - modules()) == [], "listed modules that no longer exist"


def test_every_listed_test_file_exists_and_uses_its_module() -> None:
    problems = []
    for module, files in MODULE_TESTS.items():
        if not files:
            problems.append(f"{module}: no test file")
        for name in files:
            path = ROOT / "tests" / name
            if not path.is_file():
                problems.append(f"{module}: {name} does not exist")
            elif module not in used(path):
                problems.append(f"{module}: {name} does not use it")
    assert problems == []
