"""The encoder stage: one call per finalized segment into typed memory records."""
