"""The actuator of the admission gate: HAProxy's per-server ``maxconn``, moved live."""
