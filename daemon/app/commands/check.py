"""``vllm-governor check``: validate a configuration and policy files, as CI would."""

from __future__ import annotations

import argparse
from pathlib import Path

from daemon.app.defaults import DEFAULT_CONFIG, EXIT_CONFIG, EXIT_OK
from daemon.core.errors import ConfigError, ConfigIssue


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the ``check`` subcommand."""
    parser = subparsers.add_parser(
        "check",
        help="validate the configuration and policy files",
        description="Validate config.toml and policy files. Policies are checked against the "
        "signals the configuration declares (the built-in sources', its Prometheus queries and "
        "MQTT subscriptions). Prints one 'path:line:col: message' per problem; exits 0 when "
        "everything is valid, 78 (a broken configuration, as every command says it) otherwise.",
    )
    parser.add_argument("--config", type=Path, default=DEFAULT_CONFIG, help="config.toml to check")
    parser.add_argument(
        "policies",
        nargs="*",
        type=Path,
        metavar="POLICY_PATH",
        help="policy files or directories (default: the config's policy_dirs)",
    )
    parser.set_defaults(main=main)


def main(args: argparse.Namespace) -> int:
    """Check every file and print each problem on its own line."""
    from daemon.core.config_files import load_config
    from daemon.policy.loading import load_policies, policy_files
    from daemon.sources.registry import BUILTIN, signal_registry

    issues: list[ConfigIssue] = []
    policy_paths: list[Path] = list(args.policies)
    targets: list[str] | None = None
    envelopes = None
    live_targets: list[str] = []
    # Without a usable configuration, policies may read the built-in sources' signals only.
    signals = BUILTIN
    try:
        config = load_config(args.config)
        signals = signal_registry(config, args.config)
    except ConfigError as exc:
        issues.extend(exc.issues)
    else:
        targets = config.target_names()
        envelopes = config.envelopes()
        live_targets = config.live_target_names()
        if not policy_paths:
            policy_paths = [path for path in config.governor.policy_dirs if path.exists()]
    files, _ = policy_files(policy_paths)
    loaded = load_policies(policy_paths, targets, envelopes, live_targets, signals)
    issues.extend(loaded.issues)
    checked = 1 + len(files)
    for issue in issues:
        print(issue.render())
    if issues:
        return EXIT_CONFIG
    print(f"ok: {checked} file(s) valid")
    return EXIT_OK
