"""What the governor changes: the runner and its journal, routing, the gate's loop, log levels."""
