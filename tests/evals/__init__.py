"""The team's research instruments: fitting scripts, paired comparisons and the in-process
recall probe. They measure the product and write the data files it loads; they are not
shipped in the wheel (`python -m tests.evals.<module>` from the repository root)."""
