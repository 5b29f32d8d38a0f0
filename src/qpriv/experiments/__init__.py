"""Experiments: the main job (quickstart) and, later, the registry of paper tables and figures."""
