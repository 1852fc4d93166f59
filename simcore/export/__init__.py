"""Exports of traces and simulated timelines to formats other tools read."""
