"""The governor's durable state: one SQLite file (and the gate's journal), migrated by version."""
