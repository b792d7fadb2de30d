"""Bounded recovery's pure policy: config, incidents, decisions, transitions."""
