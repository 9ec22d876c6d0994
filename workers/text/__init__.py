"""Reading what people and assistants write: markdown blocks and the passages of a long turn."""
