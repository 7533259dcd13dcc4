"""The approvals' Slack adapter: messages, buttons and slash commands (Socket Mode or HTTP)."""
