"""The Web API subset of the Slack double, answering as Slack does (HTTP 200, ``ok`` false).

Tokens: a bot token (``xoxb-``) for the ``auth.*`` and ``chat.*`` methods, the app-level token
(``xapp-``) for ``apps.connections.open``. Like Slack, a JSON body must carry its token in the
``Authorization`` header; a form may carry it as a ``token`` field. Block Kit is checked with
slack-sdk's models, so a message Slack would refuse (``invalid_blocks``) is refused here too.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from aiohttp import web
from slack_sdk.errors import SlackObjectFormationError
from slack_sdk.models.blocks import Block

from tests.support.slack_double.store import Ephemeral, Message, MessageStore

Answer = dict[str, Any]
APP_METHODS = frozenset({"apps.connections.open"})


class ApiError(Exception):
    """An ``{"ok": false, "error": ...}`` answer."""

    def __init__(self, error: str) -> None:
        super().__init__(error)
        self.error = error


async def read_args(request: web.Request) -> tuple[dict[str, Any], str | None]:
    """The call's arguments and its token, from the query string and the body."""
    args: dict[str, Any] = dict(request.query)
    token: str | None = None
    header = request.headers.get("Authorization", "")
    if header.startswith("Bearer "):
        token = header.removeprefix("Bearer ")
    if request.content_type == "application/json":
        body = await request.json()
        if not isinstance(body, dict):
            raise ApiError("invalid_json")
        args.update(body)
        # Slack reads a JSON call's token from the Authorization header only.
        args.pop("token", None)
    else:
        if request.can_read_body:
            form = await request.post()
            args.update({key: str(value) for key, value in form.items()})
        field = args.pop("token", None)
        token = token or field
    for key in ("blocks", "metadata"):
        if isinstance(args.get(key), str):
            try:
                args[key] = json.loads(args[key])
            except json.JSONDecodeError:
                raise ApiError(f"invalid_{key}") from None
    return args, token


def check_token(method: str, token: str | None, bot_token: str, app_token: str) -> None:
    """Refuse a call without the right kind of token, as Slack does."""
    if not token:
        raise ApiError("not_authed")
    if method in APP_METHODS:
        if not token.startswith("xapp-"):
            raise ApiError("not_allowed_token_type")
        if token != app_token:
            raise ApiError("invalid_auth")
    elif token.startswith("xapp-"):
        raise ApiError("not_allowed_token_type")
    elif token != bot_token:
        raise ApiError("invalid_auth")


class WebApi:
    """The methods' logic over a :class:`MessageStore`."""

    def __init__(self, store: MessageStore, connections_url: Callable[[], str]) -> None:
        self._store = store
        self._connections_url = connections_url
        self.methods: dict[str, Callable[[dict[str, Any]], Answer]] = {
            "auth.test": self._auth_test,
            "chat.postMessage": self._post_message,
            "chat.update": self._update,
            "chat.postEphemeral": self._post_ephemeral,
            "apps.connections.open": self._connections_open,
            "conversations.history": self._history,
            "usergroups.users.list": self._group_users,
        }

    def call(self, method: str, args: dict[str, Any]) -> Answer:
        """Run ``method``; raise :class:`ApiError` for Slack's error answers."""
        handler = self.methods.get(method)
        if handler is None:
            raise ApiError("unknown_method")
        return handler(args)

    def _auth_test(self, args: dict[str, Any]) -> Answer:
        return {
            "ok": True,
            "url": "https://double.slack.com/",
            "team": "Double",
            "user": "governor",
            "team_id": "T0DOUBLE",
            "user_id": "U0GOVERNOR",
            "bot_id": "B0GOVERNOR",
        }

    def _post_message(self, args: dict[str, Any]) -> Answer:
        channel = _channel(args)
        text, blocks = _content(args)
        thread_ts = args.get("thread_ts") or None
        if thread_ts is not None and (channel, thread_ts) not in self._store.messages:
            raise ApiError("thread_not_found")
        ts = self._store.next_ts()
        metadata = args.get("metadata")
        message = Message(channel, ts, text, blocks, thread_ts, metadata)
        self._store.messages[(channel, ts)] = message
        return {"ok": True, "channel": channel, "ts": ts, "message": _shown(message)}

    def _update(self, args: dict[str, Any]) -> Answer:
        channel = _channel(args)
        message = self._store.messages.get((channel, str(args.get("ts", ""))))
        if message is None:
            raise ApiError("message_not_found")
        text, blocks = _content(args)
        message.edits.append((message.text, message.blocks))
        message.text, message.blocks = text, blocks
        return {
            "ok": True,
            "channel": channel,
            "ts": message.ts,
            "text": text,
            "message": _shown(message),
        }

    def _post_ephemeral(self, args: dict[str, Any]) -> Answer:
        channel = _channel(args)
        user = str(args.get("user", ""))
        if not user:
            raise ApiError("user_not_in_channel")
        text, blocks = _content(args)
        ts = self._store.next_ts()
        self._store.ephemerals.append(Ephemeral(channel, user, text, blocks, ts))
        return {"ok": True, "message_ts": ts}

    def _connections_open(self, args: dict[str, Any]) -> Answer:
        return {"ok": True, "url": self._connections_url()}

    def _history(self, args: dict[str, Any]) -> Answer:
        # Top-level messages only, newest first; metadata only when asked for, as Slack does.
        channel = _channel(args)
        limit = int(args.get("limit") or 100)
        with_metadata = str(args.get("include_all_metadata", "")).lower() in ("true", "1")
        found = [m for m in reversed(self._store.in_channel(channel)) if m.thread_ts is None]
        shown = []
        for message in found[:limit]:
            answer = _shown(message)
            if with_metadata and message.metadata is not None:
                answer["metadata"] = message.metadata
            shown.append(answer)
        return {"ok": True, "messages": shown, "has_more": len(found) > limit}

    def _group_users(self, args: dict[str, Any]) -> Answer:
        members = self._store.groups.get(str(args.get("usergroup", "")))
        if members is None:
            raise ApiError("no_such_subteam")
        return {"ok": True, "users": sorted(members)}


def _channel(args: dict[str, Any]) -> str:
    channel = str(args.get("channel", ""))
    if not channel or channel[0] not in "CDG":
        raise ApiError("channel_not_found")
    return channel


def _content(args: dict[str, Any]) -> tuple[str, list[dict[str, Any]]]:
    text = str(args.get("text", ""))
    blocks = args.get("blocks") or []
    if not isinstance(blocks, list) or len(blocks) > 50:
        raise ApiError("invalid_blocks")
    for block in blocks:
        try:
            parsed = Block.parse(block)
            if parsed is None:
                raise ApiError("invalid_blocks")
            parsed.validate_json()
        except (SlackObjectFormationError, KeyError, TypeError):
            raise ApiError("invalid_blocks") from None
    if not text and not blocks:
        raise ApiError("no_text")
    return text, blocks


def _shown(message: Message) -> Answer:
    shown: Answer = {
        "type": "message",
        "user": "U0GOVERNOR",
        "bot_id": "B0GOVERNOR",
        "text": message.text,
        "ts": message.ts,
    }
    if message.blocks:
        shown["blocks"] = message.blocks
    if message.thread_ts is not None:
        shown["thread_ts"] = message.thread_ts
    return shown
