"""The fleet layer: governors of many hosts coordinated through etcd (issue 17).

Membership under a lease, a fleet freeze, and (later) a disruption budget per group of
replicas. etcd is reached through its v3 JSON gateway over the daemon's own HTTP client; see
``docs/fleet.md`` for why, with the measurements.
"""
