"""How to reach the MQTT broker: address, identity, credentials, TLS; and what its errors mean.

Shared by the telemetry source and the event publisher, which hold separate connections (the
client id gets a ``-sub`` or ``-pub`` suffix: two connections under one id would keep kicking
each other off the broker). A client is built afresh for every connection attempt, so that a
renewed certificate or CA file on disk is picked up at the next reconnect without a restart.

Certificate verification is always on. There is deliberately no "insecure" switch: a private CA
is configured with ``ca_file``.
"""

from __future__ import annotations

import ssl
from dataclasses import dataclass, field
from pathlib import Path

import aiomqtt
from aiomqtt.exceptions import MqttConnectError
from pydantic import SecretStr

from daemon.core.errors import SourceError, SourceUnavailable
from daemon.sources.mqtt.inbox import Inbox


class MqttRejected(SourceUnavailable):
    """The broker answered the connection with a refusal (bad credentials, not authorised)."""


class MqttTlsError(SourceError):
    """The TLS settings cannot be used (a certificate, key or CA file is missing or invalid)."""


@dataclass(frozen=True, slots=True)
class MqttTls:
    """TLS towards the broker; the server certificate and host name are always verified.

    Attributes:
        ca_file: CA bundle to trust; None trusts the system's store.
        cert_file: Client certificate (PEM), for brokers that authenticate clients by it.
        key_file: Its private key; None when the key is inside ``cert_file``.
    """

    ca_file: Path | None = None
    cert_file: Path | None = None
    key_file: Path | None = None

    def context(self) -> ssl.SSLContext:
        """A fresh verifying context, read from disk now; raises :class:`MqttTlsError`."""
        try:
            context = ssl.create_default_context(cafile=self.ca_file)
            context.sslsocket_class = _ClosingSSLSocket
            if self.cert_file is not None:
                context.load_cert_chain(self.cert_file, self.key_file)
        except (OSError, ssl.SSLError) as exc:
            message = f"cannot set up TLS for MQTT: {exc}"
            raise MqttTlsError(message, detail="tls") from exc
        return context


class _ClosingSSLSocket(ssl.SSLSocket):
    """An SSL socket that closes itself when the handshake fails.

    paho-mqtt (2.2) lets the socket go without closing it when the handshake fails (an
    untrusted broker certificate, say), so every reconnection attempt would leave a descriptor
    to the garbage collector and a ResourceWarning behind.
    """

    def do_handshake(self, block: bool = False) -> None:
        try:
            super().do_handshake(block)
        except BaseException:
            self.close()
            raise


@dataclass(frozen=True, slots=True)
class MqttBroker:
    """Connection settings of the broker.

    Attributes:
        host: Broker host name or address.
        port: Broker port (1883 plain, 8883 usual for TLS).
        client_id: Base client identifier; keep it unique per governor (include the host name).
        username: User name, or None for anonymous access.
        password: Password; a ``SecretStr`` so that it can never be printed by accident.
        tls: TLS settings, or None for a plain connection.
        keepalive_s: MQTT keepalive; a dead connection is noticed within 1.5 times this.
        timeout_s: Limit on connecting, subscribing and each publish acknowledgement.
    """

    host: str
    port: int = 1883
    client_id: str = "vllm-governor"
    username: str | None = None
    password: SecretStr | None = field(default=None, repr=False)
    tls: MqttTls | None = None
    keepalive_s: int = 60
    timeout_s: float = 10.0

    def client(
        self,
        suffix: str,
        *,
        will: aiomqtt.Will | None = None,
        inbox: Inbox | None = None,
        incoming_limit: int = 0,
    ) -> aiomqtt.Client:
        """A new, unconnected client identified as ``client_id + suffix``.

        Args:
            suffix: Appended to ``client_id``.
            will: Message the broker publishes if the connection dies.
            inbox: The incoming queue's owner (for a receiving client).
            incoming_limit: Bound of the incoming message queue (0: none).
        """
        return aiomqtt.Client(
            self.host,
            self.port,
            identifier=self.client_id + suffix,
            username=self.username,
            password=self.password.get_secret_value() if self.password else None,
            tls_context=self.tls.context() if self.tls else None,
            keepalive=self.keepalive_s,
            timeout=self.timeout_s,
            will=will,
            max_queued_incoming_messages=incoming_limit,
            queue_type=inbox.queue_type() if inbox else None,
        )


def translate(exc: aiomqtt.MqttError) -> SourceError:
    """An aiomqtt error as the governor's error tree sees it.

    aiomqtt flattens socket errors into ``MqttError(str(exc))``, so the text is all there is.
    Every transport failure gets the same detail, ``unreachable``: a broker restart is then one
    state change (down), not one per failure flavour (disconnected, then refused).
    """
    if isinstance(exc, MqttConnectError):
        return MqttRejected(f"the broker refused the connection: {exc}", detail="rejected")
    return SourceUnavailable(f"MQTT broker unreachable: {exc}", detail="unreachable")
