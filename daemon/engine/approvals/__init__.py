"""Changes that wait for a person: proposals, their judgement at click time, their application."""
