"""What the governor sees and concludes: signals, the policies in force, their evaluator, ledger."""
