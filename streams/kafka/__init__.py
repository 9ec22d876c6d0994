"""Kafka plumbing: serde, producing, the fetch guard, the stage guard (transient rule, dead
letters), topics, lag and plain readers, and their errors."""
