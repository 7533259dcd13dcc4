"""How the daemon lives: supervised tasks, the service manager, the control socket, own metrics.

Also the channels of notify actions. Every other engine package builds on this one.
"""
