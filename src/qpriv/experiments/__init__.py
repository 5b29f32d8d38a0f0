"""Experiments: the main job (quickstart) and the registry of every paper table and figure."""
