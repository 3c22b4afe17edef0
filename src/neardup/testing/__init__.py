"""Helpers for tests and benchmarks that users may run too.

    synth        a synthetic corpus with planted near-duplicates of known similarity
"""
