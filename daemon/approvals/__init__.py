"""Approvals: risky changes wait for a person, and a click is checked before anything moves.

Pure, like the policy core: a :class:`~daemon.approvals.proposal.Proposal` is built from an
accepted approval-risk decision and bound to the hash of its exact change; the
:mod:`~daemon.approvals.state_machine` decides what a click does given a fresh re-check of the
world; :mod:`~daemon.approvals.blocks` renders the Slack message; and
:mod:`~daemon.approvals.signatures` verifies HTTP interactivity requests. Talking to Slack, the
SQLite store and the actuators is the engine's business.
"""
