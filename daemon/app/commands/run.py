"""``vllm-governor run``: the daemon itself, as systemd starts it.

Signal handlers only ask the governor to act: SIGTERM and SIGINT start a graceful stop, SIGHUP a
reload. A stop that outlives ``shutdown_deadline_s`` ends the process from a timer thread (a
blocked event loop could not do it), with a non-zero status and a log line saying so.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import signal
import sys
import threading
from pathlib import Path
from typing import TYPE_CHECKING

from daemon.app.config_broken import config_broken
from daemon.app.defaults import DEFAULT_CONFIG, EXIT_CONFIG, EXIT_DEADLINE, EXIT_FAILURE, EXIT_OK
from daemon.app.logging_setup import configure_logging
from daemon.app.systemd_notify import SystemdNotifier
from daemon.core.clock import SystemClock
from daemon.core.errors import ConfigError, ControlError, SecretError, TaskCrashedError

if TYPE_CHECKING:
    from daemon.core.secrets import GovernorSecrets
    from daemon.engine.governor import LoadedConfig

log = logging.getLogger(__name__)


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the ``run`` subcommand."""
    parser = subparsers.add_parser(
        "run",
        help="run the daemon (as systemd does)",
        description="Run the governor daemon in the foreground. SIGTERM stops it gracefully, "
        "SIGHUP reloads its configuration and policies.",
    )
    parser.add_argument("--config", type=Path, default=DEFAULT_CONFIG, help="config.toml to use")
    parser.set_defaults(main=main)


def main(args: argparse.Namespace) -> int:
    """Load the configuration, then serve until stopped."""
    from daemon.core.config_files import load_config
    from daemon.core.secrets import load_secrets
    from daemon.engine.governor import LoadedConfig
    from daemon.sources.registry import signal_registry

    clock = SystemClock()
    try:
        config = load_config(args.config)
        signal_registry(config, args.config)  # a configured signal may not shadow another
        secrets = load_secrets()
    except ConfigError as exc:
        return config_broken(exc)
    except SecretError as exc:
        print(f"vllm-governor: {exc}", file=sys.stderr)
        return EXIT_CONFIG
    configure_logging(config.logging.level, config.logging.format, secrets.values())
    notifier = SystemdNotifier()
    try:
        loaded = LoadedConfig(config, args.config, clock.wall())
        return asyncio.run(_serve(loaded, clock, notifier, secrets))
    finally:
        notifier.close()


async def _serve(
    loaded: LoadedConfig, clock: SystemClock, notifier: SystemdNotifier, secrets: GovernorSecrets
) -> int:
    from actuators.kinds import KINDS
    from daemon.engine.governor import Governor
    from daemon.engine.storage.state_db import StateSchemaError

    try:
        governor = Governor(
            loaded,
            clock,
            notifier,
            secrets,
            kinds=KINDS,
        )
    except ConfigError as exc:  # e.g. a policy directory that is missing or cannot be read
        return config_broken(exc)
    except StateSchemaError as exc:  # the state directory was written by a newer governor
        print(f"vllm-governor: {exc}", file=sys.stderr)
        return EXIT_CONFIG
    deadline_s = loaded.config.governor.shutdown_deadline_s
    loop = asyncio.get_running_loop()

    def on_stop_signal(signum: int) -> None:
        log.info("stop requested", extra={"signal": signal.Signals(signum).name})
        _arm_last_resort(deadline_s)
        governor.request_stop()

    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, on_stop_signal, signum)
    loop.add_signal_handler(signal.SIGHUP, governor.request_reload)
    log.info("governor starting", extra={"config": str(loaded.path), "pid": os.getpid()})
    try:
        await governor.run()
    except (TaskCrashedError, ControlError) as exc:
        log.critical("governor stopping after a failure", extra={"error": str(exc)})
        return EXIT_FAILURE
    log.info("governor stopped")
    return EXIT_OK


def _arm_last_resort(deadline_s: float) -> None:
    """End the process if the graceful stop takes longer than ``deadline_s``."""

    def give_up() -> None:
        log.critical(
            "graceful stop exceeded its deadline; exiting", extra={"deadline_s": deadline_s}
        )
        logging.shutdown()
        os._exit(EXIT_DEADLINE)

    timer = threading.Timer(deadline_s, give_up)
    timer.daemon = True  # a finished stop must not wait for it
    timer.start()
