"""A throwaway CA and a server certificate for 127.0.0.1, made with the openssl command."""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True, slots=True)
class ServerCertificates:
    """Files of one CA and of a server certificate it signed."""

    ca: Path
    cert: Path
    key: Path


def make_certificates(openssl: str, directory: Path, name: str = "test") -> ServerCertificates:
    """A CA named ``name`` and a certificate for 127.0.0.1 and localhost signed by it."""
    directory.mkdir(parents=True, exist_ok=True)
    ca_key, ca = directory / f"{name}-ca.key", directory / f"{name}-ca.crt"
    key, request, cert = (directory / f"{name}-server.{ext}" for ext in ("key", "csr", "crt"))
    extensions = directory / f"{name}-server.ext"
    extensions.write_text("subjectAltName=IP:127.0.0.1,DNS:localhost\n")
    ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
    sign = ["x509", "-req", "-in", request, "-CA", ca, "-CAkey", ca_key, "-CAcreateserial"]
    for command in (
        ["req", "-x509", *ec, "-keyout", ca_key, "-out", ca, "-days", "2", "-subj", f"/CN={name}"],
        ["req", *ec, "-keyout", key, "-out", request, "-subj", "/CN=localhost"],
        [*sign, "-out", cert, "-days", "2", "-extfile", extensions],
    ):
        subprocess.run([openssl, *map(str, command)], check=True, capture_output=True)
    return ServerCertificates(ca, cert, key)
