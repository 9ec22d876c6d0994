"""Fakes at the network boundary: real servers on loopback, scripted for tests."""
