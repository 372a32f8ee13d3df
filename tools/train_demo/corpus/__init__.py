"""Generators of the demo model's synthetic corpus (see gen_corpus.py)."""
